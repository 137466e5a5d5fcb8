package e2e

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

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
