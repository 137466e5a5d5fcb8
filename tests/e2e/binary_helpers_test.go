package e2e

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/infernix/infernix/server/testmodel"
)

// buildBinary builds ./cmd/infernix (CGO_ENABLED=0) into a fresh temporary
// directory and returns the repository root, that directory and the binary.
// It skips the test under -short.
func buildBinary(t *testing.T) (root, tmp, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	root, err := testmodel.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tmp = t.TempDir()
	bin = filepath.Join(tmp, "infernix")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./cmd/infernix")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return root, tmp, bin
}

// startServe starts `bin serve args...` and returns the command, its standard
// output and what it writes to standard error. The process is killed when the
// test ends, if it is still running.
func startServe(t *testing.T, bin string, args ...string) (*exec.Cmd, io.ReadCloser, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	// The default data directory lives under XDG_DATA_HOME: keep tests apart
	// from the user's and from each other.
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir())
	stdout, _ := cmd.StdoutPipe()
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, stdout, stderr
}

// awaitBanner reads serve's stdout up to the first line containing last
// (60 s at most), then drains the rest in the background, and returns the
// address of the "listening on" line and the lines read. It fails t if the
// server exits or stays silent first.
func awaitBanner(t *testing.T, cmd *exec.Cmd, stdout io.Reader, stderr *strings.Builder, last string) (url, banner string) {
	t.Helper()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var read []string
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("serve exited early: %v\n%s\n%s", cmd.Wait(), strings.Join(read, "\n"), stderr.String())
			}
			read = append(read, l)
			if _, rest, ok := strings.Cut(l, "listening on "); ok {
				url = strings.Fields(rest)[0]
			}
			if strings.Contains(l, last) {
				if url == "" {
					t.Fatalf("no address before %q:\n%s", last, strings.Join(read, "\n"))
				}
				go func() {
					for range lines {
					}
				}()
				return url, strings.Join(read, "\n")
			}
		case <-timeout:
			t.Fatalf("no %q line within 60 s:\n%s", last, strings.Join(read, "\n"))
		}
	}
}
