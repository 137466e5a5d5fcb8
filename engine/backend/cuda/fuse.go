package cuda

import (
	"os"
	"strconv"
	"strings"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// Operators are fused by holding back what may combine with the next
// operator; whatever does not combine flushes what is held first, so the
// order of device work is unchanged. Decisions depend only on the operator
// sequence (and pointer equalities within it), so captured graphs stay
// valid. What fuses, in a Qwen3 decoder layer (T ≤ 8 rows):
//
//	RMSNorm(h, x) → MatMul(q|k|v, h)      one product kernel, the norm as its prologue
//	RMSNorm(qh) RMSNorm(kh) RoPE(q) RoPE(k) Attention
//	                                      one prep kernel (norms, RoPE, KV store) + attention,
//	                                      or one kernel where the decode attention on the
//	                                      tensor cores takes the prep (one token per sequence)
//	MatMul(h, a, o) → Add(x, x, h)        one product kernel, the add as its epilogue; with
//	                                      INFERNIX_CUDA_OPROJ=fold the one-token attention's
//	                                      split merge too (attn_oproj, oproj.go)
//	RMSNorm(h, x) → MatMul(g|u, h) → SwiGLU(g, g, u)
//	                                      one product kernel, norm prologue, SwiGLU epilogue
//	MatMul(m, g, down) → Add(x, x, m)     one product kernel, the add as its epilogue
//
// and a residual Add followed by the RMSNorm of its result (where no product
// precedes the add) is one kernel. Every fused kernel writes everything the
// unfused operators would have (h, the gate and up products, ...), so
// nothing observable depends on fusion.
//
// INFERNIX_CUDA_FUSE=0 turns all of it off; INFERNIX_CUDA_NOFUSE takes a
// comma-separated list of parts to turn off (gemvf: the fused product
// kernels, and with them norm, resid and swiglu; norm; resid; swiglu; attn,
// and with it prep; prep: the prep folded into the decode attention), so
// that a bad kernel can be bisected on the device.

type pendKind uint8

const (
	pendNone   pendKind = iota
	pendGemv            // decode products of the same activations (+ prologue, epilogue)
	pendAdd             // a residual add (may fuse with the RMSNorm of its result)
	pendNorm            // an RMSNorm that the next decode product may take as its prologue
	pendAttn            // per-head RMSNorms and RoPEs of q and k, which Attention may take
	pendSkinny          // bf16 products of 9–16 rows of the same activations, for one gemm_skinny launch (skinny.go)
	pendMoE             // moe_down (moe_fused.go), which may take the residual add as its epilogue
	pendMLP             // a held SwiGLU product (pendGemv) and the down product of its output, for mlp_fused (mlp.go)
	pendMerge           // the decode attention's split merge (attn_merge_splits), which o_proj may take (oproj.go)
	pendOProj           // the merge and the product of its output (jobs[0]), for attn_oproj (oproj.go)
)

// Epilogues of the fused product kernels (GF_* in kernels/gemv.cu).
const (
	epiNone   = 0 // GF_MULTI
	epiSwiGLU = 1 // GF_SWIGLU: aux = silu(out0)·out1
	epiResid  = 2 // GF_RESID: sum = aux + out0
)

// fuseParts says which fusions are on.
type fuseParts struct {
	gemvf, norm, resid, swiglu, attn, prep bool
}

func fuseConfig() (bool, fuseParts) {
	on := os.Getenv("INFERNIX_CUDA_FUSE") != "0"
	p := fuseParts{gemvf: true, norm: true, resid: true, swiglu: true, attn: true, prep: true}
	for _, f := range strings.Split(os.Getenv("INFERNIX_CUDA_NOFUSE"), ",") {
		switch strings.TrimSpace(f) {
		case "gemvf":
			p.gemvf = false
		case "norm":
			p.norm = false
		case "resid":
			p.resid = false
		case "swiglu":
			p.swiglu = false
		case "attn":
			p.attn = false
		case "prep":
			p.prep = false
		}
	}
	return on, p
}

type gemvJob struct {
	out driver.DevPtr
	w   *Tensor
	O   int
}

// normOp is an RMSNorm: out = x / rms(x) · w over rows of n.
type normOp struct {
	out, x, w driver.DevPtr
	rows, n   int
	eps       float32
}

// ropeOp is a RoPE of T rows of x [_, cols] with heads heads.
type ropeOp struct {
	x              driver.DevPtr
	T, cols, heads int
	pos            driver.DevPtr // staged positions
	tab            *ropeTables
	half           int
}

type pending struct {
	kind pendKind
	// pendGemv, pendSkinny: n products of x [T, I] (bf16 weights). With norm, x is
	// the output of nrm (the kernel reads nrm.x and writes x); epi adds
	// an epilogue (aux, sum as in GemvP).
	n        int
	jobs     [3]gemvJob
	x        driver.DevPtr
	T, I     int
	norm     bool
	nrm      normOp // also pendNorm's operator
	epi      int
	aux, sum driver.DevPtr
	// pendAdd: out = a + c over n floats.
	out, a, c driver.DevPtr
	addN      int
	// pendAttn: the q and k norms (nNorm of them) and RoPEs (nRope), held
	// in the order they came.
	qn, kn       normOp
	rq, rk       ropeOp
	nNorm, nRope int
	// pendMLP: the down product, and the residual add's other operand and
	// result (sum), where one was taken.
	down  gemvJob
	resid driver.DevPtr
	// pendMoE: the launch.
	moe moeDownOp
	// pendMerge, pendOProj: the merge (with pendOProj's residual in resid
	// and sum, as pendMLP's).
	mrg      mergeOp
	flushing bool
}

// holdGemv takes a decode GEMV into the pending group; false if it cannot
// be fused (the caller launches it).
func (b *Backend) holdGemv(out, x driver.DevPtr, w *Tensor, T, I, O int) bool {
	if !b.fuse || w.dt != backend.BF16 || T > 8 || I%8 != 0 {
		return false
	}
	p := &b.pend
	if b.mlpTakes(p, out, x, w, T, I, O) {
		p.kind, p.down = pendMLP, gemvJob{out, w, O}
		return true
	}
	if b.oprojTakes(p, out, x, w, T, I, O) {
		p.kind, p.n, p.jobs[0] = pendOProj, 1, gemvJob{out, w, O}
		return true
	}
	if p.kind == pendNorm {
		// The held RMSNorm produced x: it becomes this product's prologue
		// (the kernel reads nrm.x and writes x as well). Its input must not
		// be what the product writes.
		if p.nrm.out == x && p.nrm.rows == T && p.nrm.n == I && out != p.nrm.x && out != x {
			nrm := p.nrm
			*p = pending{kind: pendGemv, n: 1, x: x, T: T, I: I, norm: true, nrm: nrm}
			p.jobs[0] = gemvJob{out, w, O}
			return true
		}
		b.flush()
	}
	if p.kind == pendGemv && p.epi == epiNone && p.x == x && p.T == T && p.I == I && p.n < 3 && out != x &&
		(!p.norm || out != p.nrm.x) {
		for _, j := range p.jobs[:p.n] {
			if j.out == out || j.out == x {
				b.flush()
				return b.holdGemv(out, x, w, T, I, O)
			}
		}
		p.jobs[p.n] = gemvJob{out, w, O}
		p.n++
		return true
	}
	b.flush()
	*p = pending{kind: pendGemv, n: 1, x: x, T: T, I: I}
	p.jobs[0] = gemvJob{out, w, O}
	return true
}

// residOperand is the operand of a + c other than prod, where exactly one
// of them is prod; 0 otherwise.
func residOperand(a, c, prod driver.DevPtr) driver.DevPtr {
	switch {
	case c == prod && a != prod:
		return a
	case a == prod && c != prod:
		return c
	}
	return 0
}

// holdAdd takes a residual add: as the epilogue of a held single product
// that computed one operand, or held itself (it may fuse with an RMSNorm
// of its result); false if fusion is off.
func (b *Backend) holdAdd(out, a, c driver.DevPtr, n int) bool {
	if !b.fuse || n == 0 {
		return false
	}
	p := &b.pend
	if b.takeMoEResid(out, a, c, n) || b.oprojTakeResid(out, a, c, n) {
		return true
	}
	if p.kind == pendMLP && p.sum == 0 && n == p.I {
		// out = resid + down's product: mlp_fused's last block writes the
		// sum once every block has read x, so out and resid may be x.
		resid := residOperand(a, c, p.down.out)
		ok := resid != 0
		for _, d := range []driver.DevPtr{p.aux, p.jobs[0].out, p.jobs[1].out, p.nrm.out} {
			ok = ok && resid != d && out != d
		}
		if ok && out != p.down.out {
			p.resid, p.sum = resid, out
			return true
		}
	}
	if p.kind == pendGemv && b.fz.gemvf && b.fz.resid && p.n == 1 && p.epi == epiNone && p.T*p.jobs[0].O == n {
		// out = resid + W·x: the kernel writes the product and the sum; the
		// sum must not land on what other warps still read.
		j := p.jobs[0]
		resid := residOperand(a, c, j.out)
		// With a norm prologue, x (the norm's output) is written by some
		// warps while others would read it as the residual: not fused.
		if resid != 0 && resid != p.x && out != p.x && (!p.norm || out != p.nrm.x) {
			p.epi, p.aux, p.sum = epiResid, resid, out
			return true
		}
	}
	b.flush()
	b.pend = pending{kind: pendAdd, out: out, a: a, c: c, addN: n}
	return true
}

// holdSwiGLU makes out = silu(g)·u the epilogue of the held gate and up
// products; false if they are not held.
func (b *Backend) holdSwiGLU(out, g, u driver.DevPtr, n int) bool {
	p := &b.pend
	if !b.fuse || !b.fz.gemvf || !b.fz.swiglu || p.kind != pendGemv || p.n != 2 || p.epi != epiNone {
		return false
	}
	j0, j1 := p.jobs[0], p.jobs[1]
	if j0.out != g || j1.out != u || j0.O != j1.O || p.T*j0.O != n || out == p.x || (p.norm && out == p.nrm.x) {
		return false
	}
	p.epi, p.aux = epiSwiGLU, out
	return true
}

// holdNorm holds an RMSNorm (not in place) of at most 8 rows for the
// decode product that may follow; false if it cannot be fused.
func (b *Backend) holdNorm(op normOp) bool {
	if !b.fuse || !b.fz.gemvf || !b.fz.norm || op.rows > 8 || op.n%8 != 0 || op.out == op.x {
		return false
	}
	b.flush()
	b.pend = pending{kind: pendNorm, nrm: op}
	return true
}

// holdHeadNorm holds an in-place per-head RMSNorm (QK-norm) for Attention.
func (b *Backend) holdHeadNorm(op normOp) bool {
	if !b.fuse || !b.fz.attn || op.out != op.x || op.n > 256 {
		return false
	}
	p := &b.pend
	if p.kind == pendAttn && p.nNorm == 1 && p.nRope == 0 && op.n == p.qn.n && op.x != p.qn.x {
		p.kn = op
		p.nNorm = 2
		return true
	}
	b.flush()
	*p = pending{kind: pendAttn, qn: op, nNorm: 1}
	return true
}

// holdRoPE holds a RoPE of q or k for Attention.
func (b *Backend) holdRoPE(op ropeOp) bool {
	if !b.fuse || !b.fz.attn {
		return false
	}
	p := &b.pend
	if p.kind == pendAttn {
		// The RoPE of what the held norm normalised (same rows of the same
		// head size).
		normed := func(n normOp) bool {
			return n.x == op.x && n.n*op.heads == op.cols && n.rows == op.T*op.heads
		}
		switch {
		case p.nRope == 0 && p.nNorm == 2 && normed(p.qn):
			p.rq, p.nRope = op, 1
			return true
		case p.nRope == 1 && (p.nNorm == 0 || normed(p.kn)) && op.x != p.rq.x && op.T == p.rq.T && op.pos == p.rq.pos &&
			op.tab == p.rq.tab && op.half == p.rq.half:
			p.rk, p.nRope = op, 2
			return true
		}
	}
	b.flush()
	*p = pending{kind: pendAttn, rq: op, nRope: 1}
	return true
}

// takeAttnPrep reports whether the held operators are exactly the q/k
// norms and RoPEs of this attention's q and k (then they are consumed: the
// caller launches the prep kernel with the returned operators).
func (b *Backend) takeAttnPrep(q, k, v driver.DevPtr, T, heads, kvh, hd int, pos driver.DevPtr) (qn, kn normOp, rope *ropeOp, ok bool) {
	p := &b.pend
	if p.kind != pendAttn || p.nRope != 2 || (p.nNorm != 0 && p.nNorm != 2) {
		return
	}
	rq, rk := p.rq, p.rk
	if rq.x != q || rk.x != k || v == q || v == k || rq.T != T || rq.heads != heads || rk.heads != kvh ||
		rq.cols != heads*hd || rk.cols != kvh*hd || rq.pos != pos || 2*rq.half > hd {
		return
	}
	if p.nNorm == 2 && (p.qn.n != hd || p.kn.n != hd || p.qn.rows != T*heads || p.kn.rows != T*kvh || p.qn.x != q || p.kn.x != k) {
		return
	}
	qn, kn = p.qn, p.kn
	if p.nNorm == 0 {
		qn, kn = normOp{}, normOp{}
	}
	p.kind = pendNone
	return qn, kn, &rq, true
}

// fusedAddNorm launches add+RMSNorm if the held Add produced x; false
// otherwise (the caller goes on with the RMSNorm).
func (b *Backend) fusedAddNorm(out, x, w driver.DevPtr, rows, n int, eps float32) bool {
	p := &b.pend
	// Aliasing among out, a, c and sum is fine: every element is read and
	// written by the same thread.
	if p.kind != pendAdd || p.out != x || p.addN != rows*n {
		return false
	}
	a, c := p.a, p.c
	p.kind = pendNone
	if n%4 == 0 {
		if xb, ok := b.shadowBF16(rows, rows*n); ok {
			b.launch(b.k.addRMSBF, uint32(rows), 1, 1, 256, 1, 0, ptr(x), ptr(a), ptr(c), ptr(out), ptr(xb), ptr(w), i32(n), f32(eps))
			b.xbf.produced(out, rows*n, b.writes)
			return true
		}
	}
	b.launch(b.k.addRMS, uint32(rows), 1, 1, 256, 1, 0, ptr(x), ptr(a), ptr(c), ptr(out), ptr(w), i32(n), f32(eps))
	return true
}

// flush launches whatever is held.
func (b *Backend) flush() {
	p := &b.pend
	if p.kind == pendNone || p.flushing {
		return
	}
	p.flushing = true
	defer func() { p.flushing = false }()
	q := *p
	p.kind = pendNone
	switch q.kind {
	case pendAdd:
		b.addNow(q.out, q.a, q.c, q.addN)
	case pendNorm:
		b.rmsnormNow(q.nrm)
	case pendAttn:
		if q.nNorm >= 1 {
			b.rmsnormNow(q.qn)
		}
		if q.nNorm == 2 {
			b.rmsnormNow(q.kn)
		}
		if q.nRope >= 1 {
			b.ropeNow(q.rq)
		}
		if q.nRope == 2 {
			b.ropeNow(q.rk)
		}
	case pendSkinny:
		b.launchSkinny(&q)
	case pendMoE:
		b.launchMoEDown(&q.moe)
	case pendMLP:
		b.launchMLP(&q)
	case pendMerge:
		b.launchMerge(&q.mrg)
	case pendOProj:
		b.launchOProj(&q)
	case pendGemv:
		if b.fz.gemvf {
			b.launchGemvf(&q)
			return
		}
		ri := gemvIndex(q.T)
		if q.n == 1 {
			j := q.jobs[0]
			b.launch(b.k.gemv[j.w.dt][ri], blocks(j.O, gemvBlockRows), 1, 1, 256, 1, 0, ptr(j.out), ptr(q.x), ptr(j.w.ptr), i32(q.T), i32(q.I), i32(j.O))
			return
		}
		var nb [3]int
		var args [9]uint64
		total := 0
		for i := 0; i < 3; i++ {
			args[3*i+2] = i32(1)
			if i < q.n {
				j := q.jobs[i]
				nb[i] = int(blocks(j.O, gemvBlockRows))
				total += nb[i]
				args[3*i], args[3*i+1], args[3*i+2] = ptr(j.out), ptr(j.w.ptr), i32(j.O)
			}
		}
		b.launch(b.k.gemv3[ri], uint32(total), 1, 1, 256, 1, 0, args[0], args[1], args[2], args[3], args[4], args[5],
			args[6], args[7], args[8], ptr(q.x), i32(q.T), i32(q.I), i32(nb[0]), i32(nb[1]))
	}
}

// launchGemvf launches a held product group as one gemvf kernel. Its one
// parameter is struct GemvP (kernels/gemv.cu): eleven pointers, then eight
// 32-bit fields packed two to a slot.
func (b *Backend) launchGemvf(q *pending) {
	var a [15]uint64
	var nb [3]int
	per := b.gemvf.rowsPerBlock(q.epi)
	total := 0
	for i := 0; i < q.n; i++ {
		j := q.jobs[i]
		nb[i] = int(blocks(j.O, per))
		total += nb[i]
		a[i], a[3+i] = ptr(j.out), ptr(j.w.ptr)
	}
	O := [3]int{1, 1, 1}
	for i := 0; i < q.n; i++ {
		O[i] = q.jobs[i].O
	}
	xin := q.x
	norm := 0
	var eps float32
	if q.norm {
		norm = 1
		xin = q.nrm.x
		a[7], a[8] = ptr(q.nrm.w), ptr(q.nrm.out)
		eps = q.nrm.eps
	}
	a[6] = ptr(xin)
	a[9], a[10] = ptr(q.aux), ptr(q.sum)
	a[11] = argPair(i32(O[0]), i32(O[1]))
	a[12] = argPair(i32(O[2]), i32(nb[0]))
	a[13] = argPair(i32(nb[1]), i32(q.T))
	a[14] = argPair(i32(q.I), f32(eps))
	if q.epi == epiSwiGLU {
		total = nb[0] // both rows of an output in one warp
	}
	ri := gemvIndex(q.T)
	// The split-K kernels keep two outputs per warp (not with GF_RW=1) and
	// all of I (not with GF_KS).
	if kw := b.k.gemvfw[q.epi][norm][ri]; kw != nil && b.gemvWide != 0 && (b.gemvf.rw == 2 || q.epi == epiSwiGLU) && !b.gemvf.splitsK(q.epi) {
		if S := b.wideSplits(total, q.I, kw.regs); S > 1 && total <= gemvWideCounters {
			R := [4]int{1, 2, 4, 8}[ri]
			// struct GemvP: then part (GF_CNT_MAX counters, then
			// GF_SLOT(R) = 17·R floats per block) and S.
			p, ok := b.gemvWideScratch(uint64(4 * (gemvWideCounters + total*S*17*R)))
			if !ok {
				return
			}
			var aw [17]uint64
			copy(aw[:], a[:])
			aw[15], aw[16] = ptr(p), argPair(i32(S), 0)
			b.launch(kw, uint32(total*S), 1, 1, 256, 1, 0, aw[:]...)
			return
		}
	}
	// The whole of GemvP: argument slots past those given keep an earlier
	// launch's values. part is the GF_TIMING timeline (or 0); nvb the
	// blocks of a product looped over a smaller grid (gemvWaveGrid).
	k := b.k.gemvf[q.epi][norm][ri]
	grid, nvb := total, 0
	if b.gemvWave > 0 {
		resident := blocksPerSM(256, k.regs, b.gemvf.smem, b.smemPerSM) * b.smCount
		if b.gemvWaveCap > 0 {
			resident = b.gemvWaveCap
		}
		grid, nvb = gemvWaveGrid(total, resident, b.gemvWave)
	}
	var at [17]uint64
	copy(at[:], a[:])
	if b.gemvf.timing {
		at[15] = ptr(b.gemvfTimeline)
	}
	at[16] = argPair(0, i32(nvb))
	b.launch(k, uint32(grid), 1, 1, 256, 1, uint32(b.gemvf.smem), at[:]...)
}

// gemvWaveGrid sizes a plain fused product of total blocks to one wave
// when it has more than fit at once (resident, a GPU's worth): every
// block of the grid loops over the same number of the product's blocks
// (the last few one fewer), so that its warps end together rather than a
// partial last wave streaming on its own (INFERNIX_CUDA_GEMV_WAVE,
// kernels/gemv.cu gemvf), unless that is more than most blocks each.
// Returns the grid and GemvP.nvb (0: no loop).
func gemvWaveGrid(total, resident, most int) (grid, nvb int) {
	if resident <= 0 || total <= resident {
		return total, 0
	}
	per := (total + resident - 1) / resident
	if per > most {
		return total, 0
	}
	return (total + per - 1) / per, total
}

// gemvWaveConfig reads INFERNIX_CUDA_GEMV_WAVE: the most blocks of a
// product one block of the looped grid computes (gemvWaveGrid); 0 or
// below, no loop. Unset: 64 (every product of Qwen3-8B on an H200 at 6
// blocks a SM: gate|up loops 2, the LM head 24).
func gemvWaveConfig(v string) int {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 64
	}
	return max(n, 0)
}

// gemvWideConfig reads INFERNIX_CUDA_GEMV_WIDE: unset or 0, off; 1, split
// the narrow products (wideSplits); 2…8, split every fused product into
// that many slices (tests and ablations).
func gemvWideConfig(v string) int {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	switch {
	case err != nil || n <= 0:
		return 0
	case n == 1:
		return -1
	}
	return min(n, 8)
}

// wideSplits is how many slices of I a fused product of nb row groups is
// split into (1: not split). Forced (gemvWide ≥ 2), that many. Otherwise
// (gemvWide = -1) the largest of 2 and 4 that still lets every block of
// the launch be resident at once (regs: the wide kernel's registers per
// thread; 256-thread blocks, 64K registers and 64 warps per SM), with
// slices of at least 1,024 elements: o_proj and down of Qwen3-8B (256
// groups, 4 blocks per SM) go to 2 slices, 512 blocks, one wave; the
// products that already fill the GPU (gate|up, the LM head) stay whole.
func (b *Backend) wideSplits(nb, I, regs int) int {
	if b.gemvWide >= 2 {
		return b.gemvWide
	}
	if b.gemvWide != -1 || b.smCount == 0 {
		return 1
	}
	perWarp := (regs*32 + 255) &^ 255
	perSM := 8
	if perWarp > 0 {
		perSM = min(8, 65536/(8*perWarp))
	}
	resident := perSM * b.smCount
	S := 1
	for _, c := range []int{2, 4} {
		if nb*c <= resident && I >= c*1024 {
			S = c
		}
	}
	return S
}

// gemvWideCounters is GF_CNT_MAX in kernels/gemv.cu: the split-K scratch
// starts with that many group counters for every launch, so that launches
// with other group counts never read each other's partial sums as counters.
const gemvWideCounters = 32768

// gemvWideScratch returns the split-K GEMV scratch with at least n bytes:
// the counters at its start are zero when it is allocated and every
// launch leaves them zero.
func (b *Backend) gemvWideScratch(n uint64) (driver.DevPtr, bool) {
	return b.zeroScratch(scrGemvW, n)
}

// gemvIndex picks the GEMV variant (R = 1, 2, 4, 8) for n ≤ 8 rows.
func gemvIndex(n int) int {
	switch {
	case n == 1:
		return 0
	case n == 2:
		return 1
	case n <= 4:
		return 2
	}
	return 3
}
