package driver

import (
	"runtime"
	"sync"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// executor runs C calls on one OS thread that it owns for the life of the
// process: the CUDA context is made current there once, and every driver
// and cuBLASLt call runs there, whichever goroutine asks. A caller already
// on that thread calls directly; others hand the call over and wait (a few
// microseconds). Calls are serialised by mu.
type executor struct {
	tid  int
	mu   sync.Mutex
	work chan struct{}
	done chan struct{}
	fn   uintptr
	job  func() // instead of fn: run a Go function on the thread (Run)
	argv [maxCallArgs]uintptr
	n    int
	r    uintptr
}

const maxCallArgs = 20

func newExecutor() *executor {
	e := &executor{work: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan int)
	go func() {
		// Never unlocked: the thread belongs to the device.
		runtime.LockOSThread()
		ready <- unix.Gettid()
		for range e.work {
			if e.job != nil {
				e.job()
			} else {
				e.r, _, _ = purego.SyscallN(e.fn, e.argv[:e.n]...)
			}
			e.done <- struct{}{}
		}
	}()
	e.tid = <-ready
	return e
}

// call runs fn(args...) on the executor's thread and returns its result.
// Pointer arguments converted to uintptr at the call site escape to the heap
// (go:uintptrescapes), so they stay valid while the caller waits.
//
//go:uintptrescapes
func (e *executor) call(fn uintptr, args ...uintptr) uintptr {
	if unix.Gettid() == e.tid {
		r, _, _ := purego.SyscallN(fn, args...)
		return r
	}
	e.mu.Lock()
	e.fn = fn
	e.n = copy(e.argv[:], args)
	e.work <- struct{}{}
	<-e.done
	r := e.r
	e.mu.Unlock()
	return r
}

// run executes f on the executor's thread and waits for it. Calls f makes
// are direct (no hand-over); other goroutines' calls wait until f returns.
func (e *executor) run(f func()) {
	if unix.Gettid() == e.tid {
		f()
		return
	}
	e.mu.Lock()
	e.job = f
	e.work <- struct{}{}
	<-e.done
	e.job = nil
	e.mu.Unlock()
}

// Run executes f on the device thread, so that every driver call f makes
// is direct: a long-running device loop (the engine's scheduler) started
// with Run pays no hand-over per call. Other goroutines' driver calls wait
// until f returns.
func (d *Driver) Run(f func()) { d.ex.run(f) }

// OnDeviceThread reports whether the caller runs on the thread that owns
// the device (then calls cost no hand-over).
func (d *Driver) OnDeviceThread() bool { return unix.Gettid() == d.ex.tid }
