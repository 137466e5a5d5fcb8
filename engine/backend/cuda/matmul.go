package cuda

import (
	"fmt"
	"runtime"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// gemmKey identifies a planned cuBLASLt product.
type gemmKey struct {
	O, T, I int
	dt      backend.DType
	algo    int // cuBLASLt's heuristic choice (gemmAlgoFor)
}

// MatMul computes out[r, o] = Σ_i x[r, i]·w[o, i]. Up to gemvMax rows go
// through the bandwidth-bound GEMV kernels (weights read once, f32
// activations); more rows of a BF16 (or F32) weight go through cuBLASLt
// (activations rounded to bf16 for BF16 weights, f32 accumulation).
func (b *Backend) MatMul(out, x, w backend.Tensor) {
	o, xx, ww := f32t(out, "MatMul"), f32t(x, "MatMul"), tensor(w)
	T, I, O := xx.rows, xx.cols, ww.rows
	if ww.cols != I || o.rows != T || o.cols != O {
		panic(fmt.Sprintf("cuda: MatMul shapes out %dx%d x %dx%d w %dx%d", o.rows, o.cols, T, I, O, ww.cols))
	}
	b.matmul(o.ptr, xx.ptr, ww, T, I, O)
}

func (b *Backend) matmul(out, x driver.DevPtr, w *Tensor, T, I, O int) {
	b.matmulOpt(out, x, w, T, I, O, true)
}

// matmulOpt is matmul; allowLt=false keeps f32 activations for any T (the
// MoE router: rounding its inputs could flip a close expert choice).
func (b *Backend) matmulOpt(out, x driver.DevPtr, w *Tensor, T, I, O int, allowLt bool) {
	if b.err != nil || T == 0 || O == 0 {
		return
	}
	if I == 0 {
		b.memset(out, 0, T*O)
		return
	}
	if T > 1 && x == b.swigluOut && b.mlp.on {
		// A prefill's down projection: its transposed copy for the decode
		// steps' mlp_fused, made now rather than in the first step.
		b.mlpPrepare(w)
	}
	if allowLt && T > b.gemvMax && b.lt != nil && I%8 == 0 && (w.dt == backend.BF16 || w.dt == backend.F32) {
		if b.gemmLt(out, x, w, T, I, O) {
			return
		}
	}
	if I%8 != 0 {
		b.launch(b.k.gemvScalar[w.dt], blocks(O, 8), uint32(T), 1, 256, 1, 0, ptr(out), ptr(x), ptr(w.ptr), i32(I), i32(O))
		return
	}
	if b.holdGemv(out, x, w, T, I, O) {
		return
	}
	for r0 := 0; r0 < T; r0 += 8 {
		n := min(8, T-r0)
		ri := gemvIndex(n)
		b.launch(b.k.gemv[w.dt][ri], blocks(O, gemvBlockRows), 1, 1, 256, 1, 0,
			ptr(out+driver.DevPtr(4*r0*O)), ptr(x+driver.DevPtr(4*r0*I)), ptr(w.ptr), i32(n), i32(I), i32(O))
	}
}

// gemmLt runs the product through cuBLASLt: row-major out[T,O] = x[T,I]·wᵀ is
// column-major outᵀ[O,T] = W[I,O]ᵀ·xᵀ[I,T] ("TN"). False if cuBLASLt has no
// algorithm for the shape (the caller falls back to the GEMV kernels).
func (b *Backend) gemmLt(out, x driver.DevPtr, w *Tensor, T, I, O int) bool {
	if b.skinny && w.dt == backend.BF16 && T > 8 && T <= 16 && I%256 == 0 && b.k.skinny != nil {
		b.skinnyProduct(out, x, w, T, I, O)
		return true
	}
	key := gemmKey{O: O, T: T, I: I, dt: w.dt, algo: b.gemmAlgoFor(T)}
	g, ok := b.gemms[key]
	if !ok {
		b.needEager()
		runtime.LockOSThread()
		if !b.bind() {
			runtime.UnlockOSThread()
			return true
		}
		typ := driver.DataBF16
		if w.dt == backend.F32 {
			typ = driver.DataF32
		}
		var err error
		g, err = b.lt.PlanGemmAlgo(driver.OpT, driver.OpN, O, T, I, typ, I, typ, I, driver.DataF32, O, b.ws.size, key.algo)
		runtime.UnlockOSThread()
		if err != nil {
			b.logf("cuda: cuBLASLt has no plan for %v: %v; using the GEMV kernels", key, err)
			g = nil
		}
		b.gemms[key] = g
	}
	if g == nil {
		return false
	}
	src := x
	n := T * I
	if w.dt == backend.BF16 {
		var ok bool
		if src, ok = b.bf16Input(x, n); !ok {
			return true
		}
	}
	r := rec{kind: recGemm, nargs: 3, gemm: g}
	r.args[0], r.args[1], r.args[2] = uint64(w.ptr), uint64(src), uint64(out)
	b.submit(&r)
	if w.dt == backend.BF16 {
		b.xbf.converted(x, n, out, T*O, b.writes)
	}
	return true
}

// bf16Input is x's n floats rounded to bf16 in scratch, as the products
// with bf16 inputs read them: converted here unless the kernel that wrote x
// also wrote them there (shadowBF16) or an earlier product converted the
// same x (bf16Reuse). False when the scratch could not grow (the failure
// is recorded).
func (b *Backend) bf16Input(x driver.DevPtr, n int) (driver.DevPtr, bool) {
	xb, ok := b.scratchPtr(scrXBF16, uint64(2*n))
	if !ok {
		return 0, false
	}
	if !b.xbf.reusable(x, n, b.writes) || b.pend.kind != pendNone {
		b.launch(b.k.toBF16, gridFor(n/2), 1, 1, 256, 1, 0, ptr(xb), ptr(x), uint64(n/2))
	}
	return xb, true
}

// gemmAlgoFor is the cuBLASLt heuristic choice for a product of T rows:
// INFERNIX_CUDA_GEMM_ALGO=k takes the k-th for decode batches (T ≤ 64),
// where cuBLASLt's first choice for a skinny product may not be its
// fastest (the bench measures 16 lanes with k = 1…3); 0 otherwise.
func (b *Backend) gemmAlgoFor(T int) int {
	if T <= 64 {
		return b.gemmAlgo
	}
	return 0
}

// bf16Reuse lets consecutive cuBLASLt products of the same activations (q,
// k and v of one RMSNorm output; gate and up) round them to bf16 once: a
// prefill layer otherwise converts its 4096-wide input three times and then
// twice. The scratch copy is reused only when nothing at all happened on
// the device since the previous product's GEMM was recorded (writes counts
// every record, allocation, free and upload), the input is the same range,
// and that GEMM's output does not overlap it. Graph replays see the same
// decisions, since they follow the same record sequence.
type bf16Reuse struct {
	src    driver.DevPtr
	n      int
	writes uint64
	ok     bool
}

// produced records that the kernel just recorded wrote src (n floats)
// rounded into the scratch as well (add_rmsnorm_bf, swiglu_f32x4_bf).
func (c *bf16Reuse) produced(src driver.DevPtr, n int, writes uint64) {
	*c = bf16Reuse{src: src, n: n, writes: writes, ok: true}
}

// shadowBF16 returns the scratch that a kernel about to be recorded may also
// write its f32 output of n floats to, rounded to bf16, when the output's
// reader is likely a cuBLASLt product of BF16 weights (more than gemvMax
// rows, cuBLASLt loaded; INFERNIX_CUDA_SHADOW=0 turns it off): the product then
// finds it (bf16Reuse) and skips its to_bf16 launch. False: write only f32.
// Nothing else may be recorded between that kernel and b.xbf.produced.
func (b *Backend) shadowBF16(rows, n int) (driver.DevPtr, bool) {
	if b.pend.kind == pendSkinny {
		b.flush() // the held products (gate and up) run first; then the kernel may write the copy
	}
	if rows <= b.gemvMax || b.lt == nil || b.pend.kind != pendNone || b.k.addRMSBF == nil || b.noShadow {
		return 0, false
	}
	return b.scratchPtr(scrXBF16, uint64(2*n))
}

func (c *bf16Reuse) reusable(src driver.DevPtr, n int, writes uint64) bool {
	return c.ok && c.src == src && c.n == n && c.writes == writes
}

// converted records that the scratch holds src (n floats) rounded, as of
// the GEMM just recorded, which wrote out (outN floats).
func (c *bf16Reuse) converted(src driver.DevPtr, n int, out driver.DevPtr, outN int, writes uint64) {
	overlap := out < src+driver.DevPtr(4*n) && src < out+driver.DevPtr(4*outN)
	*c = bf16Reuse{src: src, n: n, writes: writes, ok: !overlap}
}

func (b *Backend) memset(p driver.DevPtr, v uint32, words int) {
	if words == 0 || b.err != nil {
		return
	}
	r := rec{kind: recMemset, nargs: 3}
	r.args[0], r.args[1], r.args[2] = uint64(p), uint64(v), uint64(words)
	b.submit(&r)
}

// copyDtoD records a device-to-device copy (tests and tools); it runs on
// the stream as a kernel-free record.
func (b *Backend) copyDtoD(dst, src driver.DevPtr, n int) {
	if n == 0 || b.err != nil {
		return
	}
	r := rec{kind: recDtoD, nargs: 3}
	r.args[0], r.args[1], r.args[2] = uint64(dst), uint64(src), uint64(n)
	b.submit(&r)
}

// gemvBlockRows is the outputs per block of the GEMV kernels (GW_WARPS ×
// GW_RW in kernels/gemv.cu).
const gemvBlockRows = 16

// gemvfWarps is GW_WARPS, the warps per block of the fused products.
const gemvfWarps = 8
