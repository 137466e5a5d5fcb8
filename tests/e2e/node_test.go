package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestOpenAINodeClient drives the server with the official openai npm
// package (openai.test.mjs). It needs node and `npm ci` in tests/e2e
// (tests/run.sh does it); without them it skips, unless
// INFERNIX_E2E_REQUIRE_NODE=1 makes that a failure (for CI).
func TestOpenAINodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node is not installed"
	default:
		if _, err := os.Stat(filepath.Join("node_modules", "openai", "package.json")); err != nil {
			missing = "tests/e2e/node_modules/openai is missing (run: cd tests/e2e && npm ci)"
		}
	}
	if missing != "" {
		if os.Getenv("INFERNIX_E2E_REQUIRE_NODE") == "1" {
			t.Fatal(missing)
		}
		t.Skip(missing)
	}
	const key = "sk-node-test"
	ts := start(t, opts{server: serverCfg(func(c *serverConfig) { c.APIKeys = []string{key} })})
	defer ts.close()
	run := func(t *testing.T, url string, env ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "openai.test.mjs")
		cmd.Env = append(os.Environ(), append([]string{"INFERNIX_BASE_URL=" + url + "/v1", "INFERNIX_API_KEY=" + key}, env...)...)
		out, err := cmd.CombinedOutput()
		t.Logf("node --test openai.test.mjs:\n%s", out)
		if err != nil {
			t.Fatalf("node tests failed: %v", err)
		}
	}
	run(t, ts.URL)
	if dir := demoModel(t, "demo", false); dir != "" {
		t.Run("demo", func(t *testing.T) {
			ds := start(t, opts{model: dir, server: serverCfg(func(c *serverConfig) { c.APIKeys = []string{key} })})
			defer ds.close()
			run(t, ds.URL, "INFERNIX_TOOLS=1")
		})
	}
}
