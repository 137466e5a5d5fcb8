package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// moeTables are a MoE block's expert weight addresses on the device, so
// that one launch serves every (token, expert) pair.
type moeTables struct {
	gate, up, down driver.DevPtr // u64[E]
	dt             backend.DType
	inter          int
	aligned        bool              // every expert's rows start 16-byte aligned (the fused path's loads)
	key            [4]backend.Tensor // what they were built from
}

// MoE routes every token to its top-k experts on the device (softmax over
// the router logits, ties to the lower index) and sums the experts' SwiGLU
// MLPs weighted by their probabilities (renormalised if NormTopK), plus the
// optional shared expert. Everything stays on the device, so decode steps
// with MoE layers are captured as graphs too. Each (token, expert) pair
// reads its expert's weights once: right for decode, slow for long prefills,
// which go through per-expert GEMMs instead (moeGroupedRun; off with
// INFERNIX_CUDA_MOE_GROUPED=0).
func (b *Backend) MoE(out, x backend.Tensor, m *backend.MoE) {
	o, xx := f32t(out, "MoE"), f32t(x, "MoE")
	T, H := xx.rows, xx.cols
	router := tensor(m.Router)
	E, K := router.rows, m.TopK
	if router.cols != H || o.cols != H || o.rows != T || len(m.Gate) != E || len(m.Up) != E || len(m.Down) != E {
		panic(fmt.Sprintf("cuda: MoE x %dx%d out %dx%d router %dx%d experts %d/%d/%d", T, H, o.rows, o.cols, router.rows, router.cols, len(m.Gate), len(m.Up), len(m.Down)))
	}
	if K < 1 || K > E || E > 1024 {
		panic(fmt.Sprintf("cuda: MoE top-%d of %d experts (at most 1024 experts)", K, E))
	}
	if b.err != nil || T == 0 {
		return
	}
	tb := b.moeTablesFor(m, H)
	if tb == nil {
		return
	}
	inter := tb.inter
	grouped := b.moeGroupedFor(T)
	if !grouped && b.moeFusedFor(m, tb, E, K) {
		b.moeFusedRun(o, xx, m, tb, router, T, E, K)
		return
	}
	logits, ok1 := b.scratchPtr(scrRouter, uint64(4*T*E))
	topIdx, ok2 := b.scratchPtr(scrTopIdx, uint64(4*T*K))
	topW, ok3 := b.scratchPtr(scrTopW, uint64(4*T*K))
	if !(ok1 && ok2 && ok3) {
		return
	}
	var gate, up, down driver.DevPtr
	if !grouped {
		var ok4, ok5, ok6 bool
		gate, ok4 = b.scratchPtr(scrGate, uint64(4*T*K*inter))
		up, ok5 = b.scratchPtr(scrUp, uint64(4*T*K*inter))
		down, ok6 = b.scratchPtr(scrDown, uint64(4*T*K*H))
		if !(ok4 && ok5 && ok6) {
			return
		}
	}
	b.matmulOpt(logits, xx.ptr, router, T, H, E, false)
	norm := 0
	if m.NormTopK {
		norm = 1
	}
	b.launch(b.k.moeRoute, blocks(T, 4), 1, 1, 32, 4, 0, ptr(logits), ptr(topIdx), ptr(topW), i32(T), i32(E), i32(K), i32(norm))
	if grouped {
		b.moeGroupedRun(o, xx, m, tb, topIdx, topW, T, K)
	} else {
		// Pairs in chunks that keep gridDim.y under its limit.
		step := max(1, 65535/K)
		for t0 := 0; t0 < T; t0 += step {
			nt := min(step, T-t0)
			pairs := nt * K
			idx := topIdx + driver.DevPtr(4*t0*K)
			g := gate + driver.DevPtr(4*t0*K*inter)
			u := up + driver.DevPtr(4*t0*K*inter)
			d := down + driver.DevPtr(4*t0*K*H)
			xs := xx.ptr + driver.DevPtr(4*t0*H)
			b.gemvIndexed(g, xs, tb.gate, idx, K, H, inter, pairs, tb.dt)
			b.gemvIndexed(u, xs, tb.up, idx, K, H, inter, pairs, tb.dt)
			b.swiglu(g, g, u, pairs*inter)
			b.gemvIndexed(d, g, tb.down, idx, 1, inter, H, pairs, tb.dt)
		}
		b.launch(b.k.moeCombine, uint32(T), 1, 1, 256, 1, 0, ptr(o.ptr), ptr(down), ptr(topW), i32(K), i32(H))
	}
	if m.SharedGate != nil {
		b.sharedExpert(o, xx, m)
	}
}

func (b *Backend) gemvIndexed(out, x, ptrs, idx driver.DevPtr, xdiv, I, O, pairs int, dt backend.DType) {
	if I%8 == 0 {
		b.launch(b.k.gemvIdx[dt], blocks(O, 4), uint32(pairs), 1, 256, 1, 0, ptr(out), ptr(x), ptr(ptrs), ptr(idx), i32(xdiv), i32(I), i32(O))
		return
	}
	b.launch(b.k.gemvIdxScalar[dt], blocks(O, 8), uint32(pairs), 1, 256, 1, 0, ptr(out), ptr(x), ptr(ptrs), ptr(idx), i32(xdiv), i32(I), i32(O))
}

// sharedExpertWeights returns m's shared expert (gate, up, down) and its
// gate weight (nil if none), their shapes checked against hidden size H.
func sharedExpertWeights(m *backend.MoE, H int) (sg, su, sd, gw *Tensor) {
	sg, su, sd = tensor(m.SharedGate), tensor(m.SharedUp), tensor(m.SharedDown)
	inter := sg.rows
	if sg.cols != H || su.rows != inter || su.cols != H || sd.rows != H || sd.cols != inter {
		panic(fmt.Sprintf("cuda: MoE shared expert %dx%d %dx%d %dx%d for hidden %d", sg.rows, sg.cols, su.rows, su.cols, sd.rows, sd.cols, H))
	}
	if m.SharedExpertGate != nil {
		gw = tensor(m.SharedExpertGate)
		if gw.rows*gw.cols != H {
			panic(fmt.Sprintf("cuda: MoE shared expert gate %dx%d for hidden %d", gw.rows, gw.cols, H))
		}
	}
	return sg, su, sd, gw
}

func (b *Backend) sharedExpert(o, xx *Tensor, m *backend.MoE) {
	T, H := xx.rows, xx.cols
	sg, su, sd, g := sharedExpertWeights(m, H)
	inter := sg.rows
	gate, ok1 := b.scratchPtr(scrGate, uint64(4*T*inter))
	up, ok2 := b.scratchPtr(scrUp, uint64(4*T*inter))
	y, ok3 := b.scratchPtr(scrShared, uint64(4*T*H))
	z, ok4 := b.scratchPtr(scrSharedZ, uint64(4*T))
	if !(ok1 && ok2 && ok3 && ok4) {
		return
	}
	b.matmul(gate, xx.ptr, sg, T, H, inter)
	b.matmul(up, xx.ptr, su, T, H, inter)
	b.swiglu(gate, gate, up, T*inter)
	b.matmul(y, gate, sd, T, inter, H)
	if g != nil {
		gw := &Tensor{ptr: b.f32Weight(g), rows: 1, cols: H, dt: backend.F32}
		b.matmul(z, xx.ptr, gw, T, H, 1)
		b.launch(b.k.sigAdd, uint32(T), 1, 1, 256, 1, 0, ptr(o.ptr), ptr(y), ptr(z), i32(H))
		return
	}
	b.add(o.ptr, o.ptr, y, T*H)
}

// moeTablesFor uploads (once per MoE block) the experts' weight addresses.
func (b *Backend) moeTablesFor(m *backend.MoE, H int) *moeTables {
	key := [4]backend.Tensor{m.Router, m.Gate[0], m.Up[0], m.Down[0]}
	if tb := b.moes[m]; tb != nil && tb.key == key {
		return tb
	}
	E := len(m.Gate)
	g0 := tensor(m.Gate[0])
	tb := &moeTables{dt: g0.dt, inter: g0.rows, key: key, aligned: H%8 == 0 && g0.rows%8 == 0}
	ptrs := make([][]uint64, 3)
	for e := 0; e < E; e++ {
		g, u, d := tensor(m.Gate[e]), tensor(m.Up[e]), tensor(m.Down[e])
		if g.dt != tb.dt || u.dt != tb.dt || d.dt != tb.dt {
			panic(fmt.Sprintf("cuda: MoE expert %d mixes dtypes (%v, %v, %v; expert 0 is %v)", e, g.dt, u.dt, d.dt, tb.dt))
		}
		if g.rows != tb.inter || g.cols != H || u.rows != tb.inter || u.cols != H || d.rows != H || d.cols != tb.inter {
			panic(fmt.Sprintf("cuda: MoE expert %d shapes gate %dx%d up %dx%d down %dx%d (intermediate %d, hidden %d)", e, g.rows, g.cols, u.rows, u.cols, d.rows, d.cols, tb.inter, H))
		}
		tb.aligned = tb.aligned && (g.ptr|u.ptr|d.ptr)%16 == 0
		ptrs[0] = append(ptrs[0], uint64(g.ptr))
		ptrs[1] = append(ptrs[1], uint64(u.ptr))
		ptrs[2] = append(ptrs[2], uint64(d.ptr))
	}
	b.needEager()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i, dst := range []*driver.DevPtr{&tb.gate, &tb.up, &tb.down} {
		p, err := b.malloc(uint64(8*E), "MoE expert table")
		if err == nil {
			err = b.upload(p, unsafe.Slice((*byte)(unsafe.Pointer(&ptrs[i][0])), 8*E))
		}
		if err != nil {
			b.fail(err)
			return nil
		}
		*dst = p
	}
	if old := b.moes[m]; old != nil {
		b.sync()
		b.free(old.gate)
		b.free(old.up)
		b.free(old.down)
	}
	b.moes[m] = tb
	return tb
}
