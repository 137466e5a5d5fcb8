package cuda

import (
	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// Operators are fused by holding back the last one while the next may
// combine with it: up to three decode GEMVs of the same activations (q, k
// and v; gate and up) become one launch, and a residual Add followed by the
// RMSNorm of its result becomes one kernel. Whatever comes next flushes what
// is held, so the order of device work is unchanged; fusion decisions depend
// only on the operator sequence, so captured graphs stay valid.
// INFERNIX_CUDA_FUSE=0 turns it off.

type pendKind uint8

const (
	pendNone pendKind = iota
	pendGemv
	pendAdd
)

type gemvJob struct {
	out driver.DevPtr
	w   *Tensor
	O   int
}

type pending struct {
	kind pendKind
	// pendGemv: n products of x [T, I] (bf16 weights).
	n    int
	jobs [3]gemvJob
	x    driver.DevPtr
	T, I int
	// pendAdd: out = a + c over n floats.
	out, a, c driver.DevPtr
	addN      int
	flushing  bool
}

// holdGemv takes a decode GEMV into the pending group; false if it cannot
// be fused (the caller launches it).
func (b *Backend) holdGemv(out, x driver.DevPtr, w *Tensor, T, I, O int) bool {
	if !b.fuse || w.dt != backend.BF16 || T > 8 || I%8 != 0 {
		return false
	}
	p := &b.pend
	if p.kind == pendGemv && p.x == x && p.T == T && p.I == I && p.n < 3 && out != x {
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

// holdAdd takes a residual add; false if fusion is off.
func (b *Backend) holdAdd(out, a, c driver.DevPtr, n int) bool {
	if !b.fuse || n == 0 {
		return false
	}
	b.flush()
	b.pend = pending{kind: pendAdd, out: out, a: a, c: c, addN: n}
	return true
}

// fusedAddNorm launches add+RMSNorm if the held Add produced x; false
// otherwise (the caller flushes and runs a plain RMSNorm).
func (b *Backend) fusedAddNorm(out, x, w driver.DevPtr, rows, n int, eps float32) bool {
	p := &b.pend
	// Aliasing among out, a, c and sum is fine: every element is read and
	// written by the same thread.
	if p.kind != pendAdd || p.out != x || p.addN != rows*n {
		return false
	}
	a, c := p.a, p.c
	p.kind = pendNone
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
	kind := p.kind
	p.kind = pendNone
	switch kind {
	case pendAdd:
		b.addNow(p.out, p.a, p.c, p.addN)
	case pendGemv:
		ri := gemvIndex(p.T)
		if p.n == 1 {
			j := p.jobs[0]
			b.launch(b.k.gemv[j.w.dt][ri], blocks(j.O, gemvBlockRows), 1, 1, 256, 1, 0, ptr(j.out), ptr(p.x), ptr(j.w.ptr), i32(p.T), i32(p.I), i32(j.O))
			return
		}
		var nb [3]int
		var args [9]uint64
		total := 0
		for i := 0; i < 3; i++ {
			args[3*i+2] = i32(1)
			if i < p.n {
				j := p.jobs[i]
				nb[i] = int(blocks(j.O, gemvBlockRows))
				total += nb[i]
				args[3*i], args[3*i+1], args[3*i+2] = ptr(j.out), ptr(j.w.ptr), i32(j.O)
			}
		}
		b.launch(b.k.gemv3[ri], uint32(total), 1, 1, 256, 1, 0, args[0], args[1], args[2], args[3], args[4], args[5],
			args[6], args[7], args[8], ptr(p.x), i32(p.T), i32(p.I), i32(nb[0]), i32(nb[1]))
	}
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
