package main

import (
	"testing"

	"github.com/infernix/infernix/server"
	"github.com/infernix/infernix/store"
)

// TestUsageAdapter: the server's usage interface over the real Badger store
// keeps rows per key label and model, and a client key sees only its rows.
func TestUsageAdapter(t *testing.T) {
	st, err := store.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u := usageAdapter{st}
	for _, r := range []struct {
		key    string
		counts server.UsageCounts
	}{
		{"k1", server.UsageCounts{Requests: 1, PromptTokens: 10, CachedTokens: 4}},
		{"k1", server.UsageCounts{Requests: 1, Errors: 1, PromptTokens: 2}},
		{"k2", server.UsageCounts{Requests: 1, PromptTokens: 7, CompletionTokens: 3}},
	} {
		if err := u.AddUsage(r.key, "demo", r.counts); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := u.QueryUsage(server.UsageQuery{APIKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	got := rows.([]store.UsageRow)
	if len(got) != 1 || got[0].Key != store.KeyLabel("k1") || got[0].Requests != 2 || got[0].Errors != 1 || got[0].PromptTokens != 12 || got[0].CachedTokens != 4 {
		t.Fatalf("k1 rows: %+v", got)
	}
	all, _ := u.QueryUsage(server.UsageQuery{Model: "demo"})
	if n := len(all.([]store.UsageRow)); n != 2 {
		t.Fatalf("%d rows for the model, want 2", n)
	}
	none, _ := u.QueryUsage(server.UsageQuery{Model: "other"})
	if n := len(none.([]store.UsageRow)); n != 0 {
		t.Fatalf("%d rows for another model", n)
	}
}
