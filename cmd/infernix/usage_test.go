package main

import (
	"bytes"
	"io"
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
