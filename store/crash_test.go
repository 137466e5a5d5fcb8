package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/infernix/infernix/engine/prefix"
)

const crashBlock = 4096

func crashKey(i int) prefix.Key {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(i))
	return prefix.Seed(b[:])
}

// TestCrashHelper is the process killed by TestKillDuringSave: it saves
// blocks forever, saying "ready" once some are written.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv("INFERNIX_CRASH_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	s, err := Open(dir, nil)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	p, err := s.Prefix([]byte("crash"), crashBlock, 0)
	if err != nil {
		os.Exit(2)
	}
	ready := false
	for i := 0; ; i++ {
		p.Save(crashKey(i), block(crashBlock, byte(i)))
		if !ready && p.Stats().Saved >= 100 {
			fmt.Println("ready")
			ready = true
		}
	}
}

// TestKillDuringSave: a process killed with SIGKILL while saving leaves a
// directory that opens, and every block it lists is either served with its
// exact bytes or dropped, never served wrong.
func TestKillDuringSave(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$")
	cmd.Env = append(os.Environ(), "INFERNIX_CRASH_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
	}
	cmd.Process.Kill()
	cmd.Wait()

	s, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("reopen after kill -9: %v", err)
	}
	defer s.Close()
	p, err := s.Prefix([]byte("crash"), crashBlock, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	n := p.Stats().Blocks
	served := 0
	dst := make([]byte, crashBlock)
	for i := 0; i < 100000 && served < n; i++ {
		k := crashKey(i)
		if !p.Has(k) {
			continue
		}
		if err := p.Load(k, dst); err != nil {
			continue // dropped
		}
		served++
		if !bytes.Equal(dst, block(crashBlock, byte(i))) {
			t.Fatalf("block %d served with wrong bytes", i)
		}
	}
	if served == 0 {
		t.Fatalf("nothing reusable after the kill (%d indexed)", n)
	}
	t.Logf("%d blocks indexed, %d served, %d corrupt dropped", n, served, s.Corrupt())
}
