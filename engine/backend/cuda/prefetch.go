package cuda

import "github.com/infernix/infernix/engine/backend"

// How l2_prefetch asks L2 for a hinted weight (INFERNIX_CUDA_L2PF).
const (
	l2pfLines = 1 // one prefetch a 128-byte line
	l2pfBulk  = 2 // one bulk prefetch a thread (sm_90)
)

var _ backend.WeightPrefetcher = (*Backend)(nil)

// PrefetchWeights keeps w for the next Attention, which, deciding a decode
// step, launches l2_prefetch for it just before its own kernel: w (o_proj's
// weights, 33.5 MB for Qwen3-8B) comes into L2 while the attention, which
// reads little at short contexts, runs. Only with INFERNIX_CUDA_L2PF set;
// otherwise the hint is dropped. Why: the step timeline (run 20) has the
// attention and its merge ~11 µs a layer at 640 positions with the memory
// nearly idle, and o_proj reading at 3.3 TB/s after them.
func (b *Backend) PrefetchWeights(w backend.Tensor) {
	if b.l2pf == 0 || b.k.l2Prefetch == nil {
		return
	}
	b.l2Hint = tensor(w)
}

// launchL2Hint launches l2_prefetch for the pending hint, if any, and drops
// the hint.
func (b *Backend) launchL2Hint() {
	w := b.l2Hint
	b.l2Hint = nil
	if w == nil || b.err != nil {
		return
	}
	n, per := w.bytes(), uint64(b.l2pfChunk)*32
	b.launch(b.k.l2Prefetch, uint32((n+per-1)/per), 1, 1, 32, 1, 0, ptr(w.ptr), n, uint64(b.l2pfChunk))
}
