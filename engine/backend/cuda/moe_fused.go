package cuda

import (
	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// The fused MoE decode (kernels/moe.cu): after the router's product (which
// takes the held RMSNorm as its prologue, as any decode product does),
// moe_gateup routes each token and computes every chosen expert's
// weighted SwiGLU, and moe_down adds the experts' down products (and the
// shared expert's, sigmoid-gated) into the output. moe_down is held like a
// decode product, so that the decoder's residual Add that follows becomes
// its epilogue and the next RMSNorm the next product's prologue. Three
// launches a MoE block instead of the indexed path's seven and a separate
// add; the same routing bit for bit (TestMoEFusedEmulated, TestMoEFused).
//
// With moeGroupT tokens or more (several lanes decoding), those two kernels
// would read an expert's weights once for every token that chose it; the
// grouped kernels read them once a step: moe_plan routes every token and
// sorts the choices by expert, moe_gateup_g and moe_down_g take (expert,
// rows) items over all of that expert's tokens, and moe_combine_g, held in
// moe_down's place, adds each token's experts in rank order and takes the
// residual add.

// Slots of struct MoeP (kernels/moe.cu): 19 pointers, then 12 ints packed
// two to a slot.
const (
	moeArgAux   = 15
	moeArgSum   = 16
	moeArgResid = 24 // resid (low half) and pad
	moeArgSlots = 25
)

// A launch takes at most maxArgs slots.
var _ [maxArgs - moeArgSlots]struct{}

// moePlanMaxPairs is MOE_PLAN_MAXQ: the most T·K the grouped kernels take.
const moePlanMaxPairs = 256

// Rows of output a block computes: MOE_WARPS in moe_gateup, MOE_WARPS /
// MOE_KS in moe_down (kernels/moe.cu).
const (
	moeGateUpRows = 8
	moeDownRows   = 4
)

// moeDownOp is a held moe_down (or moe_combine_g) launch.
type moeDownOp struct {
	k    *kernel
	args [moeArgSlots]uint64
	grid uint32
	out  driver.DevPtr // the MoE's output [T, H]
	n    int           // T·H
}

// moeFusedFor reports whether MoE m (bf16 experts, tables tb) takes the
// fused decode path (moeFusedTakes), the shared expert's weights, if any,
// 16-byte aligned on the device.
func (b *Backend) moeFusedFor(m *backend.MoE, tb *moeTables, E, K int) bool {
	sharedAligned := true
	if m.SharedGate != nil {
		sg, su, sd := tensor(m.SharedGate), tensor(m.SharedUp), tensor(m.SharedDown)
		sharedAligned = (sg.ptr|su.ptr|sd.ptr)%16 == 0
	}
	return b.moeFusedTakes(m, tb.dt, tb.aligned && sharedAligned, E, K)
}

// moeFusedTakes is moeFusedFor's condition on what a MoE's shapes and
// types decide (the CUDA tests' reference asks it with CPU weights):
// switched on, kernels/moe.cu loaded, experts of type dt bf16, aligned
// (every expert's rows and the shared expert's weights start 16-byte
// aligned), E ≤ 1024 and K ≤ 64 (MOE_EMAX, MOE_KMAX), and a shared expert,
// if any, bf16 with rows a multiple of 8 elements and 8 rows.
func (b *Backend) moeFusedTakes(m *backend.MoE, dt backend.DType, aligned bool, E, K int) bool {
	if !b.moeFused || b.k.moeGateUp == nil || b.k.moeDown == nil || dt != backend.BF16 || !aligned || E > 1024 || K > 64 {
		return false
	}
	if m.SharedGate == nil {
		return true
	}
	for _, w := range []backend.Tensor{m.SharedGate, m.SharedUp, m.SharedDown} {
		if w.DType() != backend.BF16 || w.Shape()[1]%8 != 0 {
			return false
		}
	}
	return m.SharedGate.Shape()[0]%8 == 0
}

// moeFusedRun computes out = MoE(x) through the router's product,
// moe_gateup and a held moe_down, or from moeGroupT tokens through the
// router's product, moe_plan, moe_gateup_g, moe_down_g and a held
// moe_combine_g.
func (b *Backend) moeFusedRun(o, xx *Tensor, m *backend.MoE, tb *moeTables, router *Tensor, T, E, K int) {
	H, inter := xx.cols, tb.inter
	var sg, su, sd *Tensor
	var sgw driver.DevPtr
	S, sinter := 0, 0
	if m.SharedGate != nil {
		var g *Tensor
		sg, su, sd, g = sharedExpertWeights(m, H)
		S, sinter = 1, sg.rows
		if g != nil {
			sgw = b.f32Weight(g)
		}
	}
	ldA := max(inter, sinter)
	logits, ok1 := b.scratchPtr(scrRouter, uint64(4*T*E))
	topIdx, ok2 := b.scratchPtr(scrTopIdx, uint64(4*T*K))
	topW, ok3 := b.scratchPtr(scrTopW, uint64(4*T*K))
	act, ok4 := b.scratchPtr(scrGate, uint64(4*T*(K+S)*ldA))
	dsel, ok5 := b.scratchPtr(scrDown, uint64(8*T*K))
	z, ok6 := b.scratchPtr(scrSharedZ, uint64(4*T))
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || b.err != nil {
		return
	}
	grouped := b.moeGroupT > 0 && T >= b.moeGroupT && T*K <= moePlanMaxPairs && b.k.moePlan != nil
	var plan, y driver.DevPtr
	MS := min(T*K, E) // the most experts a grouped step chooses
	if grouped {
		var ok7, ok8 bool
		// A, the chosen experts, where their pairs start (A + 1), the pairs.
		plan, ok7 = b.scratchPtr(scrUp, uint64(4*(2+2*MS+T*K)))
		y, ok8 = b.scratchPtr(scrShared, uint64(4*T*(K+S)*H))
		if !(ok7 && ok8) || b.err != nil {
			return
		}
	}
	b.matmulOpt(logits, xx.ptr, router, T, H, E, false)
	nbR, nbS := (inter+moeGateUpRows-1)/moeGateUpRows, (sinter+moeGateUpRows-1)/moeGateUpRows
	norm := 0
	if m.NormTopK {
		norm = 1
	}
	var a [moeArgSlots]uint64
	a[0], a[1], a[2], a[3], a[4] = ptr(logits), ptr(xx.ptr), ptr(tb.gate), ptr(tb.up), ptr(tb.down)
	if S == 1 {
		a[5], a[6], a[7], a[8] = ptr(sg.ptr), ptr(su.ptr), ptr(sd.ptr), ptr(sgw)
	}
	a[9], a[10], a[11], a[12], a[13], a[14] = ptr(act), ptr(topIdx), ptr(topW), ptr(dsel), ptr(z), ptr(o.ptr)
	a[17], a[18] = ptr(plan), ptr(y)
	a[19], a[20], a[21] = argPair(i32(T), i32(E)), argPair(i32(K), i32(H)), argPair(i32(inter), i32(sinter))
	a[22], a[23], a[24] = argPair(i32(ldA), i32(norm)), argPair(i32(nbR), i32(nbS)), 0
	var op moeDownOp
	if grouped {
		// Looped grids of at most what fits the GPU at once; their blocks
		// take the plan's items in turn.
		nbD := (H + moeGateUpRows - 1) / moeGateUpRows
		fit := func(k *kernel, items int) uint32 {
			return uint32(max(1, min(items, b.smCount*blocksPerSM(256, k.regs, 0, b.smemPerSM))))
		}
		b.launch(b.k.moePlan, 1, 1, 1, 256, 1, 0, a[:]...)
		b.launch(b.k.moeGateUpG, fit(b.k.moeGateUpG, MS*nbR+S*nbS), 1, 1, 256, 1, 0, a[:]...)
		b.launch(b.k.moeDownG, fit(b.k.moeDownG, (MS+S)*nbD), 1, 1, 256, 1, 0, a[:]...)
		op = moeDownOp{k: b.k.moeCombineG, args: a, grid: uint32((T*H + 255) / 256), out: o.ptr, n: T * H}
		b.moeGroupRuns++
	} else {
		b.launch(b.k.moeGateUp, uint32(T*(K*nbR+S*nbS)), 1, 1, 256, 1, 0, a[:]...)
		op = moeDownOp{k: b.k.moeDown, args: a, grid: uint32(T * ((H + moeDownRows - 1) / moeDownRows)), out: o.ptr, n: T * H}
	}
	b.moeFusedRuns++
	if !b.fuse {
		b.launchMoEDown(&op)
		return
	}
	b.flush()
	b.pend = pending{kind: pendMoE, moe: op}
}

// takeMoEResid makes sum = a + c the held moe_down's (or moe_combine_g's)
// epilogue when one operand is its output; false otherwise.
func (b *Backend) takeMoEResid(sum, a, c driver.DevPtr, n int) bool {
	p := &b.pend
	if p.kind != pendMoE || !b.fz.gemvf || !b.fz.resid || p.moe.args[moeArgResid] != 0 || n != p.moe.n {
		return false
	}
	resid := residOperand(a, c, p.moe.out)
	if resid == 0 {
		return false
	}
	// moe_down and moe_combine_g read the residual and write the sum at the
	// same index in the same thread, so they may alias; they read nothing
	// else the sum could overwrite (weights and the MoE's own scratch).
	p.moe.args[moeArgAux], p.moe.args[moeArgSum], p.moe.args[moeArgResid] = ptr(resid), ptr(sum), 1
	return true
}

func (b *Backend) launchMoEDown(op *moeDownOp) {
	b.launch(op.k, op.grid, 1, 1, 256, 1, 0, op.args[:]...)
}
