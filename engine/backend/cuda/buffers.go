package cuda

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// devBuf is a growable device scratch buffer. Growing frees the old memory
// after a stream synchronisation and drops every captured graph (they hold
// its address).
type devBuf struct {
	p    driver.DevPtr
	size uint64
}

// ensure makes the buffer at least n bytes. The caller holds the thread and
// has left graph mode.
func (d *devBuf) ensure(b *Backend, n uint64) error {
	if n <= d.size {
		return nil
	}
	n = max(n, d.size+d.size/2)
	n = (n + 255) &^ 255
	if d.p != 0 {
		b.sync()
		b.g.dropAll()
		b.free(d.p)
		d.p, d.size = 0, 0
	}
	p, err := b.malloc(n, "scratch")
	if err != nil {
		return err
	}
	d.p, d.size = p, n
	return nil
}

// Scratch buffers, each used by one operator at a time.
const (
	scrXBF16   = iota // activations converted for cuBLASLt
	scrAttn           // split-attention partial results
	scrRouter         // MoE router logits
	scrTopIdx         // MoE chosen experts
	scrTopW           // MoE weights of the chosen experts
	scrGate           // MoE / shared expert gate activations
	scrUp             // MoE / shared expert up activations
	scrDown           // MoE per-pair outputs
	scrShared         // shared expert output
	scrSharedZ        // shared expert gate logits
	scrAttnCnt        // attn_decode's split counters (zero between launches)
	scrSample         // sample_rows' results
	scrGemvW          // split-K GEMV counters (zero between launches) and partial sums
	scrMoEX           // grouped MoE: the tokens' rows gathered by expert
	scrMLP            // mlp_fused's sums and counter (zero between launches)
	scrOProj          // attn_oproj's counters (zero between launches) and the heads' shares
	numScratch
)

// zeroScratch returns scratch buffer i with at least n bytes for counters
// and sums that every launch leaves zero: zeroed whenever it grows
// (leaving graph mode first, which launches what is held).
func (b *Backend) zeroScratch(i int, n uint64) (driver.DevPtr, bool) {
	s := &b.scratch[i]
	grows := n > s.size
	p, ok := b.scratchPtr(i, n)
	if ok && grows {
		b.memset(p, 0, int(s.size/4))
	}
	return p, ok && b.err == nil
}

// scratchPtr returns scratch buffer i with at least n bytes, leaving graph
// mode first if it has to grow.
func (b *Backend) scratchPtr(i int, n uint64) (driver.DevPtr, bool) {
	s := &b.scratch[i]
	if n > s.size {
		b.needEager()
		if err := s.ensure(b, n); err != nil {
			b.fail(err)
			return 0, false
		}
	}
	return s.p, true
}

// pinned is page-locked host memory (async copies and graph memcpy nodes
// need it).
type pinned struct {
	p    unsafe.Pointer
	size int
}

func (h *pinned) ensure(b *Backend, n int) error {
	if n <= h.size {
		return nil
	}
	b.pin()
	defer b.unpin()
	n = max(n, h.size+h.size/2, 4096)
	if h.p != nil {
		b.sync()
		b.g.dropAll()
		b.drv.MemFreeHost(h.p) //nolint:errcheck // replacing
		h.p, h.size = nil, 0
	}
	p, err := b.drv.MemAllocHost(uint64(n))
	if err != nil {
		return err
	}
	h.p, h.size = p, n
	return nil
}

func (h *pinned) close(b *Backend) {
	if h.p != nil {
		b.pin()
		defer b.unpin()
		b.drv.MemFreeHost(h.p) //nolint:errcheck // closing
		h.p, h.size = nil, 0
	}
}

// arena stages per-forward metadata: bump allocation in pinned host memory
// mirrored by device memory at the same offsets; reset only after the
// stream has been synchronised (ReadRows), so a pending copy never reads a
// reused region. Offsets are deterministic from the start of a forward,
// which lets a captured graph's copies serve later forwards.
type arena struct {
	host  pinned
	dev   driver.DevPtr
	size  int
	off   int
	epoch int // bumped at every reset; cached staging is valid within one epoch
}

func (a *arena) init(b *Backend, n int) error {
	if err := a.host.ensure(b, n); err != nil {
		return err
	}
	p, err := b.malloc(uint64(n), "metadata arena")
	if err != nil {
		return err
	}
	a.dev, a.size, a.off = p, n, 0
	return nil
}

func (a *arena) close(b *Backend) {
	a.host.close(b)
	a.dev, a.size = 0, 0
}

// reset forgets all staged data; the stream must be idle.
func (a *arena) reset() {
	a.off = 0
	a.epoch++
}

// stage copies v to the arena, enqueues its upload (a record) and returns
// its device address and arena offset.
func (b *Backend) stage(v []int32) (driver.DevPtr, int) {
	n := len(v) * 4
	off := b.arenaAlloc(n)
	if off < 0 {
		return 0, -1
	}
	if n > 0 {
		copy(unsafe.Slice((*int32)(unsafe.Add(b.meta.host.p, off)), len(v)), v)
	}
	b.submitCopyHtoD(b.meta.dev+driver.DevPtr(off), off, n)
	return b.meta.dev + driver.DevPtr(off), off
}

// staged returns the n int32s staged at off (host side).
func (b *Backend) staged(off, n int) []int32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Add(b.meta.host.p, off)), n)
}

// arenaAlloc reserves n bytes (16-byte aligned), synchronising and resetting
// (or growing) the arena when full.
func (b *Backend) arenaAlloc(n int) int {
	a := &b.meta
	need := (n + 15) &^ 15
	if a.off+need > a.size {
		b.needEager()
		b.sync()
		a.reset()
		if need > a.size {
			size := max(need, 2*a.size)
			b.g.dropAll()
			b.free(a.dev)
			a.host.close(b)
			if err := a.init(b, size); err != nil {
				b.fail(fmt.Errorf("growing the metadata arena: %w", err))
				return -1
			}
		}
	}
	off := a.off
	a.off += need
	return off
}

// uploadChunk is the size of each staging buffer for host-to-device copies.
const uploadChunk = 32 << 20

// upload copies Go memory to the device through two page-locked staging
// buffers (the CPU fills one while the DMA engine drains the other). Copies
// never read Go memory directly: the driver then only ever sees host
// addresses it allocated itself. The copy is complete (the source may be
// reused) when upload returns; the caller holds the thread.
func (b *Backend) upload(dst driver.DevPtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	b.writes++
	for i := range b.stageBuf {
		if err := b.stageBuf[i].ensure(b, uploadChunk); err != nil {
			return err
		}
	}
	events := b.drv.HasEvents()
	if events && b.stageEv[0] == 0 {
		for i := range b.stageEv {
			e, err := b.drv.EventCreate()
			if err != nil {
				events = false
				break
			}
			b.stageEv[i] = e
		}
	}
	used := [2]bool{}
	for off, k := 0, 0; off < len(src); off, k = off+uploadChunk, k^1 {
		n := min(uploadChunk, len(src)-off)
		if used[k] {
			var err error
			if events {
				err = b.drv.EventSynchronize(b.stageEv[k])
			} else {
				err = b.drv.StreamSynchronize(b.stream)
			}
			if err != nil {
				return err
			}
		}
		copy(unsafe.Slice((*byte)(b.stageBuf[k].p), n), src[off:off+n])
		if err := b.drv.HtoDAsync(dst+driver.DevPtr(off), b.stageBuf[k].p, uint64(n), b.stream); err != nil {
			if err = b.retryCopy(dst+driver.DevPtr(off), b.stageBuf[k].p, src[off:off+n], err); err != nil {
				return err
			}
		}
		if events {
			if err := b.drv.EventRecord(b.stageEv[k], b.stream); err != nil {
				return err
			}
		}
		used[k] = true
	}
	return b.drv.StreamSynchronize(b.stream)
}

// retryCopy handles a host-to-device copy the driver refused: it logs what
// the thread and context looked like, then tries again with the context
// rebound, synchronously, and from the Go memory itself, keeping the first
// that works. (Seen on the H200 machine: CUDA_ERROR_INVALID_VALUE from
// cuMemcpyHtoDAsync on calls from some goroutines.)
func (b *Backend) retryCopy(dst driver.DevPtr, pinnedSrc unsafe.Pointer, src []byte, first error) error {
	cur := b.drv.CurrentCtx()
	b.logf("cuda: copy of %d bytes to %#x failed: %v (thread %d, bound %d, current context %#x, ours %#x)",
		len(src), uint64(dst), first, unix.Gettid(), b.tid, uint64(cur), uint64(b.ctx))
	b.copyRetries++
	if err := b.drv.SetCurrent(b.ctx); err == nil {
		b.tid = unix.Gettid()
		if err := b.drv.HtoDAsync(dst, pinnedSrc, uint64(len(src)), b.stream); err == nil {
			b.logf("cuda: retry after rebinding the context worked")
			return nil
		} else {
			b.logf("cuda: retry after rebinding: %v", err)
		}
	}
	if err := b.drv.StreamSynchronize(b.stream); err != nil {
		return fmt.Errorf("%w (then cuStreamSynchronize: %v)", first, err)
	}
	if err := b.drv.HtoD(dst, pinnedSrc, uint64(len(src))); err == nil {
		b.logf("cuda: synchronous copy from pinned memory worked")
		return nil
	} else {
		b.logf("cuda: synchronous copy from pinned memory: %v", err)
	}
	if err := b.drv.HtoD(dst, unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src))); err == nil {
		b.logf("cuda: synchronous copy from Go memory worked")
		return nil
	} else {
		return fmt.Errorf("%w (retries failed too; last: %v)", first, err)
	}
}
