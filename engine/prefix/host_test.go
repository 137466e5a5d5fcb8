package prefix

import (
	"bytes"
	"testing"
)

func TestHostPool(t *testing.T) {
	h := NewHostPool(3 * 16)
	key := func(i int) Key { return Seed([]byte{byte(i)}) }
	data := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 16) }
	for i := 0; i < 3; i++ {
		h.Save(key(i), data(i))
	}
	dst := make([]byte, 16)
	if err := h.Load(key(0), dst); err != nil || !bytes.Equal(dst, data(0)) {
		t.Fatalf("load 0: %v", err)
	}
	h.Save(key(3), data(3)) // evicts 1, the least recently used
	cases := []struct {
		i    int
		held bool
	}{{0, true}, {1, false}, {2, true}, {3, true}}
	for _, c := range cases {
		if h.Has(key(c.i)) != c.held {
			t.Fatalf("block %d held = %v", c.i, !c.held)
		}
		err := h.Load(key(c.i), dst)
		if (err == nil) != c.held || c.held && !bytes.Equal(dst, data(c.i)) {
			t.Fatalf("block %d: %v", c.i, err)
		}
	}
	h.Save(key(9), make([]byte, 100)) // larger than the pool
	if err := h.Load(key(2), make([]byte, 8)); err == nil {
		t.Fatal("size mismatch accepted")
	}
	st := h.Stats()
	if st.Blocks != 3 || st.Bytes != 48 || st.Evicts != 1 || h.Has(key(9)) {
		t.Fatalf("stats %+v", st)
	}
}
