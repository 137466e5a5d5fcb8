package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/infernix/infernix/store"
)

func init() {
	register("usage", "usage statistics per API key, model and day from --data-dir", cmdUsage)
	register("cache", "the stored prefix cache: cache ls|stats|prune --data-dir DIR", cmdCache)
}

// openDataDir opens --data-dir for an offline command (the server must not
// be running on it: the store is locked by one process at a time).
func openDataDir(dir string) (*store.Store, error) {
	if dir == "" {
		return nil, errors.New("--data-dir DIR is required")
	}
	// Read an existing data directory only: store.Open would create a
	// missing one (a mistyped path) and write a database into any other.
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("--data-dir %s does not exist", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	if len(ents) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
			return nil, fmt.Errorf("--data-dir %s is not an infernix data directory (no MANIFEST of its database)", dir)
		}
	}
	return store.Open(dir, nil)
}

func cmdUsage(args []string, stdout io.Writer) error {
	fs := newFlags("usage")
	dir := fs.String("data-dir", "", "the server's data directory")
	from := fs.String("from", "", "first day, YYYY-MM-DD (default: all)")
	to := fs.String("to", "", "last day, YYYY-MM-DD (default: all)")
	model := fs.String("model", "", "only this model")
	asJSON := fs.Bool("json", false, "print JSON rows instead of a table")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	for _, d := range []struct{ flag, v string }{{"from", *from}, {"to", *to}} {
		if _, err := time.Parse("2006-01-02", d.v); d.v != "" && err != nil {
			return fmt.Errorf("--%s %s: expected a day as YYYY-MM-DD", d.flag, d.v)
		}
	}
	s, err := openDataDir(*dir)
	if err != nil {
		return err
	}
	defer s.Close()
	rows, err := s.Usage(store.UsageQuery{From: *from, To: *to, Model: *model})
	if err != nil {
		return err
	}
	if *asJSON {
		if rows == nil {
			rows = []store.UsageRow{}
		}
		return json.NewEncoder(stdout).Encode(rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "day\tapi key\tmodel\trequests\terrors\tprompt\tcompletion\tcached\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", r.Day, r.Key, r.Model, r.Requests, r.Errors, r.PromptTokens, r.CompletionTokens, r.CachedTokens)
	}
	return tw.Flush()
}

func cmdCache(args []string, stdout io.Writer) error {
	fs := newFlags("cache")
	dir := fs.String("data-dir", "", "the server's data directory")
	id := fs.String("id", "", "prune: only this prefix set (an id from cache ls)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: infernix cache ls|stats|prune --data-dir DIR [--id ID]")
	}
	s, err := openDataDir(*dir)
	if err != nil {
		return err
	}
	defer s.Close()
	switch pos[0] {
	case "ls":
		sets, err := s.PrefixSets()
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "id\tblocks\tsnapshots\tMiB")
		for _, ps := range sets {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\n", ps.ID, ps.Blocks, ps.Snapshots, float64(ps.Bytes)/(1<<20))
		}
		return tw.Flush()
	case "stats":
		sets, err := s.PrefixSets()
		if err != nil {
			return err
		}
		blocks, snaps, bytes := 0, 0, int64(0)
		for _, ps := range sets {
			blocks += ps.Blocks
			snaps += ps.Snapshots
			bytes += ps.Bytes
		}
		lsm, vlog := s.Size()
		fmt.Fprintf(stdout, "data directory %s\nprefix sets %d, blocks %d, snapshots %d, %.1f MiB\ndatabase: LSM %.1f MiB, value log %.1f MiB\n",
			s.Dir(), len(sets), blocks, snaps, float64(bytes)/(1<<20), float64(lsm)/(1<<20), float64(vlog)/(1<<20))
		return nil
	case "prune":
		n, err := s.PrunePrefix(*id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted %d prefix blocks and snapshots\n", n)
		return nil
	}
	return fmt.Errorf("cache %s: expected ls, stats or prune", pos[0])
}
