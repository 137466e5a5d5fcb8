package driver

import (
	"os"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// TestExecutor runs C calls (libc's getpid) through the device-thread
// executor from many goroutines, and a Go function on the thread with Run.
// No GPU needed: this is the hand-over logic every CUDA call goes through.
func TestExecutor(t *testing.T) {
	libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Skip(err)
	}
	getpid, err := purego.Dlsym(libc, "getpid")
	if err != nil {
		t.Skip(err)
	}
	gettid, err := purego.Dlsym(libc, "gettid")
	if err != nil {
		t.Skip(err)
	}
	e := newExecutor()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if r := e.call(getpid); int(r) != os.Getpid() {
					errs <- "getpid through the executor returned another pid"
					return
				}
				if r := e.call(gettid); int(r) != e.tid {
					errs <- "a call ran on another thread than the executor's"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Fatal(msg)
	}
	ran := false
	e.run(func() {
		ran = true
		if unix.Gettid() != e.tid {
			t.Error("Run's function is not on the executor's thread")
		}
		// Calls made inside run directly (no deadlock).
		if r := e.call(gettid); int(r) != e.tid {
			t.Error("call inside run left the thread")
		}
		e.run(func() {}) // nested run is direct too
	})
	if !ran {
		t.Fatal("Run did not run its function")
	}
}
