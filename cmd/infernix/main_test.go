package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testdata = "../../tests/testdata"

func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runMain(args, &out, &errb)
	return out.String(), errb.String(), code
}

type refFixture struct {
	Prompts []struct {
		Tokens      []int32        `json:"tokens"`
		Top         [][][2]float64 `json:"top"`
		NextLogprob []float64      `json:"next_logprob"`
		Greedy      []int32        `json:"greedy"`
	} `json:"prompts"`
}

func loadRef(t *testing.T, name string) refFixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, "reference", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r refFixture
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func ids(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strings.TrimSpace(strings.Trim(string(must(json.Marshal(x))), `"`))
	}
	return strings.Join(s, ",")
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestGenerateAndScoreMatchTransformers runs the CLI on a committed fixture
// model (no tokenizer: token ids in and out) and compares with transformers.
func TestGenerateAndScoreMatchTransformers(t *testing.T) {
	for _, name := range []string{"qwen3-tied-f32", "qwen3moe-bf16"} {
		ref := loadRef(t, name)
		p := ref.Prompts[1]
		dir := filepath.Join(testdata, "models", name)
		out, stderr, code := cli(t, "generate", "--model", dir, "--tokens", ids(p.Tokens), "--max-tokens", "5", "--temperature", "0", "--json")
		if code != 0 {
			t.Fatalf("%s generate: exit %d: %s", name, code, stderr)
		}
		var gen struct {
			Tokens []int32 `json:"tokens"`
			Text   string  `json:"text"`
		}
		if err := json.Unmarshal([]byte(out), &gen); err != nil {
			t.Fatalf("%s: %v: %s", name, err, out)
		}
		if len(gen.Tokens) != 5 || ids(gen.Tokens) != ids(p.Greedy[:5]) {
			t.Fatalf("%s: generated %v, transformers %v", name, gen.Tokens, p.Greedy[:5])
		}
		out, stderr, code = cli(t, "score", "--model", dir, "--tokens", ids(p.Tokens), "--top", "3", "--json")
		if code != 0 {
			t.Fatalf("%s score: exit %d: %s", name, code, stderr)
		}
		var sc struct {
			Positions []struct {
				Token   int32        `json:"token"`
				Logprob float64      `json:"logprob"`
				Top     [][2]float64 `json:"top"`
			} `json:"positions"`
		}
		if err := json.Unmarshal([]byte(out), &sc); err != nil {
			t.Fatal(err)
		}
		if len(sc.Positions) != len(p.Tokens)-1 {
			t.Fatalf("%s: %d positions for %d tokens", name, len(sc.Positions), len(p.Tokens))
		}
		for i, pos := range sc.Positions {
			if pos.Token != p.Tokens[i+1] || math.Abs(pos.Logprob-p.NextLogprob[i]) > 1e-3 || len(pos.Top) != 3 {
				t.Fatalf("%s position %d: %+v, transformers token %d log-prob %.6f", name, i+1, pos, p.Tokens[i+1], p.NextLogprob[i])
			}
			if int32(pos.Top[0][0]) != int32(p.Top[i][0][0]) {
				t.Fatalf("%s position %d: top %v, transformers %v", name, i+1, pos.Top[0], p.Top[i][0])
			}
		}
	}
}

func TestTextCommands(t *testing.T) {
	tok := filepath.Join(testdata, "qwen3-tokenizer")
	out, _, code := cli(t, "tokenize", "--model", tok, "Hello, world!")
	if code != 0 || strings.TrimSpace(out) != "9707,11,1879,0" {
		t.Fatalf("tokenize: %q (exit %d)", out, code)
	}
	out, _, code = cli(t, "tokenize", "--model", tok, "--json", "<think>hi")
	if code != 0 || strings.TrimSpace(out) != `{"tokens":[151667,6023]}` {
		t.Fatalf("tokenize --json: %q", out)
	}
	out, _, code = cli(t, "detokenize", "--model", tok, "9707,11,1879,0")
	if code != 0 || out != "Hello, world!\n" {
		t.Fatalf("detokenize: %q", out)
	}
	req := filepath.Join(t.TempDir(), "req.json")
	os.WriteFile(req, []byte(`{"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":false}}`), 0o644)
	out, _, code = cli(t, "template", "--model", tok, "--request", req)
	want := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if code != 0 || out != want {
		t.Fatalf("template: %q", out)
	}
}

// TestDemoChat: the quick-start model answers a greedy chat through `run`.
func TestDemoChat(t *testing.T) {
	out, stderr, code := cli(t, "run", "--model", filepath.Join(testdata, "models", "demo"), "--prompt", "What is the capital of France?", "--think=false", "--temperature", "0", "--max-tokens", "40")
	if code != 0 || !strings.Contains(out, "Paris") {
		t.Fatalf("run: exit %d, %q %s", code, out, stderr)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"generate", "--model", "/nonexistent", "--tokens", "1"}, "model directory"},
		{[]string{"generate", "--model", filepath.Join(testdata, "models", "qwen3-tied-f32"), "--tokens", "1,x"}, `token id "x"`},
		{[]string{"generate", "--model", filepath.Join(testdata, "models", "qwen3-tied-f32"), "--tokens", "1,99999"}, "outside the vocabulary"},
		{[]string{"generate", "--model", filepath.Join(testdata, "models", "qwen3-tied-f32"), "--prompt", "hi"}, "no tokenizer.json"},
		{[]string{"generate", "--model", filepath.Join(testdata, "models", "qwen3-tied-f32"), "--tokens", "1", "--temperature", "-2"}, "temperature"},
		{[]string{"score", "--model", filepath.Join(testdata, "models", "qwen3-tied-f32"), "--tokens", "1"}, "at least 2 tokens"},
		{[]string{"tokenize", "--model", filepath.Join(testdata, "models", "qwen3-tied-f32"), "x"}, "no tokenizer.json"},
		{[]string{"template", "--model", filepath.Join(testdata, "qwen3-tokenizer")}, "--request"},
		{[]string{"nosuch"}, "unknown command"},
		{[]string{"generate", "--bogus"}, "flag provided but not defined"},
	}
	for _, c := range cases {
		_, stderr, code := cli(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q, want one line containing %q", c.args, code, stderr, c.want)
		}
	}
}
