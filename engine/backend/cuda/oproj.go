package cuda

import (
	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// The merge of a one-token decode attention's splits folded into the
// o-projection that reads its output (INFERNIX_CUDA_OPROJ=fold; off by
// default until the GPU measures it): Attention leaves attn_merge_splits
// held (pendMerge), the product of its output takes it (pendOProj), the
// residual add that follows becomes its epilogue, and attn_oproj
// (kernels/attention.cu) runs all three: each block merges one query
// head's splits and takes its share of some output rows, and the last
// head's block of a row group adds the shares in head order. Anything
// else that comes after the attention launches the merge as before.

// oprojConfig is the fold's setting.
type oprojConfig struct {
	on   bool
	runs int // launches (tests, benchmarks)
	// headsFirst: the grid's x is the head (INFERNIX_CUDA_OPROJ=fold-heads),
	// so that a row group's heads, which read the same weight rows, are
	// launched together; else the row group.
	headsFirst bool
}

// oprojRows is OP_ROWS and oprojMaxZ OP_MAXZ in kernels/attention.cu.
// oprojCounters is how many row-group counters start the scratch, whatever
// the launch's O: the heads' shares follow them and are not left zero, so
// a launch with fewer row groups must not put its shares where another's
// counters are (O ≤ oprojCounters·oprojRows).
const (
	oprojRows     = 128
	oprojMaxZ     = 64
	oprojCounters = 256
)

// mergeOp is a launch of attn_merge_splits (or attn_merge_wide, k) over
// the partials of T tokens' decode attention into o; fold is the module's
// attn_oproj, or nil.
type mergeOp struct {
	k, fold      *kernel
	nt           uint32
	o, part, pos driver.DevPtr
	T, heads, hd int
	zmax, chunk  int
}

// launchMerge launches the merge.
func (b *Backend) launchMerge(m *mergeOp) {
	b.launch(m.k, uint32(m.heads), uint32(m.T), uint32((m.hd+31)/32), m.nt, 1, 0,
		ptr(m.o), ptr(m.part), ptr(m.pos), i32(m.heads), i32(m.zmax), i32(m.chunk))
}

// holdMerge holds the merge for the product that may read its output;
// false where attn_oproj could not take it (the caller launches it).
func (b *Backend) holdMerge(m mergeOp) bool {
	// INFERNIX_CUDA_NOFUSE=gemvf turns the fold off with the other fused
	// products, so that they can be bisected together.
	if !b.oproj.on || !b.fuse || !b.fz.gemvf || m.fold == nil || m.T != 1 || m.zmax > oprojMaxZ || m.k == nil {
		return false
	}
	b.flush()
	b.pend = pending{kind: pendMerge, mrg: m}
	return true
}

// oprojTakes reports whether the held merge (p) and the product out =
// x·wᵀ of its output can run as attn_oproj. Where only the scratch is
// missing it makes it, which launches the merge: this product then runs
// apart.
func (b *Backend) oprojTakes(p *pending, out, x driver.DevPtr, w *Tensor, T, I, O int) bool {
	m := &p.mrg
	if p.kind != pendMerge || T != 1 || x != m.o || w.dt != backend.BF16 || I != m.heads*m.hd || O%oprojRows != 0 || O > oprojCounters*oprojRows ||
		out == m.o || out == m.part {
		return false
	}
	if b.scratch[scrOProj].size < oprojScratchBytes(m.heads, O) {
		b.zeroScratch(scrOProj, oprojScratchBytes(m.heads, O)) // its counters zero: every launch leaves them so
		return false
	}
	return true
}

// oprojScratchBytes is attn_oproj's scratch for heads query heads and O
// output rows: oprojCounters counters, then the heads' shares [heads][O].
func oprojScratchBytes(heads, O int) uint64 {
	return uint64(4 * (oprojCounters + heads*O))
}

// oprojTakeResid makes out = a + c, one of them the held attn_oproj's
// product, its epilogue; false where it is not.
func (b *Backend) oprojTakeResid(out, a, c driver.DevPtr, n int) bool {
	p := &b.pend
	if !b.fuse || !b.fz.resid || p.kind != pendOProj || p.sum != 0 || n != p.jobs[0].O {
		return false
	}
	prod := p.jobs[0].out
	resid := residOperand(a, c, prod)
	if resid == 0 {
		return false
	}
	// The kernel's last blocks write sum after every block has read o and
	// the partials; still, neither may be the sum or the residual.
	for _, d := range []driver.DevPtr{p.mrg.o, p.mrg.part, prod} {
		if resid == d || out == d {
			return false
		}
	}
	p.resid, p.sum = resid, out
	return true
}

// launchOProj launches a held pendOProj: struct OProjP (kernels/
// attention.cu), nine pointers, then heads, zmax, chunk, O, hfirst and a
// pad packed two to a slot; grid (row groups, heads) of 128 threads (NT),
// or (heads, row groups).
func (b *Backend) launchOProj(q *pending) {
	m, j := &q.mrg, q.jobs[0]
	s := b.scratch[scrOProj].p
	groups := j.O / oprojRows
	var a [12]uint64
	a[0], a[1], a[2], a[3], a[4] = ptr(j.w.ptr), ptr(m.part), ptr(m.pos), ptr(m.o), ptr(j.out)
	a[5], a[6] = ptr(q.resid), ptr(q.sum)
	a[7], a[8] = ptr(s+4*oprojCounters), ptr(s)
	a[9] = argPair(i32(m.heads), i32(m.zmax))
	a[10] = argPair(i32(m.chunk), i32(j.O))
	gx, gy := uint32(groups), uint32(m.heads)
	if b.oproj.headsFirst {
		a[11] = argPair(1, 0)
		gx, gy = gy, gx
	}
	b.oproj.runs++
	b.launch(m.fold, gx, gy, 1, 128, 1, 0, a[:]...)
}
