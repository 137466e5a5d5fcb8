package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	cfg8b := filepath.Join(testdata, "configs", "qwen3-8b")
	out, stderr, code := cli(t, "plan", "--model", cfg8b, "--context", "8192", "--lanes", "4", "--gpu-memory", "139", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	// Qwen3-8B has 8.19 B parameters: 16.4 GB in BF16. Its KV is 36 layers
	// × 8 heads × 128 × 2 (K, V) × 2 bytes = 144 KiB per token.
	if w := p["weights_bytes"].(float64); w < 16.0e9 || w > 16.6e9 {
		t.Errorf("weights %.3g bytes, want ≈ 16.4e9", w)
	}
	if kv := p["kv_bytes"].(float64); kv != 4*8192*147456 {
		t.Errorf("KV %.0f bytes, want %d", kv, 4*8192*147456)
	}
	if p["fits"] != true {
		t.Errorf("8B at 4×8K should fit 139 GiB: %s", out)
	}
	_, stderr, code = cli(t, "plan", "--model", cfg8b, "--context", "32768", "--lanes", "16", "--gpu-memory", "24")
	if code != 3 || !strings.Contains(stderr, "does not fit") {
		t.Errorf("24 GiB: exit %d, %s", code, stderr)
	}
	// A real checkpoint's size comes from its tensors.
	out, _, code = cli(t, "plan", "--model", filepath.Join(testdata, "models", "demo"), "--gpu-memory", "2", "--json")
	if code != 0 || !strings.Contains(out, `"weights_bytes":14690816`) {
		t.Errorf("demo: exit %d %s", code, out)
	}
	// No device and no --gpu-memory: no plan possible (exit 1) on machines without CUDA.
	if _, stderr, code = cli(t, "plan", "--model", cfg8b); code == 0 {
		t.Skip("a CUDA device is present")
	} else if code != 1 || !strings.Contains(stderr, "no plan possible") {
		t.Errorf("without a device: exit %d, %s", code, stderr)
	}
}
