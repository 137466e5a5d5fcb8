package store

import (
	"testing"

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
