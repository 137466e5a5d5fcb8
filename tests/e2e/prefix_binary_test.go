package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infernix/infernix/server/testmodel"
)

// TestServePrefixCacheSavedOnSIGTERM: with a save interval far away, `serve`
// writes the prefix cache when it gets SIGTERM, and the next server on the
// same data directory serves the prompt's blocks from it.
func TestServePrefixCacheSavedOnSIGTERM(t *testing.T) {
	_, tmp, bin := buildBinary(t)
	model := testmodel.Dir(t, testmodel.Options{})
	data := filepath.Join(tmp, "data")
	prompt := make([]int, 200) // + 2 generated: 3 full blocks of 64
	for i := range prompt {
		prompt[i] = 1000 + i*7
	}
	body := map[string]any{"prompt": prompt, "max_tokens": 2, "temperature": 0}
	var texts []string
	for restart := 0; restart < 2; restart++ {
		cmd, url, banner, stderr := startServeURL(t, bin, "--model", model, "--port", "0", "--context", "1024",
			"--data-dir", data, "--prefix-cache-save-mins", "60")
		if want := []string{"0 blocks", "3 blocks"}[restart]; !strings.Contains(banner, want+" and 0 snapshots stored") {
			t.Errorf("start %d: the banner does not say %q:\n%s", restart, want, banner)
		}
		st, _, r := post(t, url+"/v1/completions", body)
		if st != 200 {
			t.Fatalf("start %d: %d %s", restart, st, r.Raw)
		}
		if got, want := r.Get("usage.prompt_tokens_details.cached_tokens").Int(), []int64{0, 192}[restart]; got != want {
			t.Errorf("start %d: %d cached tokens, want %d", restart, got, want)
		}
		texts = append(texts, r.Get("choices.0.text").Str)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("serve exited with %v after SIGTERM:\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not exit within 30 s of SIGTERM")
		}
	}
	if texts[0] != texts[1] {
		t.Errorf("output changed with the stored cache: %q vs %q", texts[0], texts[1])
	}
}

// startServeURL starts serve and waits for its address; it returns the
// command, the base URL, the startup output and standard error.
func startServeURL(t *testing.T, bin string, args ...string) (*exec.Cmd, string, string, *strings.Builder) {
	t.Helper()
	cmd, stdout, stderr := startServe(t, bin, args...)
	url, banner := awaitBanner(t, cmd, stdout, stderr, "prefix cache") // printed after "listening on"
	return cmd, url, banner, stderr
}
