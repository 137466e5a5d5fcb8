package cuda

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

func i32(v int) uint64     { return uint64(uint32(int32(v))) }
func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }

// argPair packs two 32-bit kernel arguments (i32, f32) into one 64-bit slot of
// a struct parameter, lo first.
func argPair(lo, hi uint64) uint64 { return lo&0xffffffff | hi<<32 }

func ptr(p driver.DevPtr) uint64 {
	return uint64(p)
}

func blocks(n, per int) uint32 { return uint32(max(1, (n+per-1)/per)) }

// gridFor bounds grid-stride launches over n items.
func gridFor(n int) uint32 { return uint32(min(max(1, (n+255)/256), 8192)) }

// Embed begins a forward: see the package documentation on graphs.
func (b *Backend) Embed(out, table backend.Tensor, ids []int32) {
	o, tab := f32t(out, "Embed"), tensor(table)
	if o.cols != tab.cols || o.rows < len(ids) {
		panic(fmt.Sprintf("cuda: Embed out %dx%d table %dx%d ids %d", o.rows, o.cols, tab.rows, tab.cols, len(ids)))
	}
	for _, id := range ids {
		if id < 0 || int(id) >= tab.rows {
			panic(fmt.Sprintf("cuda: Embed token id %d outside vocabulary of %d", id, tab.rows))
		}
	}
	if b.err != nil {
		return
	}
	b.flush()
	b.beginStep(len(ids))
	p, _ := b.stage(ids)
	b.launch(b.k.embed[tab.dt], uint32(len(ids)), 1, 1, 256, 1, 0, ptr(o.ptr), ptr(tab.ptr), ptr(p), i32(tab.cols))
}

// f32Weight returns a weight's data as F32 on the device (1-row weights
// already are; others are converted once and cached).
func (b *Backend) f32Weight(w *Tensor) driver.DevPtr {
	if w.dt == backend.F32 {
		return w.ptr
	}
	if p, ok := b.f32w[w.ptr]; ok {
		return p
	}
	b.needEager()
	n := w.rows * w.cols
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, err := b.wmalloc(uint64(n)*4, "f32 weight copy")
	if err != nil {
		b.fail(err)
		return 0
	}
	k := b.k.bf16ToF32
	if w.dt == backend.F16 {
		k = b.k.f16ToF32
	}
	b.launch(k, gridFor(n), 1, 1, 256, 1, 0, ptr(p), ptr(w.ptr), uint64(n))
	b.f32w[w.ptr] = p
	return p
}

func (b *Backend) RMSNorm(out, x, w backend.Tensor, eps float32) {
	o, xx, ww := f32t(out, "RMSNorm"), f32t(x, "RMSNorm"), tensor(w)
	n := xx.cols
	if ww.rows*ww.cols != n || o.cols != n || o.rows != xx.rows {
		panic(fmt.Sprintf("cuda: RMSNorm x %dx%d w %dx%d out %dx%d", xx.rows, xx.cols, ww.rows, ww.cols, o.rows, o.cols))
	}
	if b.err != nil || xx.rows == 0 {
		return
	}
	wp := b.f32Weight(ww)
	if b.fusedAddNorm(o.ptr, xx.ptr, wp, xx.rows, n, eps) {
		return
	}
	op := normOp{out: o.ptr, x: xx.ptr, w: wp, rows: xx.rows, n: n, eps: eps}
	if op.out == op.x {
		if b.holdHeadNorm(op) {
			return
		}
	} else if b.holdNorm(op) {
		return
	}
	b.rmsnormNow(op)
}

func (b *Backend) rmsnormNow(op normOp) {
	if op.n > 1024 && op.rows < 4*b.smCount {
		b.launch(b.k.rmsBlock, uint32(op.rows), 1, 1, 256, 1, 0, ptr(op.out), ptr(op.x), ptr(op.w), i32(op.n), f32(op.eps))
		return
	}
	const perBlock = 8
	b.launch(b.k.rmsWarp, blocks(op.rows, perBlock), 1, 1, 32, perBlock, 0, ptr(op.out), ptr(op.x), ptr(op.w), i32(op.rows), i32(op.n), f32(op.eps))
}

func (b *Backend) Add(out, a, c backend.Tensor) {
	o, aa, cc := f32t(out, "Add"), f32t(a, "Add"), f32t(c, "Add")
	n := aa.rows * aa.cols
	if cc.rows*cc.cols != n || o.rows*o.cols != n {
		panic("cuda: Add shape mismatch")
	}
	b.add(o.ptr, aa.ptr, cc.ptr, n)
}

func (b *Backend) add(o, a, c driver.DevPtr, n int) {
	if b.holdAdd(o, a, c, n) {
		return
	}
	b.addNow(o, a, c, n)
}

func (b *Backend) addNow(o, a, c driver.DevPtr, n int) {
	if n == 0 {
		return
	}
	if n%4 == 0 {
		b.launch(b.k.add4, gridFor(n/4), 1, 1, 256, 1, 0, ptr(o), ptr(a), ptr(c), uint64(n/4))
		return
	}
	b.launch(b.k.add, gridFor(n), 1, 1, 256, 1, 0, ptr(o), ptr(a), ptr(c), uint64(n))
}

func (b *Backend) SwiGLU(out, gate, up backend.Tensor) {
	o, g, u := f32t(out, "SwiGLU"), f32t(gate, "SwiGLU"), f32t(up, "SwiGLU")
	n := g.rows * g.cols
	if u.rows*u.cols != n || o.rows*o.cols != n {
		panic("cuda: SwiGLU shape mismatch")
	}
	b.swigluOut = o.ptr
	if b.err != nil || b.holdSwiGLU(o.ptr, g.ptr, u.ptr, n) {
		return
	}
	if n%4 == 0 { // in place too (the models write gate): each thread reads its elements before writing them
		if ob, ok := b.shadowBF16(g.rows, n); ok {
			b.launch(b.k.swiglu4BF, gridFor(n/4), 1, 1, 256, 1, 0, ptr(o.ptr), ptr(ob), ptr(g.ptr), ptr(u.ptr), uint64(n/4))
			b.xbf.produced(o.ptr, n, b.writes)
			return
		}
	}
	b.swiglu(o.ptr, g.ptr, u.ptr, n)
}

func (b *Backend) swiglu(o, g, u driver.DevPtr, n int) {
	if n == 0 {
		return
	}
	if n%4 == 0 {
		b.launch(b.k.swiglu4, gridFor(n/4), 1, 1, 256, 1, 0, ptr(o), ptr(g), ptr(u), uint64(n/4))
		return
	}
	b.launch(b.k.swiglu, gridFor(n), 1, 1, 256, 1, 0, ptr(o), ptr(g), ptr(u), uint64(n))
}

// ropeTables are a Rope's cos/sin on the device.
type ropeTables struct {
	cos, sin driver.DevPtr
	n        int
}

func (b *Backend) RoPE(x backend.Tensor, heads int, pos []int32, r *backend.Rope) {
	xx := f32t(x, "RoPE")
	if heads <= 0 || xx.cols%heads != 0 || 2*r.Half > xx.cols/heads || len(pos) > xx.rows {
		panic(fmt.Sprintf("cuda: RoPE of %dx%d with %d heads, half %d, %d positions", xx.rows, xx.cols, heads, r.Half, len(pos)))
	}
	for _, p := range pos {
		if p < 0 || int(p) >= r.MaxPos {
			panic(fmt.Sprintf("cuda: RoPE position %d beyond table of %d", p, r.MaxPos))
		}
	}
	if b.err != nil || len(pos) == 0 || r.Half == 0 {
		return
	}
	tab := b.ropes[r]
	if tab == nil || tab.n != len(r.Cos) {
		tab = b.uploadRope(r)
		if tab == nil {
			return
		}
	}
	pp := b.positions(pos)
	op := ropeOp{x: xx.ptr, T: len(pos), cols: xx.cols, heads: heads, pos: pp, tab: tab, half: r.Half}
	if b.err != nil || b.holdRoPE(op) {
		return
	}
	b.ropeNow(op)
}

func (b *Backend) ropeNow(op ropeOp) {
	b.launch(b.k.rope, uint32(op.T), 1, 1, uint32(min(256, max(32, op.heads*op.half))), 1, 0,
		ptr(op.x), ptr(op.pos), ptr(op.tab.cos), ptr(op.tab.sin), i32(op.cols), i32(op.heads), i32(op.half))
}

func (b *Backend) uploadRope(r *backend.Rope) *ropeTables {
	b.needEager()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := len(r.Cos)
	t := &ropeTables{n: n}
	var err error
	if t.cos, err = b.malloc(uint64(4*max(n, 1)), "rope table"); err == nil {
		t.sin, err = b.malloc(uint64(4*max(n, 1)), "rope table")
	}
	if err == nil && n > 0 {
		if err = b.upload(t.cos, unsafe.Slice((*byte)(unsafe.Pointer(&r.Cos[0])), 4*n)); err == nil {
			err = b.upload(t.sin, unsafe.Slice((*byte)(unsafe.Pointer(&r.Sin[0])), 4*n))
		}
	}
	if err != nil {
		b.fail(err)
		return nil
	}
	if old := b.ropes[r]; old != nil {
		b.sync()
		b.free(old.cos)
		b.free(old.sin)
	}
	b.ropes[r] = t
	return t
}

// positions stages pos once per forward (RoPE of q and k and attention
// share it): a repeated request with equal content reuses the upload.
func (b *Backend) positions(pos []int32) driver.DevPtr {
	c := &b.posCache
	if c.epoch == b.meta.epoch && c.n == len(pos) && c.off >= 0 && equalI32(b.staged(c.off, c.n), pos) {
		return b.meta.dev + driver.DevPtr(c.off)
	}
	p, off := b.stage(pos)
	*c = stagedRef{epoch: b.meta.epoch, off: off, n: len(pos)}
	return p
}

// stagedRef remembers what was staged where in the current arena epoch.
type stagedRef struct {
	epoch, off, n int
}

func equalI32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (b *Backend) Gather(out, x backend.Tensor, idx []int32) {
	o, xx := f32t(out, "Gather"), f32t(x, "Gather")
	if o.cols != xx.cols || o.rows < len(idx) {
		panic(fmt.Sprintf("cuda: Gather out %dx%d x %dx%d idx %d", o.rows, o.cols, xx.rows, xx.cols, len(idx)))
	}
	for _, r := range idx {
		if r < 0 || int(r) >= xx.rows {
			panic(fmt.Sprintf("cuda: Gather row %d of a %d-row tensor", r, xx.rows))
		}
	}
	if b.err != nil || len(idx) == 0 {
		return
	}
	p, _ := b.stage(idx)
	b.launch(b.k.gather, uint32(len(idx)), 1, 1, 256, 1, 0, ptr(o.ptr), ptr(xx.ptr), ptr(p), i32(o.cols))
}
