package store

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/infernix/infernix/engine/prefix"
)

func TestPrefixSetsAndPrune(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	defer s.Close()
	for i, fp := range []string{"a", "b"} {
		p, err := s.Prefix([]byte(fp), 32, 0)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j <= i; j++ {
			p.Save(prefix.Seed([]byte{byte(j)}), block(32, byte(j)))
		}
		p.Close()
	}
	sets, err := s.PrefixSets()
	if err != nil || len(sets) != 2 || sets[0].Blocks+sets[1].Blocks != 3 || sets[0].Bytes == 0 {
		t.Fatalf("sets %+v, %v", sets, err)
	}
	one := sets[0]
	if n, err := s.PrunePrefix(one.ID); err != nil || n != one.Blocks {
		t.Fatalf("prune %s: %d, %v", one.ID, n, err)
	}
	if sets, _ = s.PrefixSets(); len(sets) != 1 || sets[0].ID == one.ID {
		t.Fatalf("after pruning one: %+v", sets)
	}
	if n, _ := s.PrunePrefix(""); n != sets[0].Blocks {
		t.Fatalf("prune all removed %d", n)
	}
	if sets, _ = s.PrefixSets(); len(sets) != 0 {
		t.Fatalf("after pruning all: %+v", sets)
	}
}

// TestOpenDropsLegacySnapshots: the snapshot entries an older version kept
// under snap/ (with a 7-day TTL) are deleted when the directory is opened
// (serve, cache prune, every command), and said so in the log; everything
// else stays.
func TestOpenDropsLegacySnapshots(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	legacy := [][]byte{[]byte("snap/0a1b/0123456789abcdef"), []byte("snap/ffee/fedcba9876543210")}
	for _, k := range legacy {
		if err := s.Put(k, block(300, 7), 7*24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	keep := []byte("snapshot-like but not legacy")
	if err := s.Put(keep, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	p, err := s.Prefix([]byte("m"), 16, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Save(prefix.Seed(), block(16, 1))
	p.SaveSnapshot(prefix.Seed([]byte("s")), block(40, 2))
	p.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var logged strings.Builder
	s, err = Open(dir, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range legacy {
		if _, err := s.Get(k); err != ErrNotFound {
			t.Errorf("%s still readable after reopening: %v", k, err)
		}
	}
	if !strings.Contains(logged.String(), "entries=2") {
		t.Errorf("log does not report the 2 deleted entries: %q", logged.String())
	}
	if v, err := s.Get(keep); err != nil || string(v) != "x" {
		t.Errorf("an unrelated key was touched: %q, %v", v, err)
	}
	if sets, err := s.PrefixSets(); err != nil || len(sets) != 1 || sets[0].Blocks != 1 || sets[0].Snapshots != 1 {
		t.Errorf("the prefix store was touched: %+v, %v", sets, err)
	}
	// Nothing left to delete: the next open logs nothing.
	s.Close()
	logged.Reset()
	s, err = Open(dir, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if logged.Len() != 0 {
		t.Errorf("second open logged %q", logged.String())
	}
}
