package state

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/backend/cpu"
)

func newPool(t testing.TB, fp uint64) *Pool {
	t.Helper()
	p, err := NewPool(cpu.New(1), 3, 2, 3, 5, 4, 2, fp)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fill writes distinct values into every state row of slot.
func fill(p *Pool, slot int, seed float32) {
	for l := range p.Conv {
		c := make([]float32, p.ConvRows*p.ConvCols)
		r := make([]float32, p.RecRows*p.RecCols)
		for i := range c {
			c[i] = seed + float32(l*1000+i)
		}
		for i := range r {
			r[i] = -seed - float32(l*1000+i)
		}
		p.be.WriteStateRows(p.Conv[l], slot*p.ConvRows, c)
		p.be.WriteStateRows(p.Rec[l], slot*p.RecRows, r)
	}
}

func slotData(p *Pool, slot int) []float32 {
	var out []float32
	for l := range p.Conv {
		c := make([]float32, p.ConvRows*p.ConvCols)
		r := make([]float32, p.RecRows*p.RecCols)
		p.be.ReadStateRows(p.Conv[l], slot*p.ConvRows, c)
		p.be.ReadStateRows(p.Rec[l], slot*p.RecRows, r)
		out = append(append(out, c...), r...)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	p := newPool(t, 42)
	fill(p, 1, 0.5)
	fill(p, 2, 7)
	snap, err := p.Snapshot(1, 123)
	if err != nil {
		t.Fatal(err)
	}
	before0 := slotData(p, 0)
	pos, err := p.Restore(2, snap)
	if err != nil || pos != 123 {
		t.Fatalf("Restore = %d, %v", pos, err)
	}
	a, b := slotData(p, 1), slotData(p, 2)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("value %d: %g after restore, want %g", i, b[i], a[i])
		}
	}
	for i, v := range slotData(p, 0) {
		if v != before0[i] {
			t.Fatal("restore touched another slot")
		}
	}
}

func TestRestoreRefuses(t *testing.T) {
	p := newPool(t, 42)
	fill(p, 0, 1)
	snap, _ := p.Snapshot(0, 9)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), snap...)) }
	cases := []struct {
		name, want string
		snap       []byte
	}{
		{"empty", "not a recurrent-state", nil},
		{"magic", "not a recurrent-state", mut(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"version", "version", mut(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 2); return b })},
		{"fingerprint", "another model", mut(func(b []byte) []byte { b[8] ^= 1; return b })},
		{"layout", "layout", mut(func(b []byte) []byte { b[28] ^= 1; return b })},
		{"truncated", "bytes", mut(func(b []byte) []byte { return b[:len(b)-8] })},
		{"damaged", "checksum", mut(func(b []byte) []byte { b[headerSize+3] ^= 0x40; return b })},
	}
	fill(p, 1, 5)
	keep := slotData(p, 1)
	for _, c := range cases {
		if _, err := p.Restore(1, c.snap); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	for i, v := range slotData(p, 1) {
		if v != keep[i] {
			t.Fatal("a refused restore changed the slot")
		}
	}
	other := newPool(t, 43)
	if _, err := other.Restore(0, snap); err == nil {
		t.Error("snapshot of another fingerprint accepted")
	}
	if _, err := p.Restore(3, snap); err == nil {
		t.Error("slot out of range accepted")
	}
	if _, err := p.Snapshot(-1, 0); err == nil {
		t.Error("Snapshot of slot -1 accepted")
	}
}

func FuzzRestore(f *testing.F) {
	p := newPool(f, 7)
	fill(p, 0, 3)
	snap, _ := p.Snapshot(0, 5)
	f.Add(snap)
	f.Add(snap[:headerSize])
	f.Add([]byte("IXRS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pos, err := p.Restore(1, b)
		if err == nil {
			again, err := p.Snapshot(1, pos)
			if err != nil || string(again) != string(b) {
				t.Fatalf("accepted snapshot does not round-trip")
			}
		}
	})
}
