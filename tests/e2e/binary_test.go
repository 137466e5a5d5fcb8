package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/infernix/infernix/server/testmodel"
)

// TestServeBinary runs the real `infernix serve` command: it prints what the
// user needs (model, device, memory, address), serves, honours its flags
// (API key, request log) and exits cleanly on SIGTERM.
func TestServeBinary(t *testing.T) {
	_, tmp, bin := buildBinary(t)
	model := testmodel.Dir(t, testmodel.Options{})
	logPath := filepath.Join(tmp, "requests.jsonl")
	cmd, stdout, stderr := startServe(t, bin, "--model", model, "--port", "0", "--context", "1024", "--max-batch-tokens", "64",
		"--api-key", "k1", "--request-log", logPath, "--log-file", filepath.Join(tmp, "server.log"), "--served-model-name", "tiny")
	url, text := awaitBanner(t, cmd, stdout, stderr, "listening on ")
	for _, want := range []string{"model tiny", "Qwen3ForCausalLM", "device cpu", "MiB", "context 1024", "1 API key(s) required"} {
		if !strings.Contains(text, want) {
			t.Errorf("startup output lacks %q:\n%s", want, text)
		}
	}
	if st, body := get(t, url+"/health"); st != 200 {
		t.Errorf("/health: %d %s", st, body)
	}
	st, _, r := post(t, url+"/v1/chat/completions", hello(map[string]any{"max_tokens": 3}), "Authorization", "Bearer k1")
	if st != 200 || r.Get("model").Str != "tiny" {
		t.Errorf("chat: %d %s", st, r.Raw)
	}
	if st, _, _ := post(t, url+"/v1/chat/completions", hello(nil)); st != 401 {
		t.Errorf("no key: %d", st)
	}
	// The load tool against this server.
	bench := exec.Command(bin, "bench-serve", "--url", url, "--api-key", "k1", "--clients", "2", "--requests", "4",
		"--prompt-tokens", "16", "--max-tokens", "5", "--json")
	out, err := bench.Output()
	b := gjson.ParseBytes(out)
	if err != nil || b.Get("failed").Int() != 0 || b.Get("output_tokens").Int() != 20 || b.Get("ttft_ms.p50").Float() <= 0 ||
		b.Get("itl_ms.p99").Float() <= 0 || b.Get("output_tok_per_s").Float() <= 0 {
		t.Errorf("bench-serve: %v %s", err, out)
	}
	// Every request refused (a wrong key): the JSON still comes out, and
	// the exit status says the load failed.
	out, err = exec.Command(bin, "bench-serve", "--url", url, "--api-key", "wrong", "--clients", "1", "--requests", "2",
		"--prompt-tokens", "16", "--max-tokens", "2", "--json").Output()
	if b := gjson.ParseBytes(out); err == nil || b.Get("failed").Int() != 2 || !strings.Contains(b.Get("first_error").Str, "401") {
		t.Errorf("bench-serve with a wrong key: err %v, %s", err, out)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve exited with %v after SIGTERM:\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not exit within 15 s of SIGTERM")
	}
	data, _ := os.ReadFile(logPath)
	if n := strings.Count(string(data), "\n"); n != 8 || !gjson.Valid(strings.Split(string(data), "\n")[0]) {
		t.Errorf("request log (%d lines): %s", n, data)
	}
}
