package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/infernix/infernix/engine/backend"
)

// kvCache stores, per attention layer, K and V as f32 laid out
// [block][slot][kvHead][headDim].
type kvCache struct {
	spec backend.KVSpec
	k, v [][]float32
}

func (c *kvCache) Spec() backend.KVSpec { return c.spec }

func (b *Backend) NewKVCache(spec backend.KVSpec) (backend.KVCache, error) {
	per := int64(spec.Blocks) * backend.BlockSize * int64(spec.KVHeads*spec.HeadDim)
	if per <= 0 || per > 1<<36 {
		return nil, fmt.Errorf("cpu: KV cache of %d blocks × %d layers is not allocatable", spec.Blocks, spec.Layers)
	}
	c := &kvCache{spec: spec, k: make([][]float32, spec.Layers), v: make([][]float32, spec.Layers)}
	for l := range c.k {
		c.k[l] = make([]float32, per)
		c.v[l] = make([]float32, per)
	}
	return c, nil
}

var scorePool = sync.Pool{New: func() any { return new([]float32) }}

func (b *Backend) Attention(out, q, k, v backend.Tensor, cache backend.KVCache, layer int, ab *backend.AttnBatch, scale float32) {
	b.AttentionRoundingProbs(nil, out, q, k, v, cache, layer, ab, scale)
}

// AttentionRoundingProbs is Attention with each probability passed through
// round before it weights V (their normalising sum stays unrounded): the
// CPU in the number formats of a GPU kernel whose tensor cores take the
// probabilities in 16 bits, for the CUDA backend's tests. A nil round is
// Attention.
func (b *Backend) AttentionRoundingProbs(round func(float32) float32, out, q, k, v backend.Tensor, cache backend.KVCache, layer int, ab *backend.AttnBatch, scale float32) {
	c := cache.(*kvCache)
	o, qq, kk, vv := f32(out), f32(q), f32(k), f32(v)
	kvh, hd := c.spec.KVHeads, c.spec.HeadDim
	heads := qq.cols / hd
	group := heads / kvh
	stride := kvh * hd
	K, V := c.k[layer], c.v[layer]
	slot := func(seq int32, pos int32) int {
		blk := ab.Blocks[seq][pos/backend.BlockSize]
		return (int(blk)*backend.BlockSize + int(pos%backend.BlockSize)) * stride
	}
	for t := range ab.Pos {
		off := slot(ab.Seq[t], ab.Pos[t])
		copy(K[off:off+stride], kk.f32[t*stride:(t+1)*stride])
		copy(V[off:off+stride], vv.f32[t*stride:(t+1)*stride])
	}
	T := len(ab.Pos)
	b.pool.parallel(T*heads, 1, func(lo, hi int) {
		sp := scorePool.Get().(*[]float32)
		for job := lo; job < hi; job++ {
			t, h := job/heads, job%heads
			seq, pos := ab.Seq[t], ab.Pos[t]
			n := int(pos) + 1
			if cap(*sp) < n {
				*sp = make([]float32, n)
			}
			scores := (*sp)[:n]
			qv := qq.f32[t*qq.cols+h*hd : t*qq.cols+(h+1)*hd]
			kvOff := (h / group) * hd
			maxS := float32(math.Inf(-1))
			for p := 0; p < n; p++ {
				base := slot(seq, int32(p)) + kvOff
				s := dot(qv, K[base:base+hd]) * scale
				scores[p] = s
				if s > maxS {
					maxS = s
				}
			}
			var sum float64
			for p := range scores {
				e := float32(math.Exp(float64(scores[p] - maxS)))
				scores[p] = e
				sum += float64(e)
			}
			inv := float32(1 / sum)
			dst := o.f32[t*o.cols+h*hd : t*o.cols+(h+1)*hd]
			clear(dst)
			for p := 0; p < n; p++ {
				base := slot(seq, int32(p)) + kvOff
				e := scores[p]
				if round != nil {
					e = round(e)
				}
				w := e * inv
				for i, x := range V[base : base+hd] {
					dst[i] += w * x
				}
			}
		}
		scorePool.Put(sp)
	})
}
