package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEngineFlagRanges: a model flag out of its range is an error naming
// the flag, not silently replaced by the default.
func TestEngineFlagRanges(t *testing.T) {
	model := filepath.Join(testdata, "models", "qwen3-tied-f32")
	cases := []struct{ flag, value string }{
		{"--threads", "-1"},
		{"--context", "-5"},
		{"--max-lanes", "0"},
		{"--max-lanes", "-2"},
		{"--max-queue", "-1"},
		{"--prefill-chunk", "0"},
		{"--max-batch-tokens", "-512"},
		{"--host-cache-mib", "-5"},
	}
	for _, c := range cases {
		_, stderr, code := cli(t, "generate", "--model", model, "--device", "cpu", "--tokens", "1,2", "--max-tokens", "1", c.flag, c.value)
		if code == 0 || !strings.Contains(stderr, c.flag+" "+c.value) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s %s: exit %d, stderr %q; want one line naming %s", c.flag, c.value, code, stderr, c.flag)
		}
	}
	// The documented zeros keep their meaning.
	for _, c := range []struct{ flag, value string }{{"--threads", "0"}, {"--context", "0"}, {"--host-cache-mib", "0"}} {
		if _, stderr, code := cli(t, "generate", "--model", model, "--device", "cpu", "--tokens", "1,2", "--max-tokens", "1", c.flag, c.value); code != 0 {
			t.Errorf("%s %s: exit %d, %s", c.flag, c.value, code, stderr)
		}
	}
}

// TestPlanFlagRanges: plan's own numbers out of range are errors (exit 1,
// no plan), not a plan for other values than those given.
func TestPlanFlagRanges(t *testing.T) {
	cfg := filepath.Join(testdata, "configs", "qwen3-8b")
	for _, c := range []struct{ flag, value string }{
		{"--lanes", "0"},
		{"--lanes", "-4"},
		{"--context", "-1"},
		{"--max-batch-tokens", "0"},
		{"--gpu-memory", "-8"},
	} {
		out, stderr, code := cli(t, "plan", "--model", cfg, "--gpu-memory", "80", c.flag, c.value)
		if code != 1 || !strings.Contains(stderr, c.flag+" "+c.value) || out != "" {
			t.Errorf("plan %s %s: exit %d, stdout %q, stderr %q; want exit 1 naming %s", c.flag, c.value, code, out, stderr, c.flag)
		}
	}
}

// TestModelPathErrors: a missing or wrong --model (and a malformed --tokens)
// is reported as such, naming the flag, before anything else is read.
func TestModelPathErrors(t *testing.T) {
	tmp := t.TempDir()
	req := filepath.Join(tmp, "req.json")
	if err := os.WriteFile(req, []byte(`{"messages":[{"role":"user","content":"Hi"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(tmp, "model.gguf")
	if err := os.WriteFile(file, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(tmp, "nosuch")
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"template", "--request", req}, []string{"--model", "required"}},
		{[]string{"template", "--model", missing, "--request", req}, []string{missing, "not found"}},
		{[]string{"template", "--model", missing, "--chat-template", filepath.Join(testdata, "chat-templates", "Qwen-Qwen3-0.6B.jinja"), "--request", req}, []string{missing, "not found"}},
		{[]string{"convert", "--model", file, "--out", filepath.Join(tmp, "out.gguf")}, []string{"--model " + file, "directory"}},
		{[]string{"convert", "--model", missing, "--out", filepath.Join(tmp, "out.gguf")}, []string{missing, "not found"}},
		{[]string{"plan", "--model", missing + ".gguf", "--gpu-memory", "8"}, []string{missing + ".gguf", "not found"}},
		{[]string{"plan", "--model", missing, "--gpu-memory", "8"}, []string{missing, "not found"}},
		{[]string{"generate", "--model", filepath.Join(testdata, "models", "qwen3-tied-f32"), "--tokens", "1,x"}, []string{"--tokens", `"x"`}},
		{[]string{"generate", "--model", missing, "--tokens", "1,-2"}, []string{"--tokens", `"-2"`}},
	}
	for _, c := range cases {
		_, stderr, code := cli(t, c.args...)
		if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, stderr, w)
			}
		}
	}
	// A template file alone needs no model directory.
	out, stderr, code := cli(t, "template", "--chat-template", filepath.Join(testdata, "chat-templates", "Qwen-Qwen3-0.6B.jinja"), "--request", req)
	if code != 0 || !strings.Contains(out, "<|im_start|>user\nHi<|im_end|>") {
		t.Errorf("template --chat-template without --model: exit %d, %q, %s", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(tmp, "out.gguf")); err == nil {
		t.Error("convert wrote a file")
	}
}

// TestBenchFlagRanges: bench measures at least one prompt and one decode
// token; other counts are errors naming the flag, not negative throughputs.
func TestBenchFlagRanges(t *testing.T) {
	for _, c := range []struct{ flag, value string }{
		{"--prompt-tokens", "0"},
		{"--prompt-tokens", "-5"},
		{"--decode-tokens", "0"},
		{"--decode-tokens", "-3"},
	} {
		out, stderr, code := cli(t, "bench", "--model", filepath.Join(testdata, "models", "demo"), "--device", "cpu", c.flag, c.value)
		if code == 0 || !strings.Contains(stderr, c.flag+" "+c.value) || out != "" {
			t.Errorf("bench %s %s: exit %d, stdout %q, stderr %q", c.flag, c.value, code, out, stderr)
		}
	}
}

// TestCountFlagErrors: negative counts fail before the model loads, naming
// the flag.
func TestCountFlagErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nosuch")
	for _, args := range [][]string{
		{"generate", "--model", missing, "--tokens", "1", "--max-tokens", "-1"},
		{"score", "--model", missing, "--tokens", "1,2", "--top", "-1"},
		{"run", "--model", missing, "--prompt", "hi", "--max-tokens", "-4"},
	} {
		flag, value := args[len(args)-2], args[len(args)-1]
		_, stderr, code := cli(t, args...)
		if code == 0 || !strings.Contains(stderr, flag+" "+value) || strings.Contains(stderr, "nosuch") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}
