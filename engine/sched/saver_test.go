package sched

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/prefix"
	"github.com/infernix/infernix/store"
)

// persisted is a scheduler over a persistModel with its data directory.
type persisted struct {
	st *store.Store
	ps *store.PrefixStore
	s  *Scheduler
}

var saverFP = []byte("synthetic-3")

func openPersisted(t *testing.T, dir string, blocks int, every time.Duration) *persisted {
	t.Helper()
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := persistModel(t, blocks)
	ps, err := st.Prefix(saverFP, m.kv.(backend.KVBlockCopier).BlockBytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return &persisted{st: st, ps: ps, s: New(m, Config{MaxLanes: 1, PrefixSeed: saverFP, PrefixDisk: ps, SaveInterval: every})}
}

func (p *persisted) close(t *testing.T) {
	t.Helper()
	p.s.Shutdown()
	p.ps.Close()
	if err := p.st.Close(); err != nil {
		t.Fatal(err)
	}
}

// chainKeys are the keys of the first n blocks of toks (no cache salt).
func chainKeys(toks []int32, n int) []prefix.Key {
	k := prefix.Seed(saverFP, nil)
	var out []prefix.Key
	for i := 0; i < n; i++ {
		k = prefix.BlockKey(k, toks[i*prefix.BlockSize:(i+1)*prefix.BlockSize])
		out = append(out, k)
	}
	return out
}

// waitBlocks polls until the store holds n blocks (the background writer).
func waitBlocks(t *testing.T, ps *store.PrefixStore, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ps.Stats().Blocks < n {
		if time.Now().After(deadline) {
			t.Fatalf("the saver did not write %d blocks in the background: %+v", n, ps.Stats())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestSaveInterval: with SaveInterval 0 blocks are written as soon as they
// are made; with a short interval the saver writes them in the background
// (the scheduler idle, no shutdown); with a long one nothing reaches the
// disk before shutdown and everything after it. In every case a restart
// reuses the prefix with unchanged output.
func TestSaveInterval(t *testing.T) {
	conv := prompt(200, 6) // + 12 generated: 3 full blocks
	want := solo(t, testModel(t, 8), conv, 12)
	cases := []struct {
		name       string
		every      time.Duration
		background bool // written without shutdown
	}{
		{"as soon as made", 0, true},
		{"every 30ms", 30 * time.Millisecond, true},
		{"every hour: at shutdown", time.Hour, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := openPersisted(t, dir, 12, tc.every)
			if got, _ := run(t, p.s, req(conv, 12)); !equal(got, want) {
				t.Fatalf("got %v, alone %v", got, want)
			}
			if tc.background {
				waitBlocks(t, p.ps, 3)
			} else {
				if err := p.s.Run(func() {}); err != nil { // one more loop iteration
					t.Fatal(err)
				}
				if st := p.ps.Stats(); st.Blocks != 0 || st.Saved != 0 {
					t.Fatalf("saved before the interval: %+v", st)
				}
				p.s.Shutdown() // saves and flushes, before the store closes
				if st := p.ps.Stats(); st.Blocks != 3 {
					t.Fatalf("after shutdown %d blocks stored, want 3: %+v", st.Blocks, st)
				}
			}
			for _, k := range chainKeys(conv, 3) {
				if !p.ps.Has(k) {
					t.Fatalf("block %s not stored", k)
				}
			}
			p.close(t)

			p = openPersisted(t, dir, 12, tc.every)
			defer p.close(t)
			got, st := run(t, p.s, req(conv, 12))
			if !equal(got, want) || st.CachedTokens != 192 {
				t.Fatalf("after restart: %v with %d cached, want %v with 192", got, st.CachedTokens, want)
			}
		})
	}
}

// TestSaveAtEviction: with a long interval, blocks evicted from the device
// pool before their save round are written at eviction, so a later request
// still finds them on disk.
func TestSaveAtEviction(t *testing.T) {
	p := openPersisted(t, t.TempDir(), 6, time.Hour)
	defer p.close(t)
	a := prompt(200, 50)
	first, _ := run(t, p.s, req(a, 8))
	for i := 0; i < 3; i++ { // each needs the whole pool: A's blocks go
		run(t, p.s, req(prompt(300, 60+i), 4))
	}
	p.ps.Flush()
	for _, k := range chainKeys(a, 3) {
		if !p.ps.Has(k) {
			t.Fatalf("evicted block %s was not saved (stats %+v)", k, p.ps.Stats())
		}
	}
	got, st := run(t, p.s, req(a, 8))
	if !equal(got, first) || st.CachedTokens != 192 {
		t.Fatalf("after eviction: %v with %d cached, want %v with 192", got, st.CachedTokens, first)
	}
	if ps := p.ps.Stats(); ps.Loaded < 3 {
		t.Fatalf("served %d blocks from disk, want 3", ps.Loaded)
	}
}

// TestSaverKilledHelper is the process TestSaverKilled kills: it serves a
// conversation, says "ready" once the background saver wrote its blocks, then
// keeps computing new prompts (rounds keep writing) until killed.
func TestSaverKilledHelper(t *testing.T) {
	dir := os.Getenv("INFERNIX_SAVER_KILL_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	p := openPersisted(t, dir, 24, 5*time.Millisecond)
	run(t, p.s, req(prompt(200, 6), 12))
	waitBlocks(t, p.ps, 3)
	fmt.Println("ready")
	for i := 0; ; i++ {
		run(t, p.s, req(prompt(150+i%100, 100+i), 2))
	}
}

// TestSaverKilled: a server killed with SIGKILL while its saver is writing
// (no shutdown, no flush) restarts from the same data directory, serves, and
// reuses what was fully written; every answer equals decoding alone.
func TestSaverKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSaverKilledHelper$")
	cmd.Env = append(os.Environ(), "INFERNIX_SAVER_KILL_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
	}
	time.Sleep(20 * time.Millisecond) // a few more rounds in flight
	cmd.Process.Kill()
	cmd.Wait()

	p := openPersisted(t, dir, 24, time.Hour)
	defer p.close(t)
	ref := testModel(t, 8)
	conv := prompt(200, 6)
	got, st := run(t, p.s, req(conv, 12))
	if want := solo(t, ref, conv, 12); !equal(got, want) || st.CachedTokens != 192 {
		t.Fatalf("after kill -9: %v with %d cached, want %v with 192", got, st.CachedTokens, want)
	}
	// Prompts computed while the kill came: reused when written, right either way.
	for i := 0; i < 2; i++ {
		q := prompt(150+i, 100+i)
		if got, _ := run(t, p.s, req(q, 2)); !equal(got, solo(t, ref, q, 2)) {
			t.Fatalf("prompt %d after kill -9: %v", i, got)
		}
	}
	t.Logf("after the kill: %+v", p.ps.Stats())
}
