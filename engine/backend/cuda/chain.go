package cuda

import (
	"os"
	"strconv"

	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// Chained products (INFERNIX_CUDA_CHAIN=1): the one-token fused products
// that follow one another with nothing else between them (o_proj, gate|up,
// down and the next layer's q|k|v or the LM head) run as one persistent
// kernel, gemvf_chain (kernels/gemv.cu), with grid-wide barriers instead
// of kernel boundaries, so that the next product's weight loads overlap
// the tail of the one before. launchGemvf hands a product to chainGemvf
// instead of launching it; whatever is submitted next (but a metadata
// upload, which nothing chained reads) launches the chain first, so the
// order of device work is unchanged. A chain of one is the plain kernel.
// Results are bit-identical to the unchained kernels.

// chainMax is CH_MAX: phases in one gemvf_chain launch.
const chainMax = 4

// chainSlots is struct ChainP's size in 64-bit slots: CH_MAX GemvP of 17
// slots, then mode[4], units[4] (two per slot), n and pad, bar.
const chainSlots = chainMax*17 + 2 + 2 + 1 + 1

type chainPhase struct {
	args        [15]uint64 // GemvP's slots without the split-K ones
	mode, units int
}

type gemvChain struct {
	ph       [chainMax]chainPhase
	n        int
	flushing bool
}

// chainConfig reads INFERNIX_CUDA_CHAIN (1: on) and
// INFERNIX_CUDA_CHAIN_BLOCKS (a cap on gemvf_chain's blocks per SM; 0: as
// many as its registers allow).
func chainConfig() (on bool, perSM int) {
	perSM, _ = strconv.Atoi(os.Getenv("INFERNIX_CUDA_CHAIN_BLOCKS"))
	return os.Getenv("INFERNIX_CUDA_CHAIN") == "1", max(perSM, 0)
}

// chainGemvf takes a one-token fused product (a: GemvP's first 15 slots as
// launchGemvf packs them) into the chain; false if chaining is off or does
// not apply (the caller launches it).
func (b *Backend) chainGemvf(a *[15]uint64, epi, norm, units int) bool {
	if !b.chainOn || b.k.gemvfChain == nil || b.gemvf.smem != 0 || b.chainGrid() == 0 {
		return false
	}
	c := &b.chain
	if c.n == chainMax {
		b.flushChain()
	}
	c.ph[c.n] = chainPhase{args: *a, mode: epi | norm<<2, units: units}
	c.n++
	return true
}

// chainGrid is gemvf_chain's grid: as many blocks as fit the GPU at once
// (every block must be resident for the barriers to open), or 0 where
// that is unknown; chainPerSM caps the blocks per SM.
func (b *Backend) chainGrid() int {
	k := b.k.gemvfChain
	if k == nil || b.smCount == 0 || k.regs == 0 {
		return 0
	}
	per := blocksPerSM(256, k.regs, 1024, b.smemPerSM)
	if b.chainPerSM > 0 {
		per = min(per, b.chainPerSM)
	}
	return per * b.smCount
}

// flushChain launches the chained products.
func (b *Backend) flushChain() {
	c := &b.chain
	if c.n == 0 || c.flushing {
		return
	}
	c.flushing = true
	defer func() { c.flushing = false }()
	n := c.n
	c.n = 0
	if n == 1 {
		p := &c.ph[0]
		b.launch(b.k.gemvf[p.mode&3][p.mode>>2][0], uint32(p.units), 1, 1, 256, 1, 0, p.args[:]...)
		return
	}
	bar, ok := b.chainBarrier()
	if !ok {
		return
	}
	pair := func(lo, hi int) uint64 { return uint64(uint32(lo)) | uint64(uint32(hi))<<32 }
	var a [chainSlots]uint64
	var mode, units [chainMax]int
	for i := 0; i < n; i++ {
		copy(a[i*17:], c.ph[i].args[:]) // part and S stay 0
		mode[i], units[i] = c.ph[i].mode, c.ph[i].units
	}
	o := chainMax * 17
	a[o], a[o+1] = pair(mode[0], mode[1]), pair(mode[2], mode[3])
	a[o+2], a[o+3] = pair(units[0], units[1]), pair(units[2], units[3])
	a[o+4] = pair(n, 0)
	a[o+5] = ptr(bar)
	b.chainLaunches++
	b.launch(b.k.gemvfChain, uint32(b.chainGrid()), 1, 1, 256, 1, 0, a[:]...)
}

// chainBarrier returns gemvf_chain's counters, zeroed when first made; every
// launch leaves them zero.
func (b *Backend) chainBarrier() (driver.DevPtr, bool) {
	s := &b.scratch[scrChain]
	if s.size < 4*chainMax {
		b.needEager()
		if err := s.ensure(b, 4*chainMax); err != nil {
			b.fail(err)
			return 0, false
		}
		b.memset(s.p, 0, int(s.size/4))
	}
	return s.p, b.err == nil
}
