package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/server"
	"github.com/infernix/infernix/store"
	"github.com/infernix/infernix/store/responses"
)

// prefixFlags configure the prefix cache and its persistence.
type prefixFlags struct {
	noReuse  bool
	hostMiB  int
	dataDir  string
	saveMins int
	diskMiB  int
	snapInt  int
	// serveDefault: with no --data-dir at all, serve uses the per-user data
	// directory (other commands persist nothing unless asked).
	serveDefault bool
	dataDirSet   bool
}

func (f *prefixFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.noReuse, "no-prefix-reuse", false, "compute every prompt in full (no prefix cache, no persistence)")
	fs.IntVar(&f.hostMiB, "host-cache-mib", 0, "host memory for prefix-cache blocks evicted from the device pool (0 = none)")
	fs.Func("data-dir", "directory for the prefix cache, usage statistics and stored responses (serve's default: "+store.DefaultDir()+"; \"\" persists nothing)", func(v string) error {
		f.dataDir, f.dataDirSet = v, true
		return nil
	})
	fs.IntVar(&f.saveMins, "prefix-cache-save-mins", 5, "minutes between background saves of new prefix-cache blocks and snapshots to --data-dir (0 = as soon as made; evicted ones and everything at shutdown are saved regardless)")
	fs.IntVar(&f.diskMiB, "prefix-cache-disk-mib", 4096, "largest on-disk prefix cache in MiB (blocks and snapshots; the lowest-scored by recency and reuse go first; 0 = no cap)")
	fs.IntVar(&f.snapInt, "snapshot-interval", 16, "hybrid models: blocks of 64 tokens between recurrent-state snapshots kept for prefix reuse")
}

// apply sets the engine's prefix options and opens --data-dir; the engine
// owns (and closes) the opened directory.
func (f *prefixFlags) apply(o *engine.Options) error {
	o.NoPrefixReuse, o.HostCacheMiB = f.noReuse, f.hostMiB
	if f.snapInt <= 0 {
		return fmt.Errorf("--snapshot-interval must be a positive number of blocks, got %d", f.snapInt)
	}
	o.Sched.SnapshotInterval = f.snapInt
	if f.saveMins < 0 {
		return fmt.Errorf("--prefix-cache-save-mins must be 0 (save at once) or a positive number of minutes, got %d", f.saveMins)
	}
	o.Sched.SaveInterval = time.Duration(f.saveMins) * time.Minute
	if f.diskMiB < 0 {
		return fmt.Errorf("--prefix-cache-disk-mib must not be negative, got %d", f.diskMiB)
	}
	dir := f.dataDir
	implicit := !f.dataDirSet && f.serveDefault
	if implicit {
		dir = store.DefaultDir()
	}
	if dir == "" {
		return nil
	}
	st, err := store.Open(dir, nil)
	if err != nil {
		if implicit {
			// The default directory is a convenience: another server may hold
			// it. An explicit --data-dir in use is an error.
			fmt.Fprintf(os.Stderr, "infernix: not persisting the prefix cache or usage: %v\n", err)
			return nil
		}
		return err
	}
	o.Persist = &dataDir{st: st, capBytes: int64(f.diskMiB) << 20}
	return nil
}

// dataDir adapts the Badger store to the engine's Persister.
type dataDir struct {
	st       *store.Store
	capBytes int64
	once     sync.Once
	err      error
}

func (d *dataDir) OpenPrefix(fingerprint []byte, blockBytes int) (engine.PrefixTier, error) {
	ps, err := d.st.Prefix(fingerprint, blockBytes, d.capBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.st.Dir(), err)
	}
	return ps, nil
}

// Close closes the store once (the engine and a failed load may both ask).
func (d *dataDir) Close() error {
	d.once.Do(func() { d.err = d.st.Close() })
	return d.err
}

// describe prints where the prefix cache and the data directory are.
func (f *prefixFlags) describe(w io.Writer, e *engine.Engine) {
	mode := "in memory"
	switch {
	case f.noReuse:
		mode = "off (--no-prefix-reuse)"
	case e.PrefixTier != nil:
		var st store.PrefixStats
		if ps, ok := e.PrefixTier.(*store.PrefixStore); ok {
			st = ps.Stats()
		}
		save := "as soon as made"
		if f.saveMins > 0 {
			save = fmt.Sprintf("every %d min and at shutdown", f.saveMins)
		}
		mode = fmt.Sprintf("in memory and on disk (%d blocks and %d snapshots stored, cap %d MiB, saved %s)", st.Blocks, st.Snapshots, f.diskMiB, save)
	}
	dir := "none (--data-dir DIR keeps the prefix cache across restarts)"
	if d, ok := e.Persist.(*dataDir); ok {
		dir = d.st.Dir()
	}
	fmt.Fprintf(w, "infernix: prefix cache %s; data directory %s\n", mode, dir)
}

// responseStore keeps Responses API responses in the data directory when
// there is one (nil: the server's in-memory default).
func responseStore(e *engine.Engine) server.ResponseStore {
	d, ok := e.Persist.(*dataDir)
	if !ok {
		return nil
	}
	return responses.New(d.st, 0)
}

// usageStore records usage statistics in the data directory when there is
// one (nil: none).
func usageStore(e *engine.Engine) server.UsageStore {
	d, ok := e.Persist.(*dataDir)
	if !ok {
		return nil
	}
	return usageAdapter{d.st}
}

// usageAdapter adapts the store's usage rows to the server's UsageStore.
type usageAdapter struct{ st *store.Store }

func (u usageAdapter) AddUsage(apiKey, model string, c server.UsageCounts) error {
	return u.st.AddUsage(store.Day(time.Now()), store.KeyLabel(apiKey), model, store.Usage{Requests: c.Requests, Errors: c.Errors,
		PromptTokens: c.PromptTokens, CompletionTokens: c.CompletionTokens, CachedTokens: c.CachedTokens})
}

func (u usageAdapter) QueryUsage(q server.UsageQuery) (any, error) {
	sq := store.UsageQuery{From: q.From, To: q.To, Model: q.Model, Key: q.KeyLabel}
	if q.APIKey != "" {
		sq.Key = store.KeyLabel(q.APIKey)
	}
	rows, err := u.st.Usage(sq)
	if rows == nil {
		rows = []store.UsageRow{}
	}
	return rows, err
}
