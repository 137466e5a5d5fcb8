package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infernix/infernix/server/testmodel"
)

// TestServeBinaryHooks runs `infernix serve --scripts --plugins`: the
// startup output names the hooks and plugins, a route answers, SIGHUP with a
// broken script keeps the previous version, SIGHUP with a fixed one
// switches to it, plugin lines go to --plugin-lines, and plugin kv state
// lives in --data-dir's store.
func TestServeBinaryHooks(t *testing.T) {
	root, tmp, bin := buildBinary(t)
	scripts := filepath.Join(tmp, "hooks")
	os.Mkdir(scripts, 0o755)
	route := filepath.Join(scripts, "r.star")
	writeRoute := func(src string) {
		if err := os.WriteFile(route, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeRoute("def route(request):\n    return {\"error\": \"v1\", \"status\": 403} if request.model == \"x\" else None\n")
	lines := filepath.Join(tmp, "audit.jsonl")
	model := testmodel.Dir(t, testmodel.Options{})
	cmd, stdout, stderr := startServe(t, bin, "--model", model, "--port", "0", "--context", "1024", "--max-batch-tokens", "64",
		"--log-file", filepath.Join(tmp, "server.log"), "--scripts", scripts, "--script-poll-ms", "0",
		"--plugins", filepath.Join(root, "scripts", "plugins"), "--plugin-lines", lines, "--data-dir", filepath.Join(tmp, "data"))
	url, text := awaitBanner(t, cmd, stdout, stderr, "listening on ")
	for _, want := range []string{"scripts from", "route (r.star:1)", "plugins from", "quota (", "audit ("} {
		if !strings.Contains(text, want) {
			t.Errorf("startup output lacks %q:\n%s", want, text)
		}
	}
	chat := url + "/v1/chat/completions"
	message := func() string {
		_, _, r := post(t, chat, hello(map[string]any{"model": "x", "max_tokens": 2}))
		return r.Get("error.message").Str
	}
	if m := message(); m != "v1" {
		t.Fatalf("route v1: %q", m)
	}
	// The reload runs on its own goroutine: wait for its effect.
	waitFor := func(what string, ok func() bool) {
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 10 s", what)
			}
		}
	}
	logHas := func(s string) bool {
		b, _ := os.ReadFile(filepath.Join(tmp, "server.log"))
		return strings.Contains(string(b), s)
	}
	writeRoute("def route(request):\n    return {\"error\": \"v2\"\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor("logged reload failure", func() bool { return logHas("scripts: reload failed") })
	if m := message(); m != "v1" {
		t.Fatalf("after a broken reload: %q, want the previous version", m)
	}
	writeRoute("def route(request):\n    return {\"error\": \"v3\", \"status\": 403} if request.model == \"x\" else None\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor("route v3", func() bool { return message() == "v3" })
	if st, _, _ := post(t, chat, hello(map[string]any{"max_tokens": 2})); st != 200 {
		t.Fatalf("plain request: %d", st)
	}
	// The quota counters live in the data directory's store.
	if st, body := get(t, url+"/plugins/quota/usage"); st != 200 || !strings.Contains(string(body), `"key_used":`) || strings.Contains(string(body), `"key_used":0`) {
		t.Errorf("quota usage: %d %s", st, body)
	}
	b, _ := os.ReadFile(lines)
	if n := strings.Count(string(b), "\n"); n != 1 || !strings.Contains(string(b), `"completion_tokens":2`) {
		t.Errorf("audit lines:\n%s", b)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve exited with %v\n%s", err, stderr.String())
	}
}
