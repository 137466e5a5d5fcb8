package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// nodeTest runs script (node --test) against a server with an API key, on
// the random tiny model and then on the demo model with INFERNIX_TOOLS=1.
// It skips without node or the npm package pkg, as TestOpenAINodeClient
// does (INFERNIX_E2E_REQUIRE_NODE=1 makes that a failure).
func nodeTest(t *testing.T, script, pkg, apiPath string) {
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node is not installed"
	default:
		if _, err := os.Stat(filepath.Join("node_modules", pkg, "package.json")); err != nil {
			missing = "tests/e2e/node_modules/" + pkg + " is missing (run: cd tests/e2e && npm ci)"
		}
	}
	if missing != "" {
		if os.Getenv("INFERNIX_E2E_REQUIRE_NODE") == "1" {
			t.Fatal(missing)
		}
		t.Skip(missing)
	}
	const key = "sk-node-test"
	run := func(t *testing.T, url string, env ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", script)
		cmd.Env = append(os.Environ(), append([]string{"INFERNIX_BASE_URL=" + url + apiPath, "INFERNIX_API_KEY=" + key}, env...)...)
		out, err := cmd.CombinedOutput()
		t.Logf("node --test %s:\n%s", script, out)
		if err != nil {
			t.Fatalf("node tests failed: %v", err)
		}
	}
	ts := start(t, opts{server: serverCfg(func(c *serverConfig) { c.APIKeys = []string{key} })})
	defer ts.close()
	run(t, ts.URL)
	if dir := demoModel(t, "demo", false); dir != "" {
		t.Run("demo", func(t *testing.T) {
			ds := start(t, opts{model: dir, server: serverCfg(func(c *serverConfig) { c.APIKeys = []string{key} })})
			defer ds.close()
			run(t, ds.URL, "INFERNIX_TOOLS=1")
		})
	}
}

// TestAnthropicNodeClient drives the Messages API with the official
// @anthropic-ai/sdk package (anthropic.test.mjs).
func TestAnthropicNodeClient(t *testing.T) {
	nodeTest(t, "anthropic.test.mjs", filepath.Join("@anthropic-ai", "sdk"), "")
}

// TestResponsesNodeClient drives the Responses API with the official
// openai package (responses.test.mjs).
func TestResponsesNodeClient(t *testing.T) {
	nodeTest(t, "responses.test.mjs", "openai", "/v1")
}
