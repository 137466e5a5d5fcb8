package store

import (
	"sync"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	k1, k2 := KeyLabel("secret-1"), KeyLabel("")
	adds := []struct {
		day, key, model string
		u               Usage
	}{
		{"2026-11-30", k1, "qwen", Usage{Requests: 1, PromptTokens: 100, CompletionTokens: 10, CachedTokens: 64}},
		{"2026-11-30", k1, "qwen", Usage{Requests: 1, Errors: 1, PromptTokens: 5}},
		{"2026-12-01", k1, "qwen", Usage{Requests: 1, PromptTokens: 7}},
		{"2026-12-01", k2, "qwen", Usage{Requests: 2}},
		{"2026-12-01", k1, "other", Usage{Requests: 3}},
	}
	for _, a := range adds {
		if err := s.AddUsage(a.day, a.key, a.model, a.u); err != nil {
			t.Fatal(err)
		}
	}
	// Concurrent adds are all counted (conflicts are retried).
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.AddUsage("2026-12-02", k1, "qwen", Usage{Requests: 1}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir) // persisted
	defer s.Close()
	cases := []struct {
		name string
		q    UsageQuery
		want []UsageRow
	}{
		{"one day", UsageQuery{From: "2026-11-30", To: "2026-11-30"}, []UsageRow{
			{Day: "2026-11-30", Key: k1, Model: "qwen", Usage: Usage{Requests: 2, Errors: 1, PromptTokens: 105, CompletionTokens: 10, CachedTokens: 64}}}},
		{"by model", UsageQuery{Model: "other"}, []UsageRow{{Day: "2026-12-01", Key: k1, Model: "other", Usage: Usage{Requests: 3}}}},
		{"by key", UsageQuery{Key: k2}, []UsageRow{{Day: "2026-12-01", Key: k2, Model: "qwen", Usage: Usage{Requests: 2}}}},
		{"concurrent", UsageQuery{From: "2026-12-02"}, []UsageRow{{Day: "2026-12-02", Key: k1, Model: "qwen", Usage: Usage{Requests: 8}}}},
	}
	for _, tc := range cases {
		got, err := s.Usage(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %+v", tc.name, got)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("%s: row %d %+v, want %+v", tc.name, i, got[i], tc.want[i])
			}
		}
	}
	all, _ := s.Usage(UsageQuery{})
	if len(all) != 5 {
		t.Fatalf("%d rows, want 5", len(all))
	}
	if k1 == "secret-1" || len(k1) != 12 || k2 != "anonymous" {
		t.Fatalf("labels %q %q", k1, k2)
	}
	// A corrupt row is skipped and counted.
	k := usageKey("2026-12-03", k1, "qwen")
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(k, []byte{1, 2, 3}) }); err != nil {
		t.Fatal(err)
	}
	if rows, _ := s.Usage(UsageQuery{From: "2026-12-03"}); len(rows) != 0 || s.Corrupt() != 1 {
		t.Fatalf("corrupt row: %+v, %d counted", rows, s.Corrupt())
	}
}

// TestUsageContention: every add of many concurrent requests to one row is
// counted and none fails (a lost conflict must not drop a request's usage).
func TestUsageContention(t *testing.T) {
	for _, tc := range []struct{ writers, adds int }{{8, 10}, {64, 20}} {
		s := mustOpen(t, t.TempDir())
		var wg sync.WaitGroup
		errs := make(chan error, tc.writers*tc.adds)
		for g := 0; g < tc.writers; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < tc.adds; i++ {
					if err := s.AddUsage("2026-12-02", "k", "m", Usage{Requests: 1, PromptTokens: 3}); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		failed := 0
		for range errs {
			failed++
		}
		rows, err := s.Usage(UsageQuery{})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		n := int64(tc.writers * tc.adds)
		if failed != 0 || len(rows) != 1 || rows[0].Requests != n || rows[0].PromptTokens != 3*n {
			t.Errorf("%d writers × %d adds: %d failed, rows %+v; want one row of %d requests", tc.writers, tc.adds, failed, rows, n)
		}
	}
}
