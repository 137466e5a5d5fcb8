package dirwatch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSignatureAndPoll(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "lib"), 0o755)
	os.WriteFile(filepath.Join(dir, "a.star"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "lib", "b.star"), []byte("y"), 0o644)
	os.WriteFile(filepath.Join(dir, "c.lua"), []byte("z"), 0o644)
	flat, deep := Signature(dir, ".star", false), Signature(dir, ".star", true)
	if flat == deep || flat == "" {
		t.Fatalf("recursive and flat signatures should differ: %q vs %q", flat, deep)
	}
	os.WriteFile(filepath.Join(dir, "a.star"), []byte("xx"), 0o644)
	if Signature(dir, ".star", false) == flat {
		t.Fatal("a resized file must change the signature")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n := 0
	Poll(ctx, 5*time.Millisecond, func() bool { return true }, func() {
		if n++; n == 3 {
			cancel()
		}
	})
	if n != 3 {
		t.Fatalf("reloaded %d times", n)
	}
}
