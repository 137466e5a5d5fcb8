package cuda

import "github.com/infernix/infernix/engine/backend/cuda/driver"

// skinnyProduct computes out[T,O] = x·wᵀ for 9–16 rows through gemm_skinny
// (kernels/gemv.cu, INFERNIX_CUDA_SKINNY=1). With fusion on it is held, so
// that up to three products of the same x (q, k and v; gate and up) share
// one launch and one bf16 conversion of x.
func (b *Backend) skinnyProduct(out, x driver.DevPtr, w *Tensor, T, I, O int) {
	job := gemvJob{out, w, O}
	if !b.fuse {
		q := pending{kind: pendSkinny, n: 1, x: x, T: T, I: I}
		q.jobs[0] = job
		b.flush()
		b.launchSkinny(&q)
		return
	}
	p := &b.pend
	if p.kind == pendSkinny && p.x == x && p.T == T && p.I == I && p.n < 3 && out != x {
		fits := true
		for _, j := range p.jobs[:p.n] {
			fits = fits && j.out != out
		}
		if fits {
			p.jobs[p.n] = job
			p.n++
			return
		}
	}
	b.flush()
	*p = pending{kind: pendSkinny, n: 1, x: x, T: T, I: I}
	p.jobs[0] = job
}

// launchSkinny launches the held products (struct SkinnyP in
// kernels/gemv.cu: 16 outputs a block, blocks of the products in order).
func (b *Backend) launchSkinny(q *pending) {
	src, ok := b.bf16Input(q.x, q.T*q.I)
	if !ok {
		return
	}
	var a [11]uint64
	var nb [3]int
	total := 0
	for i := range 3 {
		j := q.jobs[min(i, q.n-1)] // unused slots repeat the last product, with no blocks
		a[i], a[3+i] = ptr(j.out), ptr(j.w.ptr)
		if i < q.n {
			nb[i] = (j.O + 15) / 16
			total += nb[i]
		}
	}
	o := func(i int) int { return q.jobs[min(i, q.n-1)].O }
	a[6] = ptr(src)
	a[7], a[8], a[9], a[10] = argPair(i32(o(0)), i32(o(1))), argPair(i32(o(2)), i32(nb[0])), argPair(i32(nb[1]), i32(q.T)), i32(q.I)
	b.launch(b.k.skinny, uint32(total), 1, 1, 256, 1, 0, a[:]...)
	b.skinnyRuns++
	// The rounded x stays reusable unless an output overlaps it.
	j := q.jobs[q.n-1]
	for _, k := range q.jobs[:q.n] {
		if k.out < q.x+driver.DevPtr(4*q.T*q.I) && q.x < k.out+driver.DevPtr(4*q.T*k.O) {
			j = k
		}
	}
	b.xbf.converted(q.x, q.T*q.I, j.out, q.T*j.O, b.writes)
}
