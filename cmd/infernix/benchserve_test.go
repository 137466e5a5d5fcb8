package main

import (
	"net"
	"strings"
	"testing"
)

// TestBenchServeBadURL: a --url without a scheme or one nothing listens on
// fails at once with one line naming the URL and the cause (in text and JSON
// output alike), instead of sending every request to it.
func TestBenchServeBadURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--url", "http://" + closed, "--requests", "2", "--clients", "1"}, []string{"--url", closed, "connection refused"}},
		{[]string{"--url", "http://" + closed, "--requests", "2", "--clients", "1", "--json"}, []string{"--url", closed, "connection refused"}},
		{[]string{"--url", closed, "--requests", "2", "--clients", "1"}, []string{"--url", closed, "http://"}},
		{[]string{"--url", "ftp://" + closed}, []string{"--url", "http://"}},
	}
	for _, c := range cases {
		out, stderr, code := cli(t, append([]string{"bench-serve"}, c.args...)...)
		if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q lacks %q (stdout %q)", c.args, stderr, w, out)
			}
		}
	}
}
