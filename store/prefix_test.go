package store

import (
	"bytes"
	"errors"
	"sync/atomic"
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
		key := p.dbKey(entryKey{k, kindBlock})
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
	if ds := p.DiskStats(); ds.Blocks != 2 || ds.Bytes != st.Bytes || ds.Saved != 5 || ds.Evicted != 3 || ds.Dropped != 0 {
		t.Fatalf("disk stats %+v, want 2 blocks, 5 saved, 3 evicted", ds)
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

// fakeClock drives a PrefixStore's score clock (seconds) from a test.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) set(sec float64)        { c.ms.Store(int64(sec * 1000)) }
func (c *fakeClock) now() float64           { return float64(c.ms.Load()) / 1000 }
func (c *fakeClock) install(p *PrefixStore) { p.now = c.now }

// TestPrefixDiskEvictsByScore: over the cap the disk tier deletes the
// lowest-scored entries (recency and reuse), so a block loaded often outlives
// newer blocks used once; scores survive a restart.
func TestPrefixDiskEvictsByScore(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	const size, capBytes = 1000, 3 * (1000 + 5) // three sealed blocks
	var clk fakeClock
	p, err := s.Prefix([]byte("m"), size, capBytes)
	if err != nil {
		t.Fatal(err)
	}
	clk.install(p)
	k := func(name string) prefix.Key { return prefix.Seed([]byte(name)) }
	save := func(at float64, names ...string) {
		clk.set(at)
		for _, n := range names {
			p.Save(k(n), block(size, n[0]))
		}
		p.Flush()
	}
	held := func(p *PrefixStore, want map[string]bool) {
		t.Helper()
		for n, w := range want {
			if p.Has(k(n)) != w {
				t.Errorf("block %s held = %v, want %v", n, !w, w)
			}
		}
	}
	save(0, "A", "B")
	clk.set(60)
	dst := make([]byte, size)
	for i := 0; i < 3; i++ { // A is reused
		if err := p.Load(k("A"), dst); err != nil || !bytes.Equal(dst, block(size, 'A')) {
			t.Fatalf("load A: %v", err)
		}
	}
	save(120, "C")
	save(180, "D") // four blocks: the lowest, B (old, used once), goes
	held(p, map[string]bool{"A": true, "B": false, "C": true, "D": true})
	save(3*3600, "E") // C is now the lowest; A, older still, keeps its reuse credit
	held(p, map[string]bool{"A": true, "C": false, "D": true, "E": true})
	if st := p.Stats(); st.Blocks != 3 || st.Evicted != 2 || st.Bytes > capBytes {
		t.Fatalf("stats %+v", st)
	}
	scores := map[prefix.Key]prefix.Score{}
	for ek, e := range p.index {
		scores[ek.key] = e.score
	}
	p.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, dir)
	defer s.Close()
	p, err = s.Prefix([]byte("m"), size, capBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	clk.install(p)
	for ek, e := range p.index {
		if e.score != scores[ek.key] {
			t.Errorf("score of %v after restart %v, before %v", ek.key, e.score, scores[ek.key])
		}
	}
	save(3*3600+1, "F") // D goes, not A
	held(p, map[string]bool{"A": true, "D": false, "E": true, "F": true})
}

// TestPrefixSnapshots: snapshots persist beside the blocks of the same set,
// count towards the cap, show in cache ls and prune, and a corrupt one is
// dropped and counted, never returned.
func TestPrefixSnapshots(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	p, err := s.Prefix([]byte("m"), 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	kb, ks, kx := prefix.Seed([]byte("b")), prefix.Seed([]byte("s")), prefix.Seed([]byte("x"))
	p.Save(kb, block(64, 1))
	p.SaveSnapshot(ks, block(300, 2))
	p.Flush()
	if got := p.LoadSnapshot(ks); !bytes.Equal(got, block(300, 2)) {
		t.Fatal("snapshot not read back")
	}
	if p.LoadSnapshot(kx) != nil || p.LoadSnapshot(kb) != nil {
		t.Fatal("a missing snapshot (or a block's key) returned bytes")
	}
	if st := p.Stats(); st.Blocks != 1 || st.Snapshots != 1 || st.SnapshotsSaved != 1 || st.SnapshotsRead != 1 || st.Bytes != 64+5+300+5 {
		t.Fatalf("stats %+v", st)
	}
	// /metrics counts blocks and snapshots together.
	if ds := p.DiskStats(); ds.Blocks != 1 || ds.Snapshots != 1 || ds.Saved != 2 || ds.Loaded != 1 || ds.Bytes != 64+5+300+5 {
		t.Fatalf("disk stats %+v", ds)
	}
	p.Close()
	sets, err := s.PrefixSets()
	if err != nil || len(sets) != 1 || sets[0].Blocks != 1 || sets[0].Snapshots != 1 || sets[0].Bytes != 64+5+300+5 {
		t.Fatalf("sets %+v, %v", sets, err)
	}

	// Over the cap, snapshots and blocks compete on score: the older block
	// goes when a second snapshot arrives.
	p, err = s.Prefix([]byte("m"), 64, 650)
	if err != nil {
		t.Fatal(err)
	}
	p.SaveSnapshot(kx, block(300, 3))
	p.Flush()
	if st := p.Stats(); st.Blocks != 0 || st.Snapshots != 2 || st.Evicted != 1 || p.Has(kb) {
		t.Fatalf("after a second snapshot over the cap: %+v", st)
	}
	// Damage one snapshot on disk.
	key := p.dbKey(entryKey{ks, kindSnapshot})
	if err := s.db.Update(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, _ := it.ValueCopy(nil)
		v[len(v)-1] ^= 1
		return txn.Set(key, v)
	}); err != nil {
		t.Fatal(err)
	}
	if p.LoadSnapshot(ks) != nil {
		t.Fatal("corrupt snapshot returned")
	}
	if st := p.Stats(); st.Snapshots != 1 || s.Corrupt() != 1 {
		t.Fatalf("corrupt snapshot not dropped: %+v, %d corrupt", st, s.Corrupt())
	}
	p.Close()
	if n, err := s.PrunePrefix(""); err != nil || n != 1 {
		t.Fatalf("prune deleted %d entries (%v), want the one snapshot left", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPrefixFlush: Flush returns once what was queued is written, without
// closing; after Close it returns at once.
func TestPrefixFlush(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	defer s.Close()
	p, err := s.Prefix([]byte("m"), 32, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		p.Save(prefix.Seed([]byte{byte(i)}), block(32, byte(i)))
	}
	p.Flush()
	if st := p.Stats(); st.Saved != 40 || st.Blocks != 40 {
		t.Fatalf("after Flush: %+v", st)
	}
	p.Close()
	p.Flush()
}

// TestPrefixIndexSizes: entry sizes loaded at open (what the cap counts) are
// the sealed value sizes, for values in the LSM tree and in the value log.
func TestPrefixIndexSizes(t *testing.T) {
	for _, size := range []int{1000, 3 * valueThreshold} {
		dir := t.TempDir()
		s := mustOpen(t, dir)
		p, err := s.Prefix([]byte("m"), size, 0)
		if err != nil {
			t.Fatal(err)
		}
		p.Save(prefix.Seed([]byte("a")), block(size, 1))
		p.SaveSnapshot(prefix.Seed([]byte("b")), block(size/2, 2))
		p.Close()
		want := p.Stats().Bytes
		if want != int64(size+5+size/2+5) {
			t.Fatalf("size %d: %d bytes counted when written", size, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = mustOpen(t, dir)
		p, err = s.Prefix([]byte("m"), size, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Stats().Bytes; got != want {
			t.Errorf("size %d: %d bytes indexed at open, %d when written", size, got, want)
		}
		p.Close()
		s.Close()
	}
}
