package cuda

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// The dense MLP of a one-token decode in one launch (kernels/mlp.cu,
// INFERNIX_CUDA_MLP=fused; off by default): the held gate|up + SwiGLU
// product (fuse.go) takes the down product that reads its SwiGLU and the
// residual add that follows, and mlp_fused streams all three weights as
// one. It reads down transposed: a copy made once per weight, when a
// prefill's product first uses it (or else at the first decode step that
// would fuse, which then runs unfused), and freed with the weight.
//
// INFERNIX_CUDA_MLP_BLOCKS: the grid (default one block an SM);
// INFERNIX_CUDA_MLP_WARPS: warps a block (default the most that are a
// multiple of I/256 within MLP_MAXT); INFERNIX_CUDA_MLP_DEFINES: the
// module's tunables, spaces or commas between ("MLP_U=4,MLP_MAXT=1024").

// mlpConfig is the fused MLP's setting.
type mlpConfig struct {
	on            bool
	blocks, warps int // 0: defaults
	maxThreads    int // MLP_MAXT the module was built with
	smemSet       int // dynamic shared memory mlp_fused was allowed above 48 KB
	runs          int // launches (tests, benchmarks)
}

// mlpMaxThreads is MLP_MAXT's default in kernels/mlp.cu.
const mlpMaxThreads = 512

// mlpInit reads the setting and, when on, loads kernels/mlp.cu; if it
// does not load, the MLP stays in two launches and one log line says why.
func (b *Backend) mlpInit() {
	b.mlp = mlpConfig{on: os.Getenv("INFERNIX_CUDA_MLP") == "fused", maxThreads: mlpMaxThreads}
	if !b.mlp.on {
		return
	}
	b.mlp.blocks = max(envInt("INFERNIX_CUDA_MLP_BLOCKS", 0), 0)
	b.mlp.warps = max(envInt("INFERNIX_CUDA_MLP_WARPS", 0), 0)
	b.mlp.on = b.mlpLoad()
}

// mlpLoad loads kernels/mlp.cu unless it is loaded; false (logged) if it
// does not load.
func (b *Backend) mlpLoad() bool {
	if b.k.mlpFused != nil {
		return true
	}
	defs := strings.FieldsFunc(os.Getenv("INFERNIX_CUDA_MLP_DEFINES"), func(r rune) bool { return r == ' ' || r == ',' })
	for _, d := range defs {
		var n int
		if _, err := fmt.Sscanf(d, "MLP_MAXT=%d", &n); err == nil && n > 0 {
			b.mlp.maxThreads = n
		}
	}
	names := map[string]**kernel{"mlp_fused": &b.k.mlpFused, "transpose_bf16": &b.k.transposeBF16}
	err := b.load("mlp.cu", defs, names)
	if err != nil && b.err == nil {
		// Vector reductions are PTX 8.1: with an older toolkit, scalar ones.
		if err2 := b.load("mlp.cu", append(defs, "MLP_RED4=0"), names); err2 == nil {
			b.logf("cuda: kernels/mlp.cu with vector reductions: %v; built with scalar ones", err)
			err = nil
		}
	}
	if err != nil {
		b.k.mlpFused, b.k.transposeBF16 = nil, nil
		b.logf("cuda: %v; the MLP stays in two launches", err)
		return false
	}
	return true
}

// mlpShape is how mlp_fused runs a product of I inputs and F intermediate
// rows: G blocks of NW warps, NS = I/256 column slices of K warps each,
// and smem bytes of dynamic shared memory; ok false where it cannot.
func (b *Backend) mlpShape(I, F int) (G, NW, smem int, ok bool) {
	if I%256 != 0 || I == 0 || F == 0 {
		return 0, 0, 0, false
	}
	NS := I / 256
	most := b.mlp.maxThreads / 32
	if NS > most {
		return 0, 0, 0, false
	}
	NW = NS * (most / NS)
	if w := b.mlp.warps; w > 0 {
		if w%NS != 0 || w > most {
			return 0, 0, 0, false
		}
		NW = w
	}
	G = b.smCount
	if b.mlp.blocks > 0 {
		G = b.mlp.blocks
	}
	return G, NW, 4 * mlpSmemFloats(I, F, G, NW/NS), true
}

// mlpSmemFloats is mlp_fused's dynamic shared memory in floats: the
// slices' sums (phase 1: 2·jmax rows × NS; then K·I), the block's SwiGLU
// (jmax) and each slice's Σx² (NS), as kernels/mlp.cu lays them out.
func mlpSmemFloats(I, F, G, K int) int {
	NS, jmax := I/256, (F+G-1)/G
	return max(2*jmax*NS, K*I) + jmax + NS
}

// mlpTakes reports whether the held gate|up + SwiGLU (p) and the down
// product out = x·wᵀ that reads its SwiGLU can run as mlp_fused. Where
// only down's transposed copy or the scratch is missing it makes them,
// which flushes what is held: this product then runs apart.
func (b *Backend) mlpTakes(p *pending, out, x driver.DevPtr, w *Tensor, T, I, O int) bool {
	if !b.mlp.on || b.k.mlpFused == nil || p.kind != pendGemv || p.epi != epiSwiGLU || !p.norm || p.n != 2 || T != 1 || p.T != 1 ||
		x != p.aux || w.dt != backend.BF16 || p.jobs[0].w.dt != backend.BF16 || p.jobs[1].w.dt != backend.BF16 ||
		I != p.jobs[0].O || O != p.I {
		return false
	}
	for _, d := range []driver.DevPtr{p.nrm.x, p.nrm.out, p.x, p.aux, p.jobs[0].out, p.jobs[1].out} {
		if out == d {
			return false
		}
	}
	_, _, smem, ok := b.mlpShape(O, I)
	if !ok || smem > b.maxSmem {
		return false
	}
	if _, ok := b.mlpT[w.ptr]; !ok || b.scratch[scrMLP].size < uint64(4*(O+1)) {
		b.mlpPrepare(w)
		return false
	}
	return true
}

// mlpPrepare makes w's transposed copy (for down products of I inputs and
// O outputs, w [O, I]) and the reduction's scratch, where mlp_fused could
// take w and they are missing.
func (b *Backend) mlpPrepare(w *Tensor) {
	if !b.mlp.on || b.k.transposeBF16 == nil || w.dt != backend.BF16 || b.err != nil {
		return
	}
	O, I := w.rows, w.cols
	if _, _, _, ok := b.mlpShape(O, I); !ok {
		return
	}
	if _, ok := b.mlpT[w.ptr]; !ok {
		b.needEager()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		p, err := b.wmalloc(w.bytes(), "down weight transposed (INFERNIX_CUDA_MLP=fused)")
		if err != nil {
			// No room for the copy: the MLP stays in two launches.
			b.logf("cuda: %v; the MLP stays in two launches", err)
			b.mlp.on = false
			return
		}
		b.launch(b.k.transposeBF16, uint32((I+31)/32), uint32((O+31)/32), 1, 32, 8, 0, ptr(p), ptr(w.ptr), i32(O), i32(I))
		b.mlpT[w.ptr] = p
	}
	// acc [O] and the counter, zero: every launch leaves them so.
	b.zeroScratch(scrMLP, uint64(4*(O+1)))
}

// launchMLP launches a held pendMLP: struct MlpP (kernels/mlp.cu),
// fourteen pointers, then I, F, eps and a pad packed two to a slot.
func (b *Backend) launchMLP(q *pending) {
	I, F := q.I, q.jobs[0].O
	G, NW, smem, ok := b.mlpShape(I, F)
	wdt, have := b.mlpT[q.down.w.ptr]
	if !ok || !have {
		b.fail(fmt.Errorf("cuda: fused MLP launched without its shape or transposed weight"))
		return
	}
	if smem > 48<<10 && smem > b.mlp.smemSet {
		if err := b.drv.FuncSetAttribute(b.k.mlpFused.fn, driver.FuncAttrMaxDynamicShared, smem); err != nil {
			b.fail(err)
			return
		}
		b.mlp.smemSet = smem
	}
	s := b.scratch[scrMLP].p
	var a [16]uint64
	a[0], a[1], a[2] = ptr(q.nrm.x), ptr(q.nrm.w), ptr(q.nrm.out)
	a[3], a[4], a[5] = ptr(q.jobs[0].w.ptr), ptr(q.jobs[1].w.ptr), ptr(wdt)
	a[6], a[7], a[8], a[9] = ptr(q.jobs[0].out), ptr(q.jobs[1].out), ptr(q.aux), ptr(q.down.out)
	a[10], a[11] = ptr(q.resid), ptr(q.sum)
	a[12], a[13] = ptr(s), ptr(s+driver.DevPtr(4*I))
	a[14] = argPair(i32(I), i32(F))
	a[15] = argPair(f32(q.nrm.eps), 0)
	b.mlp.runs++
	b.launch(b.k.mlpFused, uint32(G), 1, 1, uint32(32*NW), 1, uint32(smem), a[:]...)
}

// mlpFree drops p's transposed copy, if any (Free).
func (b *Backend) mlpFree(p driver.DevPtr) {
	if t, ok := b.mlpT[p]; ok {
		delete(b.mlpT, p)
		b.free(t)
	}
}
