package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/prefix"
	"github.com/infernix/infernix/store"
)

func TestUsageAndCacheCommands(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddUsage("2026-12-01", store.KeyLabel("k"), "tiny", store.Usage{Requests: 3, PromptTokens: 300, CachedTokens: 192}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Prefix([]byte("fp"), 16, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Save(prefix.Seed(), make([]byte, 16))
	p.Close()
	s.Close()
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"usage", "--data-dir", dir}, []string{"2026-12-01", store.KeyLabel("k"), "tiny", "300", "192"}},
		{[]string{"usage", "--data-dir", dir, "--json", "--from", "2026-12-02"}, []string{"[]"}},
		{[]string{"cache", "ls", "--data-dir", dir}, []string{"blocks", " 1 "}},
		{[]string{"cache", "stats", "--data-dir", dir}, []string{"prefix sets 1, blocks 1"}},
		{[]string{"cache", "prune", "--data-dir", dir}, []string{"deleted 1 prefix blocks"}},
		{[]string{"cache", "stats", "--data-dir", dir}, []string{"prefix sets 0, blocks 0"}},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		var run func([]string, io.Writer) error
		for _, c := range commands {
			if c.name == tc.args[0] {
				run = c.run
			}
		}
		if err := run(tc.args[1:], &out); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Fatalf("%v: output lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
	if err := cmdCache([]string{"ls"}, &bytes.Buffer{}); err == nil {
		t.Fatal("cache ls without --data-dir succeeded")
	}
}

// TestDataDirCommandsOnMissingOrForeignDir: usage and cache read a server's
// data directory; they must not create one where none is (a typo) nor write
// a database into a directory of something else (a model directory).
func TestDataDirCommandsOnMissingOrForeignDir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nosuch")
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "config.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	cases := []struct {
		args []string
		code int
		want string // in stderr (code != 0) or stdout
	}{
		{[]string{"usage", "--data-dir", missing}, 1, missing},
		{[]string{"cache", "ls", "--data-dir", missing}, 1, missing},
		{[]string{"cache", "stats", "--data-dir", missing}, 1, "does not exist"},
		{[]string{"usage", "--data-dir", foreign}, 1, "not an infernix data directory"},
		{[]string{"cache", "prune", "--data-dir", foreign}, 1, foreign},
		{[]string{"usage", "--data-dir", empty}, 0, "requests"},
		{[]string{"cache", "stats", "--data-dir", empty}, 0, "prefix sets 0"},
	}
	for _, c := range cases {
		out, stderr, code := cli(t, c.args...)
		got := out
		if c.code != 0 {
			got = stderr
		}
		if code != c.code || !strings.Contains(got, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, stderr, c.code, c.want)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("%s was created (%v)", missing, err)
	}
	if ents, _ := os.ReadDir(foreign); len(ents) != 1 {
		t.Errorf("files written into the foreign directory: %d entries", len(ents))
	}
}

// TestUsageDateFlags: --from and --to are days (YYYY-MM-DD); anything else
// is an error naming the flag, not a filter that silently matches nothing.
func TestUsageDateFlags(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ flag, value string }{
		{"--from", "2026-13-45"},
		{"--from", "yesterday"},
		{"--to", "2026/12/01"},
		{"--to", "2026-12-1"},
	} {
		out, stderr, code := cli(t, "usage", "--data-dir", dir, c.flag, c.value)
		if code == 0 || !strings.Contains(stderr, c.flag+" "+c.value) || out != "" {
			t.Errorf("usage %s %s: exit %d, stdout %q, stderr %q", c.flag, c.value, code, out, stderr)
		}
	}
	if out, stderr, code := cli(t, "usage", "--data-dir", dir, "--from", "2026-12-01", "--to", "2026-12-31", "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("valid days: exit %d, %q %s", code, out, stderr)
	}
}
