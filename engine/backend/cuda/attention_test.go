package cuda

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

// TestAttention compares paged attention with the CPU backend over prefill
// chunks, mixed batches and decode steps, with scrambled block tables, for
// every kernel and several head shapes: split (attn_decode for every
// batch, its splits sized for the GPU: mostly one tile each here), blocks8
// (attn_decode aiming at 8 blocks a launch: several multi-tile splits per
// token, merged by the last one), old (attn_split + attn_combine) and
// prefill (the tensor-core kernel for every batch of ≥ 2 tokens), deep and
// deep3 (attn_decode_deep, attn_decode_deep3: INFERNIX_CUDA_ATTN_DEEP) and
// deep-blocks8 (the deep kernel with multi-tile splits and the merge), tc
// and tc-blocks8 (attn_decode_tc, the tensor cores: INFERNIX_CUDA_DECODE_ATTN=tc;
// tc2 and tc2-blocks8 its transposed form attn_decode_tc2, =tc2, where G ≤ 8,
// prefill128 (the tensor-core prefill with 128-row tiles),
// the default kernel where the head dim has none); the f16-* modes are the
// same kernels over an f16 KV cache (INFERNIX_CUDA_KV).
func TestAttention(t *testing.T) {
	b := gpu(t)
	r := newRand(t)
	defer func(m string, p, blk int, old bool, deep int, dt kvDType, tc, tc2 bool, rows int) {
		b.attnMode, b.prefillMin, b.attnBlocks, b.attnOld, b.attnDeep, b.kvDT, b.attnTC, b.attnTC2, b.prefillRows = m, p, blk, old, deep, dt, tc, tc2, rows
	}(b.attnMode, b.prefillMin, b.attnBlocks, b.attnOld, b.attnDeep, b.kvDT, b.attnTC, b.attnTC2, b.prefillRows)
	for _, c := range []struct{ kvh, G, hd, long int }{
		{2, 4, 128, 1200}, {1, 8, 64, 300}, {4, 1, 64, 300}, {2, 2, 16, 300}, {2, 2, 256, 300}, {1, 16, 128, 300}, {2, 4, 32, 130},
		{1, 4, 40, 200}, {1, 3, 128, 150},
	} {
		for _, mode := range []string{"split", "blocks8", "old", "prefill", "prefill128", "deep", "deep3", "deep-blocks8", "tc", "tc-blocks8",
			"tc2", "tc2-blocks8", "f16-split", "f16-blocks8", "f16-old", "f16-prefill", "f16-prefill128", "f16-deep-blocks8", "f16-tc",
			"f16-tc-blocks8", "f16-tc2"} {
			t.Run(fmt.Sprintf("kvh%d_g%d_hd%d_%s", c.kvh, c.G, c.hd, mode), func(t *testing.T) {
				b.attnMode, b.prefillMin, b.attnBlocks, b.attnOld, b.attnDeep, b.kvDT, b.attnTC, b.attnTC2, b.prefillRows = "split", 0, 0, false, 0, kvBF16, false, false, 64
				if m, ok := strings.CutPrefix(mode, "f16-"); ok {
					mode, b.kvDT = m, kvF16
				}
				switch mode {
				case "blocks8":
					b.attnBlocks = 8
				case "deep":
					b.attnDeep = 1
				case "deep3":
					b.attnDeep = 3
				case "deep-blocks8":
					b.attnDeep, b.attnBlocks = 1, 8
				case "tc":
					b.attnTC = true
				case "tc-blocks8":
					b.attnTC, b.attnBlocks = true, 8
				case "tc2":
					b.attnTC, b.attnTC2 = true, true
				case "tc2-blocks8":
					b.attnTC, b.attnTC2, b.attnBlocks = true, true, 8
				case "old":
					b.attnOld = true
				case "prefill":
					b.attnMode, b.prefillMin = "", 2 // the tensor-core kernel for every batch of ≥ 2 tokens
				case "prefill128":
					b.attnMode, b.prefillMin, b.prefillRows = "", 2, 128
				}
				heads := c.kvh * c.G
				spec := backend.KVSpec{Layers: 2, Blocks: 48, KVHeads: c.kvh, HeadDim: c.hd}
				gc, err := b.NewKVCache(spec)
				if err != nil {
					t.Fatal(err)
				}
				cc, _ := cpuBe.NewKVCache(spec)
				perm := r.Perm(spec.Blocks)
				tab := func(lo, hi int) []int32 {
					out := make([]int32, 0, hi-lo)
					for _, p := range perm[lo:hi] {
						out = append(out, int32(p))
					}
					return out
				}
				tables := [][]int32{tab(0, 24), tab(24, 36), tab(36, 40)}
				type tok struct{ seq, pos int }
				run := func(name string, toks []tok) {
					T := len(toks)
					ab := &backend.AttnBatch{Blocks: tables}
					for _, x := range toks {
						ab.Seq = append(ab.Seq, int32(x.seq))
						ab.Pos = append(ab.Pos, int32(x.pos))
					}
					for layer := 0; layer < spec.Layers; layer++ {
						q := act(t, b, r, T, heads*c.hd, 2)
						k := act(t, b, r, T, c.kvh*c.hd, 2)
						v := act(t, b, r, T, c.kvh*c.hd, 1)
						o := out(t, b, T, heads*c.hd)
						scale := float32(1/float64(c.hd)) * 4
						b.Attention(o.g, q.g, k.g, v.g, gc, layer, ab, scale)
						cpuBe.Attention(o.c, q.c, k.c, v.c, cc, layer, ab, scale)
						compare(t, fmt.Sprintf("%s layer %d", name, layer), read(t, b, o.g), cpuF32(o), 1e-2)
					}
				}
				span := func(seq, from, to int) []tok {
					var ts []tok
					for p := from; p < to; p++ {
						ts = append(ts, tok{seq, p})
					}
					return ts
				}
				run("prefill A", span(0, 0, c.long))
				mixed := append(span(0, c.long, c.long+40), span(1, 0, 100)...)
				mixed = append(mixed, tok{2, 0})
				run("mixed", mixed)
				run("decode 3 lanes", []tok{{0, c.long + 40}, {1, 100}, {2, 1}})
				run("decode 1 lane", []tok{{0, c.long + 41}})
				run("chunk B", span(1, 101, 200))
			})
		}
	}
}

// TestDecodeSplits checks attn_decode's grid choice without a GPU: splits
// cover the context in whole tiles, the launch aims at 2 blocks per SM,
// the merge's bound holds, and a decode growing from 1 to 33K positions
// changes its launch (and so its graph) only a few times.
func TestDecodeSplits(t *testing.T) {
	b := &Backend{smCount: 132}
	for _, c := range []struct {
		T, kvh, maxSplits, perSM int
		fine                     bool
	}{{1, 8, 1000, 2, false}, {16, 8, 1000, 2, false}, {1, 1, 1000, 2, false}, {3, 2, 1000, 2, false}, {1, 8, 12, 2, false},
		{1200, 2, 100, 2, false}, {1, 8, 1000, 3, true}, {16, 8, 1000, 3, true}, {1, 1, 1000, 3, true}, {3, 2, 20, 3, true}} {
		changes := 0
		prev := [2]int{}
		for maxLen := 1; maxLen <= 33000; maxLen++ {
			chunk, zmax := b.decodeSplits(maxLen, c.T, c.kvh, 600, c.maxSplits, c.perSM, c.fine)
			tps := chunk / 64
			nz := (maxLen + chunk - 1) / chunk
			pow2 := tps&(tps-1) == 0
			if chunk%64 != 0 || !(pow2 || c.fine && tps%3 == 0 && (tps/3)&(tps/3-1) == 0) || nz > zmax || nz > c.maxSplits {
				t.Fatalf("%+v maxLen %d: chunk %d, zmax %d, %d splits", c, maxLen, chunk, zmax, nz)
			}
			if blocks := c.T * c.kvh * nz; tps > 1 && nz > 1 && blocks > c.perSM*b.smCount {
				t.Fatalf("%+v maxLen %d: %d blocks of %d positions for %d SMs", c, maxLen, blocks, chunk, b.smCount)
			}
			if cur := [2]int{chunk, zmax}; cur != prev {
				changes++
				prev = cur
			}
		}
		if changes > 24 {
			t.Errorf("%+v: the launch changed %d times over 33K positions", c, changes)
		}
	}
	if chunk, zmax := b.decodeSplits(32773, 1, 8, 1200, 1000, 2, false); chunk != 1024 || zmax != 64 {
		t.Errorf("Qwen3-8B at 32K: chunk %d, zmax %d; want 1024, 64 (33 splits × 8 heads = 264 blocks)", chunk, zmax)
	}
	if chunk, zmax := b.decodeSplits(32773, 1, 8, 1200, 1000, 3, true); chunk != 768 || zmax != 64 {
		t.Errorf("Qwen3-8B at 32K, deep: chunk %d, zmax %d; want 768, 64 (43 splits × 8 heads = 344 blocks)", chunk, zmax)
	}
}

// TestDynUnits: where the folded attention hands out its units
// (INFERNIX_CUDA_ATTN_DYN), they outnumber the blocks, hold at least the 2
// tiles a block requests at once, fit attn_merge_splits and their slots,
// and the launch changes only at power-of-two buckets as a context grows;
// elsewhere the static splits serve.
func TestDynUnits(t *testing.T) {
	for _, c := range []struct{ T, kvh, u, perSM int }{{1, 8, 2, 2}, {1, 8, 4, 2}, {16, 8, 2, 2}, {2, 2, 3, 2}, {1, 1, 2, 2}} {
		b := &Backend{smCount: 132, attnDyn: c.u}
		changes, prev := 0, [3]int{}
		for maxLen := 1; maxLen <= 140000; maxLen++ {
			chunk, zmax, blocks := b.dynUnits(maxLen, c.T, c.kvh, 4000, c.perSM)
			if cur := [3]int{chunk, zmax, blocks}; cur != prev {
				changes++
				prev = cur
			}
			tiles := (maxLen + 63) / 64
			if chunk == 0 {
				if want := max(1, c.perSM*132/(c.kvh*c.T)); tiles > c.u*want {
					t.Fatalf("%+v maxLen %d: static splits for %d tiles, %d blocks", c, maxLen, tiles, want)
				}
				continue
			}
			nu := (maxLen + chunk - 1) / chunk
			if chunk%64 != 0 || chunk < 64*c.u || nu <= blocks || nu > zmax || zmax > mergeSplitsMax || blocks*c.T*c.kvh > c.perSM*132 {
				t.Fatalf("%+v maxLen %d: chunk %d, zmax %d, %d blocks, %d units", c, maxLen, chunk, zmax, blocks, nu)
			}
		}
		if changes > 24 {
			t.Errorf("%+v: the launch changed %d times over 140K positions", c, changes)
		}
	}
	b := &Backend{smCount: 132, attnDyn: 2}
	if chunk, zmax, blocks := b.dynUnits(32773, 1, 8, 1200, 2); chunk != 128 || zmax != 512 || blocks != 33 {
		t.Errorf("Qwen3-8B at 32K: chunk %d, zmax %d, %d blocks; want 128, 512, 33 (257 units of 2 tiles, 33 blocks a KV head)", chunk, zmax, blocks)
	}
}

// TestAttentionKVF16 measures what the f16 KV cache is for: the same
// attention against the CPU's f32 (the same inputs, decode and prefill
// kernels), once over a bf16 cache and once over an f16 one. The f16
// error must be well under the bf16 one (3 more mantissa bits: ~8× less
// where the cache's rounding dominates; the prefill kernel also rounds Q
// and P to the cache's type). Catches an f16 cache that is silently bf16.
func TestAttentionKVF16(t *testing.T) {
	b := gpu(t)
	r := newRand(t)
	defer func(m string, p int, dt kvDType) { b.attnMode, b.prefillMin, b.kvDT = m, p, dt }(b.attnMode, b.prefillMin, b.kvDT)
	const kvh, G, hd, long = 2, 4, 128, 700
	heads := kvh * G
	spec := backend.KVSpec{Layers: 1, Blocks: 16, KVHeads: kvh, HeadDim: hd}
	for _, mode := range []string{"split", "prefill"} {
		t.Run(mode, func(t *testing.T) {
			b.attnMode, b.prefillMin = "split", 0
			if mode == "prefill" {
				b.attnMode, b.prefillMin = "", 2
			}
			var errs [numKVDTypes]float64
			cc, _ := cpuBe.NewKVCache(spec)
			var gcs [numKVDTypes]backend.KVCache
			for dt := range gcs {
				b.kvDT = kvDType(dt)
				var err error
				if gcs[dt], err = b.NewKVCache(spec); err != nil {
					t.Fatal(err)
				}
			}
			ab := &backend.AttnBatch{Blocks: [][]int32{{3, 1, 4, 15, 9, 2, 6, 5, 8, 7, 10, 11}}}
			for p := 0; p < long; p++ {
				ab.Seq = append(ab.Seq, 0)
				ab.Pos = append(ab.Pos, int32(p))
			}
			T := len(ab.Pos)
			q := act(t, b, r, T, heads*hd, 2)
			k := act(t, b, r, T, kvh*hd, 2)
			v := act(t, b, r, T, kvh*hd, 1)
			o := out(t, b, T, heads*hd)
			scale := float32(1/float64(hd)) * 4
			cpuBe.Attention(o.c, q.c, k.c, v.c, cc, 0, ab, scale)
			want := cpuF32(o)
			for dt, gc := range gcs {
				b.Attention(o.g, q.g, k.g, v.g, gc, 0, ab, scale)
				errs[dt] = relErr(read(t, b, o.g), want)
			}
			t.Logf("%s: relative error against f32 K/V: bf16 cache %.3g, f16 cache %.3g (%.1f× less)", mode, errs[kvBF16], errs[kvF16], errs[kvBF16]/errs[kvF16])
			if !(errs[kvF16] < errs[kvBF16]/3) {
				t.Errorf("%s: f16 cache error %.3g is not well under the bf16 one %.3g", mode, errs[kvF16], errs[kvBF16])
			}
		})
	}
}

// relErr is ‖got − want‖ / ‖want‖ (NaN where got has a non-finite value).
func relErr(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / math.Max(den, 1e-30))
}
