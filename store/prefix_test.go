package store

import (
	"bytes"
	"errors"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/infernix/infernix/engine/prefix"
)

func block(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*5)
	}
	return b
}

func mustOpen(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPrefixPersistAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	fp := []byte("model-a")
	k1, k2 := prefix.Seed([]byte("1")), prefix.Seed([]byte("2"))
	s := mustOpen(t, dir)
	p, err := s.Prefix(fp, 256, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Save(k1, block(256, 1))
	p.Save(k2, block(256, 2))
	p.Save(k2, block(100, 9)) // wrong size: ignored
	p.Close()
	if st := p.Stats(); st.Saved != 2 || st.Blocks != 2 {
		t.Fatalf("stats %+v", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, dir)
	defer s.Close()
	cases := []struct {
		name   string
		fp     []byte
		size   int
		has    bool
		key    prefix.Key
		want   []byte
		loadOK bool
	}{
		{"block 1", fp, 256, true, k1, block(256, 1), true},
		{"block 2", fp, 256, true, k2, block(256, 2), true},
		{"unknown key", fp, 256, false, prefix.Seed([]byte("3")), nil, false},
		{"other model", []byte("model-b"), 256, false, k1, nil, false},
		{"other layout", fp, 512, false, k1, nil, false},
	}
	for _, tc := range cases {
		p, err := s.Prefix(tc.fp, tc.size, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.Has(tc.key) != tc.has {
			t.Fatalf("%s: Has = %v", tc.name, !tc.has)
		}
		dst := make([]byte, tc.size)
		err = p.Load(tc.key, dst)
		if (err == nil) != tc.loadOK {
			t.Fatalf("%s: Load error %v", tc.name, err)
		}
		if tc.loadOK && !bytes.Equal(dst, tc.want) {
			t.Fatalf("%s: bytes differ", tc.name)
		}
		p.Close()
	}
	if s.Corrupt() != 0 {
		t.Fatalf("%d corrupt entries", s.Corrupt())
	}
}

// TestPrefixCorruptDropped: a flipped byte or a truncated value is dropped
// and counted, never served.
func TestPrefixCorruptDropped(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	defer s.Close()
	p, err := s.Prefix([]byte("m"), 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := []prefix.Key{prefix.Seed([]byte("a")), prefix.Seed([]byte("b")), prefix.Seed([]byte("c"))}
	for i, k := range keys {
		p.Save(k, block(64, byte(i)))
	}
	p.Close()
	damage := []func([]byte) []byte{
		func(v []byte) []byte { v[len(v)-1] ^= 1; return v }, // payload bit flip
		func(v []byte) []byte { return v[:len(v)-10] },       // truncated
		func(v []byte) []byte { v[1] ^= 0xff; return v },     // checksum damaged
	}
	for i, k := range keys {
		key := p.dbKey(k)
		err := s.db.Update(func(txn *badger.Txn) error {
			it, err := txn.Get(key)
			if err != nil {
				return err
			}
			v, _ := it.ValueCopy(nil)
			return txn.Set(key, damage[i](v))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	p, err = s.Prefix([]byte("m"), 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i, k := range keys {
		if !p.Has(k) {
			t.Fatalf("key %d not indexed before the read", i)
		}
		if err := p.Load(k, make([]byte, 64)); err == nil {
			t.Fatalf("damage %d: corrupt block served", i)
		}
		if p.Has(k) {
			t.Fatalf("damage %d: still indexed after failing", i)
		}
	}
	if s.Corrupt() != 3 {
		t.Fatalf("%d corrupt counted, want 3", s.Corrupt())
	}
}

func TestPrefixDiskCap(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	defer s.Close()
	// Each sealed entry is 1000+5 bytes: a cap of 3000 keeps two.
	p, err := s.Prefix([]byte("m"), 1000, 3000)
	if err != nil {
		t.Fatal(err)
	}
	var keys []prefix.Key
	for i := 0; i < 5; i++ {
		k := prefix.Seed([]byte{byte(i)})
		keys = append(keys, k)
		p.Save(k, block(1000, byte(i)))
	}
	p.Close()
	st := p.Stats()
	if st.Blocks != 2 || st.Bytes > 3000 {
		t.Fatalf("stats %+v, want 2 blocks within the cap", st)
	}
	if !p.Has(keys[4]) || p.Has(keys[0]) {
		t.Fatal("the oldest blocks should go first")
	}
	// Deleted on disk too.
	p2, err := s.Prefix([]byte("m"), 1000, 3000)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if st := p2.Stats(); st.Blocks != 2 {
		t.Fatalf("after reopen %d blocks, want 2", st.Blocks)
	}
}

func TestSecondOpenRefused(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	defer s.Close()
	if _, err := Open(dir, nil); !errors.Is(err, ErrInUse) {
		t.Fatalf("second open: %v, want ErrInUse", err)
	}
}
