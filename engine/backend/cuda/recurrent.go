package cuda

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"unsafe"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// The hybrid models' operators (backend.Recurrent), in kernels/recurrent.cu:
// the causal conv and its state, the gated delta rule in its recurrent form
// (token by token; the contract lets a backend run it for prefills too), the
// gated RMSNorm, and the gated attention's slice and sigmoid gate. Every
// per-forward value the kernels read (each sequence's token range, state
// slot, and whether it starts from zero state) is staged metadata, so decode
// steps of hybrid models are captured as graphs like any other.

var (
	_ backend.Recurrent       = (*Backend)(nil)
	_ backend.GDNShapeChecker = (*Backend)(nil)
)

// gdnKeyDims are the key head dims gdn_recurrent is compiled for (a row's
// values split over a power-of-two count of threads, ≤ 32 registers each).
var gdnKeyDims = []int{8, 16, 32, 64, 128, 256}

// runTable appends to h the batch's sequence runs as kernels/recurrent.cu
// reads them: runs[4r:] = {lo, hi, slot, fresh}, then each token's run. It
// returns the table and the count of runs.
func runTable(h []int32, ab *backend.AttnBatch, T int) ([]int32, int) {
	n := 0
	for t := 0; t < T; {
		u := t + 1
		for u < T && ab.Seq[u] == ab.Seq[t] {
			u++
		}
		fresh := int32(0)
		if ab.Pos[t] == 0 {
			fresh = 1
		}
		h = append(h, int32(t), int32(u), int32(ab.Slot(ab.Seq[t])), fresh)
		n++
		t = u
	}
	for r := 0; r < n; r++ {
		for t := h[4*r]; t < h[4*r+1]; t++ {
			h = append(h, int32(r))
		}
	}
	return h, n
}

// runs stages the batch's run table (runTable). Equal content within a
// forward reuses the upload (every linear-attention layer asks for it).
func (b *Backend) runs(ab *backend.AttnBatch, T int) (driver.DevPtr, int) {
	if len(ab.Seq) < T || len(ab.Pos) < T {
		panic(fmt.Sprintf("cuda: %d tokens with %d sequence ids and %d positions", T, len(ab.Seq), len(ab.Pos)))
	}
	h, n := runTable(b.runsHost[:0], ab, T)
	b.runsHost = h
	c := &b.runsCache
	if c.epoch == b.meta.epoch && c.n == len(h) && c.off >= 0 && equalI32(b.staged(c.off, c.n), h) {
		return b.meta.dev + driver.DevPtr(c.off), n
	}
	p, off := b.stage(h)
	*c = stagedRef{epoch: b.meta.epoch, off: off, n: len(h)}
	return p, n
}

// longestRun is the most tokens of one run in a run table of n runs.
func longestRun(table []int32, n int) int {
	m := 0
	for r := 0; r < n; r++ {
		m = max(m, int(table[4*r+1]-table[4*r]))
	}
	return m
}

// checkSlots panics unless every run's slot has rows in a state pool of
// rows per slot.
func checkSlots(op string, ab *backend.AttnBatch, T, rows, per int) {
	for t := 0; t < T; t++ {
		if s := ab.Slot(ab.Seq[t]); s < 0 || (s+1)*per > rows {
			panic(fmt.Sprintf("cuda: %s: state slot %d outside a pool of %d rows (%d a slot)", op, s, rows, per))
		}
	}
}

// recReady fails the backend (once) when kernels/recurrent.cu did not load.
func (b *Backend) recReady() bool {
	if b.recErr != nil {
		b.fail(fmt.Errorf("cuda: the hybrid models' kernels did not load: %w", b.recErr))
		return false
	}
	return true
}

func (b *Backend) CausalConv1D(out, x, w, state backend.Tensor, ab *backend.AttnBatch) {
	o, xx, ww, st := f32t(out, "CausalConv1D"), f32t(x, "CausalConv1D"), tensor(w), f32t(state, "CausalConv1D")
	C, K, T := xx.cols, ww.cols, xx.rows
	if o.cols != C || ww.rows != C || st.cols != C || o.rows != T || o.ptr == xx.ptr || K < 1 || K > 17 {
		panic(fmt.Sprintf("cuda: CausalConv1D out %dx%d x %dx%d w %dx%d state %dx%d (kernel ≤ 17)", o.rows, o.cols, xx.rows, xx.cols, ww.rows, ww.cols, st.rows, st.cols))
	}
	checkSlots("CausalConv1D", ab, T, st.rows, K-1)
	if b.err != nil || T == 0 || !b.recReady() {
		return
	}
	wp := b.f32Weight(ww)
	runs, nr := b.runs(ab, T)
	per := (C + 255) / 256
	// One token a run (decode): each thread moves its own state on.
	own := 0
	if nr == T && K > 1 {
		own = 1
	}
	b.launch(b.k.conv, uint32(T*per), 1, 1, 256, 1, 0, ptr(o.ptr), ptr(xx.ptr), ptr(wp), ptr(st.ptr), ptr(runs), i32(nr), i32(T), i32(C), i32(K), i32(own))
	if K > 1 && own == 0 {
		b.launch(b.k.convState, uint32(nr*per), 1, 1, 256, 1, 0, ptr(st.ptr), ptr(xx.ptr), ptr(runs), i32(nr), i32(C), i32(K))
	}
}

// CheckGDN says whether gdn_recurrent is compiled for s's key head dim.
func (b *Backend) CheckGDN(s backend.GDNSpec) error {
	if b.recErr != nil {
		return fmt.Errorf("cuda: the linear-attention kernels did not load: %w", b.recErr)
	}
	if b.k.gdn[s.KDim] == nil {
		return fmt.Errorf("cuda: linear-attention key head dim %d is not supported (one of %v)", s.KDim, gdnKeyDims)
	}
	if s.KHeads <= 0 || s.VHeads%s.KHeads != 0 {
		return fmt.Errorf("cuda: %d value heads for %d key heads (a multiple is needed)", s.VHeads, s.KHeads)
	}
	return nil
}

// gdnRowsPerBlock mirrors GdnShape<KD, NT>::RB in kernels/recurrent.cu.
func gdnRowsPerBlock(kd, nt int) int {
	tpr := 1
	if kd > 32 {
		tpr = kd / 32
	}
	return nt / tpr
}

// gdnNarrowFrom is the longest run from which the delta rule takes blocks of
// 32 threads (INFERNIX_CUDA_GDN_THREADS=32 or 128 forces one size).
var gdnNarrowFrom = func() int {
	switch os.Getenv("INFERNIX_CUDA_GDN_THREADS") {
	case "32":
		return 1
	case "128":
		return math.MaxInt
	}
	return 17
}()

func (b *Backend) GatedDeltaRule(out, qkv, a, bt, aLog, dtBias, state backend.Tensor, ab *backend.AttnBatch, s backend.GDNSpec) {
	o, x, aa, bb, st := f32t(out, "GatedDeltaRule"), f32t(qkv, "GatedDeltaRule"), f32t(a, "GatedDeltaRule"), f32t(bt, "GatedDeltaRule"), f32t(state, "GatedDeltaRule")
	al, dt := tensor(aLog), tensor(dtBias)
	kd, vd := s.KHeads*s.KDim, s.VHeads*s.VDim
	T := x.rows
	if s.KHeads <= 0 || s.VHeads%s.KHeads != 0 || x.cols != 2*kd+vd || o.cols != vd || o.rows != T || aa.cols != s.VHeads || bb.cols != s.VHeads ||
		aa.rows < T || bb.rows < T || st.cols != s.KDim || al.rows*al.cols != s.VHeads || dt.rows*dt.cols != s.VHeads {
		panic(fmt.Sprintf("cuda: GatedDeltaRule qkv %dx%d out %dx%d a %dx%d b %dx%d state %dx%d spec %+v", x.rows, x.cols, o.rows, o.cols, aa.rows, aa.cols, bb.rows, bb.cols, st.rows, st.cols, s))
	}
	k := b.k.gdn[s.KDim]
	if k == nil {
		b.fail(b.CheckGDN(s))
		return
	}
	checkSlots("GatedDeltaRule", ab, T, st.rows, s.VHeads*s.VDim)
	if b.err != nil || T == 0 {
		return
	}
	alp, dtp := b.f32Weight(al), b.f32Weight(dt)
	runs, nr := b.runs(ab, T)
	nt := 128
	if longestRun(b.runsHost, nr) >= gdnNarrowFrom {
		k, nt = b.k.gdnNarrow[s.KDim], 32
	}
	rpb := gdnRowsPerBlock(s.KDim, nt)
	rb := (s.VDim + rpb - 1) / rpb
	b.launch(k, uint32(nr*s.VHeads*rb), 1, 1, uint32(nt), 1, 0, ptr(o.ptr), ptr(x.ptr), ptr(aa.ptr), ptr(bb.ptr), ptr(alp), ptr(dtp),
		ptr(st.ptr), ptr(runs), argPair(i32(nr), i32(s.KHeads)), argPair(i32(s.VHeads), i32(s.VDim)))
}

func (b *Backend) RMSNormGated(out, x, z, w backend.Tensor, eps float32) {
	o, xx, zz, ww := f32t(out, "RMSNormGated"), f32t(x, "RMSNormGated"), f32t(z, "RMSNormGated"), tensor(w)
	n := xx.cols
	if ww.rows*ww.cols != n || zz.cols != n || o.cols != n || zz.rows != xx.rows || o.rows != xx.rows {
		panic(fmt.Sprintf("cuda: RMSNormGated x %dx%d z %dx%d w %dx%d", xx.rows, xx.cols, zz.rows, zz.cols, ww.rows, ww.cols))
	}
	if b.err != nil || xx.rows == 0 || !b.recReady() {
		return
	}
	wp := b.f32Weight(ww)
	b.launch(b.k.rmsGated, blocks(xx.rows, 8), 1, 1, 256, 1, 0, ptr(o.ptr), ptr(xx.ptr), ptr(zz.ptr), ptr(wp), i32(xx.rows), i32(n), f32(eps))
}

func (b *Backend) MulSigmoid(out, x, gate backend.Tensor) {
	o, xx, g := f32t(out, "MulSigmoid"), f32t(x, "MulSigmoid"), f32t(gate, "MulSigmoid")
	n := xx.rows * xx.cols
	if g.rows*g.cols != n || o.rows*o.cols != n {
		panic(fmt.Sprintf("cuda: MulSigmoid out %dx%d x %dx%d gate %dx%d", o.rows, o.cols, xx.rows, xx.cols, g.rows, g.cols))
	}
	if b.err != nil || n == 0 || !b.recReady() {
		return
	}
	b.launch(b.k.mulSig, gridFor(n), 1, 1, 256, 1, 0, ptr(o.ptr), ptr(xx.ptr), ptr(g.ptr), uint64(n))
}

func (b *Backend) SliceCols(out, x backend.Tensor, groups, off, width int) {
	o, xx := f32t(out, "SliceCols"), f32t(x, "SliceCols")
	if groups <= 0 || xx.cols%groups != 0 || off < 0 || width < 0 || off+width > xx.cols/groups || o.cols != groups*width || o.rows != xx.rows {
		panic(fmt.Sprintf("cuda: SliceCols x %dx%d out %dx%d groups %d off %d width %d", xx.rows, xx.cols, o.rows, o.cols, groups, off, width))
	}
	if b.err != nil || xx.rows == 0 || width == 0 || !b.recReady() {
		return
	}
	threads := uint32(min(256, (groups*width+31)&^31))
	b.launch(b.k.sliceCols, uint32(xx.rows), 1, 1, threads, 1, 0, ptr(o.ptr), ptr(xx.ptr), i32(xx.cols), i32(groups), i32(off), i32(width))
}

// stateRows checks that n values from row of t are inside it and returns
// their device address once the work queued so far has finished; false
// when the backend has failed. The caller then holds the OS thread
// (unlock when true).
func (b *Backend) stateRows(op string, t backend.Tensor, row, n int) (driver.DevPtr, bool) {
	tt := f32t(t, op)
	if row < 0 || row*tt.cols+n > tt.rows*tt.cols {
		panic(fmt.Sprintf("cuda: %s of %d values at row %d of %dx%d", op, n, row, tt.rows, tt.cols))
	}
	b.sync()
	runtime.LockOSThread()
	if b.err != nil || n == 0 || !b.bind() {
		runtime.UnlockOSThread()
		return 0, false
	}
	return tt.ptr + driver.DevPtr(4*row*tt.cols), true
}

// ReadStateRows copies rows of a state pool to dst after the work queued so
// far has finished (a snapshot for the prefix cache).
func (b *Backend) ReadStateRows(t backend.Tensor, row int, dst []float32) {
	src, ok := b.stateRows("ReadStateRows", t, row, len(dst))
	if !ok {
		return
	}
	defer runtime.UnlockOSThread()
	n := 4 * len(dst)
	if n > b.out.size {
		b.needEager()
		if err := b.out.ensure(b, n); err != nil {
			b.fail(err)
			return
		}
	}
	b.fail(b.drv.DtoHAsync(b.out.p, src, uint64(n), b.stream))
	b.fail(b.drv.StreamSynchronize(b.stream))
	if b.err == nil {
		copy(dst, unsafe.Slice((*float32)(b.out.p), len(dst)))
	}
}

// WriteStateRows overwrites rows of a state pool with src (a snapshot
// restored); it returns when the copy is done.
func (b *Backend) WriteStateRows(t backend.Tensor, row int, src []float32) {
	dst, ok := b.stateRows("WriteStateRows", t, row, len(src))
	if !ok {
		return
	}
	defer runtime.UnlockOSThread()
	b.fail(b.upload(dst, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(src))), 4*len(src))))
	runtime.KeepAlive(src)
}
