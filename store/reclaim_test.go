package store

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/infernix/infernix/engine/prefix"
)

// vlogBytes is the size of the value-log files in dir.
func vlogBytes(t *testing.T, dir string) int64 {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range es {
		if filepath.Ext(e.Name()) == ".vlog" {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
	}
	return n
}

// TestPrefixDiskCapBoundsTheDisk: the cap bounds the files on disk, not only
// the index. Badger frees deleted values' space only after compactions that
// its tiny keys would not cause; without Reclaim 48 MiB of blocks written
// under a 4 MiB cap left every byte of them in the value log.
func TestPrefixDiskCapBoundsTheDisk(t *testing.T) {
	defer func(n int64) { valueLogFileSize = n }(valueLogFileSize)
	valueLogFileSize = 2 << 20
	dir := t.TempDir()
	s := mustOpen(t, dir)
	defer s.Close()
	const blockBytes, capBytes = 128 << 10, 4 << 20
	p, err := s.Prefix([]byte("model-a"), blockBytes, capBytes)
	if err != nil {
		t.Fatal(err)
	}
	var keys []prefix.Key
	for i := 0; i < 384; i++ {
		k := prefix.Seed(fmt.Appendf(nil, "%d", i))
		keys = append(keys, k)
		p.Save(k, block(blockBytes, byte(i)))
		if i%16 == 15 {
			p.Flush()
		}
	}
	p.Flush()
	if err := s.Reclaim(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Bytes > capBytes || st.Evicted == 0 {
		t.Fatalf("index over the cap or nothing evicted: %+v", st)
	}
	// The live blocks at most 1/(1 − gcDiscardRatio) apart, Badger's active
	// file (allocated at twice the size) and two more files whose deletes
	// no compaction has counted yet.
	live := float64(capBytes) / (1 - gcDiscardRatio)
	most := int64(live) + 4*valueLogFileSize
	if got := vlogBytes(t, dir); got > most {
		t.Errorf("value log %d MiB after writing %d MiB under a %d MiB cap, want ≤ %d MiB",
			got>>20, 384*blockBytes>>20, capBytes>>20, most>>20)
	}
	// What the index kept still loads, bit for bit.
	dst := make([]byte, blockBytes)
	kept := 0
	for i, k := range keys {
		if !p.Has(k) {
			continue
		}
		kept++
		if err := p.Load(k, dst); err != nil || dst[1] != block(blockBytes, byte(i))[1] {
			t.Fatalf("block %d after the reclaim: %v", i, err)
		}
	}
	if kept != st.Blocks || kept == 0 {
		t.Errorf("%d blocks load, the index holds %d", kept, st.Blocks)
	}
	p.Close()
}

// TestReclaimWithWriters: writes made while Reclaim runs (Badger refuses
// them during its DropPrefix) wait for it and succeed.
func TestReclaimWithWriters(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	defer s.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	stop := time.Now().Add(500 * time.Millisecond)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				k := fmt.Appendf(nil, "kv/%d/%d", w, i)
				if err := s.Put(k, []byte("v"), 0); err != nil {
					errs <- err
					return
				}
				if err := s.AddUsage("2026-12-07", "key", "m", Usage{Requests: 1}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	reclaims := 0
	for time.Now().Before(stop) {
		if err := s.Reclaim(); err != nil {
			t.Fatal(err)
		}
		reclaims++
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a write during Reclaim: %v", err)
	}
	if reclaims < 2 {
		t.Errorf("%d reclaims ran alongside the writers", reclaims)
	}
}
