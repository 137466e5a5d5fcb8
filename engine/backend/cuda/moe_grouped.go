package cuda

import (
	"fmt"
	"unsafe"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// The grouped MoE path (default; INFERNIX_CUDA_MOE_GROUPED=0 turns it off). The indexed
// path runs one GEMV per (token, expert) pair, so a prefill of T tokens
// reads every chosen expert's weights about T·K/E times. Here the routing
// (on the device, as in the indexed path) is copied to the host once per
// MoE layer, each expert's tokens are gathered into contiguous rows, and
// each expert's gate, up and down products run once over its rows through
// matmul (cuBLASLt above gemvMax rows, the GEMV kernels below), so its
// weights are read once per layer. Everything but the final combine
// (moe_combine_rows) is an operator that already runs elsewhere: Gather's
// kernel, matmul, swiglu.

// moePlan lays out the grouped rows. Expert e's tokens, in token order,
// take rows off[e] … off[e]+cnt[e]-1 of its segment, which is padded to
// off[e+1] (moeRows) so that cuBLASLt sees few distinct row counts. words
// is what is staged for the device: src (words[:P], P = off[E]: the token
// each row gathers; padding repeats the segment's first token so that
// padded rows hold finite values nobody reads) then rowOf (words[P:]: the
// row of pair (t, k) at t·K + k).
type moePlan struct {
	off, cnt, next []int
	words          []int32
}

// moeRows is the rows an expert with n tokens gets: n where the GEMV
// kernels take them (n ≤ small), else n rounded up to a multiple of a
// power of two of at least 16 and at most n/8: waste under 12.5% (above
// 128 rows), and 8 to 16 distinct sizes per octave, each a cuBLASLt plan
// (gemmKey) instead of one per token count.
func moeRows(n, small int) int {
	if n <= small {
		return n
	}
	step := 16
	for step*16 < n {
		step *= 2
	}
	return (n + step - 1) / step * step
}

// build lays out the rows for the chosen experts idx [T·K] (K per token).
func (p *moePlan) build(idx []int32, T, K, E, small int) error {
	n := T * K
	if len(idx) != n {
		return fmt.Errorf("cuda: MoE plan of %d choices for %d tokens × top-%d", len(idx), T, K)
	}
	p.cnt = resetInts(p.cnt, E)
	p.off = resetInts(p.off, E+1)
	p.next = resetInts(p.next, E)
	for q, e := range idx {
		if e < 0 || int(e) >= E {
			// moe_route leaves its sentinel where every logit is NaN.
			return fmt.Errorf("cuda: MoE router chose expert %d of %d for token %d (NaN logits?)", e, E, q/K)
		}
		p.cnt[e]++
	}
	for e := 0; e < E; e++ {
		p.off[e+1] = p.off[e] + moeRows(p.cnt[e], small)
		p.next[e] = p.off[e]
	}
	P := p.off[E]
	if cap(p.words) < P+n {
		p.words = make([]int32, P+n)
	}
	p.words = p.words[:P+n]
	src, rowOf := p.words[:P], p.words[P:]
	for q, e := range idx {
		r := p.next[e]
		p.next[e]++
		src[r] = int32(q / K)
		rowOf[q] = int32(r)
	}
	for e := 0; e < E; e++ {
		for r := p.off[e] + p.cnt[e]; r < p.off[e+1]; r++ {
			src[r] = src[p.off[e]]
		}
	}
	return nil
}

func resetInts(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// moeGroupedFor reports whether MoE over T tokens takes the grouped path:
// switched on, more rows than the GEMV kernels take (decode keeps the
// indexed path), and a forward that runs eagerly and never will be
// captured. The path synchronises with the host and its launches depend on
// the routing, so it can be no part of a graph; and a forward that may be
// captured later must compute eagerly as its graph would.
func (b *Backend) moeGroupedFor(T int) bool {
	g := &b.g
	if !b.moeGrouped || T <= b.gemvMax || g.mode != modeEager {
		return false
	}
	return !(g.enabled && g.inStep && g.T <= g.maxT)
}

// moeGroupedRun computes out = Σ_k w[t, k] · expert_{idx[t, k]}(x[t]) from
// the routing moe_route left in topIdx and topW.
func (b *Backend) moeGroupedRun(o, xx *Tensor, m *backend.MoE, tb *moeTables, topIdx, topW driver.DevPtr, T, K int) {
	H, inter, E := xx.cols, tb.inter, len(m.Gate)
	n := T * K
	idx := b.moeChoices(topIdx, n)
	if idx == nil {
		return
	}
	p := &b.moePlan
	if err := p.build(idx, T, K, E, b.gemvMax); err != nil {
		b.fail(err)
		return
	}
	P := p.off[E]
	xg, ok1 := b.scratchPtr(scrMoEX, uint64(4*P*H))
	gate, ok2 := b.scratchPtr(scrGate, uint64(4*P*inter))
	up, ok3 := b.scratchPtr(scrUp, uint64(4*P*inter))
	down, ok4 := b.scratchPtr(scrDown, uint64(4*P*H))
	if !(ok1 && ok2 && ok3 && ok4) {
		return
	}
	// One staging for both lists: a second could reset the arena (when
	// full) and overwrite the first before the gather reads it.
	words, off := b.stage(p.words)
	if off < 0 {
		return
	}
	src, rowOf := words, words+driver.DevPtr(4*P)
	b.launch(b.k.gather, uint32(P), 1, 1, 256, 1, 0, ptr(xg), ptr(xx.ptr), ptr(src), i32(H))
	for e := 0; e < E; e++ {
		r0, rows := p.off[e], p.off[e+1]-p.off[e]
		if rows == 0 {
			continue
		}
		xe := xg + driver.DevPtr(4*r0*H)
		b.matmul(gate+driver.DevPtr(4*r0*inter), xe, tensor(m.Gate[e]), rows, H, inter)
		b.matmul(up+driver.DevPtr(4*r0*inter), xe, tensor(m.Up[e]), rows, H, inter)
	}
	b.swiglu(gate, gate, up, P*inter)
	for e := 0; e < E; e++ {
		r0, rows := p.off[e], p.off[e+1]-p.off[e]
		if rows == 0 {
			continue
		}
		b.matmul(down+driver.DevPtr(4*r0*H), gate+driver.DevPtr(4*r0*inter), tensor(m.Down[e]), rows, inter, H)
	}
	b.launch(b.k.moeCombineRows, uint32(T), 1, 1, 256, 1, 0, ptr(o.ptr), ptr(down), ptr(topW), ptr(rowOf), i32(K), i32(H))
	b.moeGroupedRuns++
}

// moeChoices copies the n experts moe_route chose to the host and waits
// for them: the grouped path's one synchronisation per MoE layer. The
// slice is valid until the next call.
func (b *Backend) moeChoices(topIdx driver.DevPtr, n int) []int32 {
	b.needEager()
	b.pin()
	defer b.unpin()
	if b.err != nil {
		return nil
	}
	h := &b.moeHost
	if 4*n > h.size {
		// Not pinned.ensure: that drops every graph, and no graph reads
		// this buffer. The previous call synchronised, so the old buffer
		// is idle.
		size := max(4*n, h.size+h.size/2, 64<<10)
		if h.p != nil {
			b.drv.MemFreeHost(h.p) //nolint:errcheck // replacing
			h.p, h.size = nil, 0
		}
		hp, err := b.drv.MemAllocHost(uint64(size))
		if err != nil {
			b.fail(fmt.Errorf("cuda: MoE routing buffer of %d bytes: %w", size, err))
			return nil
		}
		h.p, h.size = hp, size
	}
	err := b.drv.DtoHAsync(h.p, topIdx, uint64(4*n), b.stream)
	if err == nil {
		err = b.drv.StreamSynchronize(b.stream)
	}
	if err != nil {
		b.fail(err)
		return nil
	}
	return unsafe.Slice((*int32)(h.p), n)
}
