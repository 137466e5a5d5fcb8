package store

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/infernix/infernix/engine/prefix"
)

// openReadOnly opens dir as a Store whose every write fails (Badger's
// read-only mode), the way writes fail on a full disk.
func openReadOnly(t *testing.T, dir string, log *slog.Logger) *Store {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithReadOnly(true).WithValueThreshold(valueThreshold))
	if err != nil {
		t.Fatal(err)
	}
	return &Store{db: db, dir: dir, log: log, stop: make(chan struct{})}
}

// TestPrefixOpenWithFailingCleanup: opening the prefix cache deletes the
// scores of entries deleted without them (a corrupt entry dropped, a kill
// between the two deletes). When that delete cannot be written (a full
// disk), the stored blocks are still served: the cleanup is not worth
// failing the model's load over.
func TestPrefixOpenWithFailingCleanup(t *testing.T) {
	ka, kb := prefix.Seed([]byte("a")), prefix.Seed([]byte("b"))
	for _, tc := range []struct {
		name     string
		readOnly bool
	}{
		{"writable", false},
		{"writes fail", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir)
			p, err := s.Prefix([]byte("m"), 64, 0)
			if err != nil {
				t.Fatal(err)
			}
			p.Save(ka, block(64, 1))
			p.Save(kb, block(64, 2))
			p.Close()
			// b's block goes, its score stays (as dropCorrupt leaves it).
			if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(p.dbKey(entryKey{kb, kindBlock})) }); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			var logged strings.Builder
			log := slog.New(slog.NewTextHandler(&logged, nil))
			if tc.readOnly {
				s = openReadOnly(t, dir, log)
			} else {
				s, err = Open(dir, log)
				if err != nil {
					t.Fatal(err)
				}
			}
			defer s.Close()
			p, err = s.Prefix([]byte("m"), 64, 0)
			if err != nil {
				t.Fatalf("opening the prefix cache: %v", err)
			}
			defer p.Close()
			dst := make([]byte, 64)
			if !p.Has(ka) || p.Has(kb) {
				t.Fatalf("indexed a=%v b=%v, want a only", p.Has(ka), p.Has(kb))
			}
			if err := p.Load(ka, dst); err != nil || !bytes.Equal(dst, block(64, 1)) {
				t.Fatalf("load a: %v", err)
			}
			if tc.readOnly && !strings.Contains(logged.String(), "level=WARN") {
				t.Errorf("the failed cleanup was not logged: %q", logged.String())
			}
		})
	}
}

// TestDropCorruptKeepsRewrittenValue: a reader that found a corrupt value
// deletes it, but not a good value written under the key since it read
// (a Put racing the Get).
func TestDropCorruptKeepsRewrittenValue(t *testing.T) {
	for _, tc := range []struct {
		name      string
		meanwhile func(s *Store, key []byte) error // after the corrupt read, before the drop
		want      []byte                           // nil: ErrNotFound
	}{
		{"still corrupt", func(*Store, []byte) error { return nil }, nil},
		{"rewritten", func(s *Store, key []byte) error { return s.Put(key, []byte("fresh"), 0) }, []byte("fresh")},
		{"deleted", func(s *Store, key []byte) error { return s.Delete(key) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir())
			defer s.Close()
			key := []byte("rsp/resp_1")
			bad := seal(key, []byte("old"))
			bad[len(bad)-1] ^= 1
			if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(key, bad) }); err != nil {
				t.Fatal(err)
			}
			// What Get does on a corrupt value, with tc.meanwhile between
			// its read and its drop.
			var v []byte
			if err := s.db.View(func(txn *badger.Txn) error {
				it, err := txn.Get(key)
				if err != nil {
					return err
				}
				v, err = it.ValueCopy(nil)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := open(key, v); err == nil {
				t.Fatal("the damaged value opened")
			}
			if err := tc.meanwhile(s, key); err != nil {
				t.Fatal(err)
			}
			s.dropCorrupt(key, v)
			got, err := s.Get(key)
			if tc.want == nil {
				if err != ErrNotFound {
					t.Fatalf("after the drop: %q, %v; want ErrNotFound", got, err)
				}
			} else if err != nil || !bytes.Equal(got, tc.want) {
				t.Fatalf("after the drop: %q, %v; want %q", got, err, tc.want)
			}
			if s.Corrupt() != 1 {
				t.Fatalf("%d corrupt counted, want 1", s.Corrupt())
			}
		})
	}
}

// TestPrefixBadLengthDeleted: a block whose seal checks but whose length is
// not the layout's is never served, and is deleted on disk and counted.
func TestPrefixBadLengthDeleted(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int // payload bytes stored for a 64-byte block
	}{
		{"short", 63},
		{"long", 65},
		{"empty", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir())
			defer s.Close()
			p, err := s.Prefix([]byte("m"), 64, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			k := prefix.Seed([]byte("a"))
			p.Save(k, block(64, 1))
			p.Flush()
			key := p.dbKey(entryKey{k, kindBlock})
			if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(key, seal(key, block(tc.n, 1))) }); err != nil {
				t.Fatal(err)
			}
			if err := p.Load(k, make([]byte, 64)); err == nil {
				t.Fatal("a block of the wrong length was served")
			}
			if p.Has(k) || s.Corrupt() != 1 {
				t.Fatalf("indexed %v, %d corrupt counted; want dropped and 1", p.Has(k), s.Corrupt())
			}
			if sets, err := s.PrefixSets(); err != nil || len(sets) != 0 {
				t.Fatalf("still on disk: %+v, %v", sets, err)
			}
		})
	}
}
