package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConvertAndRunGGUF: `convert` writes the demo model as GGUF, and every
// command that loads a model takes the file (or a directory holding only
// it) and answers as the original directory does.
func TestConvertAndRunGGUF(t *testing.T) {
	demo := filepath.Join(testdata, "models", "demo")
	dir := t.TempDir()
	file := filepath.Join(dir, "demo.gguf")
	out, stderr, code := cli(t, "convert", "--model", demo, "--out", file, "--type", "bf16")
	if code != 0 || !strings.Contains(out, "BF16") {
		t.Fatalf("convert: exit %d, %q %s", code, out, stderr)
	}
	chat := []string{"--prompt", "What is the capital of France?", "--think=false", "--temperature", "0", "--max-tokens", "40"}
	want, _, code := cli(t, append([]string{"run", "--model", demo}, chat...)...)
	if code != 0 || !strings.Contains(want, "Paris") {
		t.Fatalf("run on the directory: %q", want)
	}
	for _, m := range []string{file, dir} {
		got, stderr, code := cli(t, append([]string{"run", "--model", m}, chat...)...)
		if code != 0 || got != want {
			t.Errorf("run --model %s: exit %d, %q, want %q (%s)", m, code, got, want, stderr)
		}
	}
	tokDir, _, _ := cli(t, "tokenize", "--model", demo, "--json", "<think>Paris, 1234</think>")
	tokFile, _, _ := cli(t, "tokenize", "--model", file, "--json", "<think>Paris, 1234</think>")
	if tokDir == "" || tokDir != tokFile {
		t.Errorf("tokenize: file %q, directory %q", tokFile, tokDir)
	}
	if out, stderr, code := cli(t, "plan", "--model", file, "--gpu-memory", "80"); code != 0 || !strings.Contains(out, "weights          0.01 GiB") {
		t.Errorf("plan: exit %d, %q %s", code, out, stderr)
	}
	req := filepath.Join(dir, "req.json")
	os.WriteFile(req, []byte(`{"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`), 0o644)
	tplDir, _, _ := cli(t, "template", "--model", demo, "--request", req)
	tplFile, _, _ := cli(t, "template", "--model", file, "--request", req)
	if !strings.Contains(tplDir, "<tools>") || tplDir != tplFile {
		t.Errorf("template: file %q, directory %q", tplFile, tplDir)
	}
}

// TestGGUFErrors: bad GGUF input fails with one line naming the problem.
func TestGGUFErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	if _, stderr, code := cli(t, "convert", "--model", filepath.Join(testdata, "models", "demo"), "--out", good, "--type", "q4_k"); code != 0 {
		t.Fatal(stderr)
	}
	b, _ := os.ReadFile(good)
	cut := filepath.Join(dir, "cut.gguf")
	os.WriteFile(cut, b[:len(b)/2], 0o644)
	junk := filepath.Join(dir, "junk.gguf")
	os.WriteFile(junk, []byte("not a model at all"), 0o644)
	two := filepath.Join(dir, "two")
	os.Mkdir(two, 0o755)
	os.WriteFile(filepath.Join(two, "a.gguf"), b, 0o644)
	os.WriteFile(filepath.Join(two, "b.gguf"), b, 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "--model", cut, "--tokens", "1"}, "run past the end of the file"},
		{[]string{"generate", "--model", junk, "--tokens", "1"}, "not a GGUF file"},
		{[]string{"generate", "--model", two, "--tokens", "1"}, "2 .gguf files"},
		{[]string{"convert", "--model", filepath.Join(testdata, "models", "demo"), "--out", filepath.Join(dir, "x.gguf"), "--type", "q4_k_xl"}, `--type "q4_k_xl"`},
		{[]string{"convert", "--model", filepath.Join(testdata, "models", "qwen35-tiny"), "--out", filepath.Join(dir, "x.gguf")}, "cannot be written as GGUF"},
		{[]string{"convert", "--model", filepath.Join(testdata, "models", "demo")}, "--out FILE"},
	} {
		_, stderr, code := cli(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q, want one line containing %q", c.args, code, stderr, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.gguf.tmp")); err == nil {
		t.Error("a failed convert left its temporary file")
	}
}
