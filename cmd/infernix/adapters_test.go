package main

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/engine/sample"
	"github.com/infernix/infernix/engine/sched"

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

// TestHybridSnapshotsAcrossRestarts: a hybrid model's prefix reuse survives a
// restart through the data directory: the attention layers' KV blocks and the
// linear layers' state snapshot both come back, with identical output. With
// the default --prefix-cache-save-mins nothing is written while serving;
// closing the engine (graceful shutdown) saves blocks and snapshots.
func TestHybridSnapshotsAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(testdata, "models", "qwen35-tiny")
	p := make([]int32, 150)
	for i := range p {
		p[i] = int32(3 + i%90)
	}
	var outs [][]int32
	var cached []int
	for restart := 0; restart < 2; restart++ {
		var pf prefixFlags
		pf.snapInt, pf.dataDir, pf.diskMiB, pf.saveMins = 16, dir, 64, 5
		opt := engine.Options{Device: "cpu", ContextLength: 256}
		if err := pf.apply(&opt); err != nil {
			t.Fatal(err)
		}
		e, err := engine.Load(model, opt)
		if err != nil {
			t.Fatal(err)
		}
		for run := 0; run < 2; run++ {
			ch, err := e.Sched.Submit(context.Background(), &sched.Request{Prompt: p, MaxTokens: 5,
				Sampling: sample.Params{TopP: 1, RepetitionPenalty: 1}, Logprobs: -1, ThinkBudget: -1, ThinkOpen: -1, ThinkClose: -1})
			if err != nil {
				t.Fatal(err)
			}
			var toks []int32
			for ev := range ch {
				if ev.Done {
					if ev.Err != nil {
						t.Fatal(ev.Err)
					}
					cached = append(cached, ev.Stats.CachedTokens)
					break
				}
				toks = append(toks, ev.Token)
			}
			outs = append(outs, toks)
		}
		ps := e.PrefixTier.(*store.PrefixStore)
		if st := ps.Stats(); st.Saved != 0 || st.SnapshotsSaved != 0 {
			t.Fatalf("restart %d: written before the save interval: %+v", restart, st)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if st := ps.Stats(); restart == 0 && (st.Blocks != 2 || st.Snapshots != 1) {
			t.Fatalf("after close: %+v, want 2 blocks and the snapshot at 128", st)
		}
	}
	for i := range outs {
		if !slices.Equal(outs[i], outs[0]) {
			t.Fatalf("run %d: %v, first run %v", i, outs[i], outs[0])
		}
	}
	// After the first request every one resumes at 128, also after the restart.
	if !slices.Equal(cached, []int{0, 128, 128, 128}) {
		t.Fatalf("cached tokens %v", cached)
	}
}

// TestServeDefaultDataDir: serve persists to the per-user data directory
// unless told otherwise; a default directory held by another server is
// skipped with a warning, an explicit one is an error; --data-dir "" turns
// persistence off.
func TestServeDefaultDataDir(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_DATA_HOME", xdg)
	apply := func(args ...string) (*engine.Options, error) {
		var pf prefixFlags
		pf.serveDefault = true
		fs := newFlags("serve")
		pf.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		var o engine.Options
		return &o, pf.apply(&o)
	}
	first, err := apply()
	if err != nil {
		t.Fatal(err)
	}
	d, ok := first.Persist.(*dataDir)
	if !ok || d.st.Dir() != filepath.Join(xdg, "infernix") {
		t.Fatalf("default data directory not opened: %+v", first.Persist)
	}
	defer d.Close()
	if second, err := apply(); err != nil || second.Persist != nil {
		t.Fatalf("default directory in use: %v, persist %v (want a warning and no persistence)", err, second.Persist)
	}
	if _, err := apply("--data-dir", filepath.Join(xdg, "infernix")); err == nil {
		t.Fatal("an explicit --data-dir in use must be an error")
	}
	if off, err := apply("--data-dir", ""); err != nil || off.Persist != nil {
		t.Fatalf(`--data-dir "": %v %v`, err, off.Persist)
	}
}

// TestPrefixSaveFlags: --prefix-cache-save-mins becomes the scheduler's save
// interval (0 = as soon as made); negative values are refused.
func TestPrefixSaveFlags(t *testing.T) {
	cases := []struct {
		args []string
		want time.Duration
		err  bool
	}{
		{nil, 5 * time.Minute, false},
		{[]string{"--prefix-cache-save-mins", "0"}, 0, false},
		{[]string{"--prefix-cache-save-mins", "30"}, 30 * time.Minute, false},
		{[]string{"--prefix-cache-save-mins", "-1"}, 0, true},
		{[]string{"--prefix-cache-disk-mib", "-5"}, 0, true},
	}
	for _, c := range cases {
		var pf prefixFlags
		fs := newFlags("run")
		pf.register(fs)
		if err := fs.Parse(append([]string{"--data-dir", ""}, c.args...)); err != nil {
			t.Fatal(err)
		}
		var o engine.Options
		err := pf.apply(&o)
		if (err != nil) != c.err || err == nil && o.Sched.SaveInterval != c.want {
			t.Errorf("%v: interval %v, error %v", c.args, o.Sched.SaveInterval, err)
		}
	}
}
