package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Relative error allowed to attn_decode_tc, which rounds Q and P to the
// cache's type: bf16 keeps 8 significant bits, f16 11.
const tcTolBF16, tcTolF16 = 4e-3, 6e-4

// TestAttnDecodeEmulated runs kernels/attention.cu's decode attention
// (attn_decode and attn_decode_deep, through attn_decode_impl, and the
// tensor-core attn_decode_tc with ldmatrix and mma emulated) under the
// CPU emulation (testdata/emu/attn_main.cpp, head dim 64, 4 query heads per
// KV head) with a bf16 and an f16 paged KV cache (INFERNIX_CUDA_KV), over
// scrambled block tables, with many splits merged by the last block and
// with one split per token. For each type:
//   - kv_enc rounds to nearest even, and f16 saturates at ±65504 (NaN
//     stays NaN);
//   - the outputs match a float64 reference computed from the cache's own
//     (rounded) elements, every output is written and the split counters
//     are left at zero;
//   - two K/V tile stages (INFERNIX_CUDA_ATTN_STAGES=2) give the same bytes
//     as three;
//
// and, against the reference from the unrounded K and V, the f16 cache's
// error is well under the bf16 one's (3 more mantissa bits: ~8× less).
// The GPU's own timing and memory model are TestAttention's to check.
func TestAttnDecodeEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	bin := emuBinary(t, "attn", "testdata/emu/attn_main.cpp", "../../../kernels/attention.cu")
	// Two tile stages instead of three (INFERNIX_CUDA_ATTN_STAGES=2): the
	// same tiles added in the same order.
	stages2 := emuBinary(t, "attn-stages2", "testdata/emu/attn_stages2_main.cpp", "testdata/emu/attn_main.cpp",
		"../../../kernels/attention.cu")
	r := newRand(t)
	const hd, g, kvh, pool = 64, 4, 2, 16
	heads := kvh * g
	tabs, tokTab := threeSequences(r, pool)
	pos := []int32{700, 100, 0} // one decode token each
	T := len(pos)
	q, kf, vf := randomQKV(r, T*heads*hd, pool*kvh*64*hd)
	n := len(kf)
	scale := float32(2 / math.Sqrt(hd))
	conv := []float32{0, 1, -1, 3.14159, 1e-3, 6.1e-5, 1e-6, 1e-8, -2.5e-7, 65504, 65519, 65520, -65536, 1e5, -3e9,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}

	// float64 reference over the given K and V.
	ref := func(kk, vv []float32) []float32 {
		return decodeAttentionRef(q, kk, vv, pos, tokTab, tabs, kvh, g, hd, scale)
	}
	exact := ref(kf, vf)

	var errs [2]float64
	for kt, name := range []string{"bf16", "f16"} {
		for _, c := range []struct{ chunk, zmax int }{{64, 16}, {1024, 1}} {
			t.Run(fmt.Sprintf("%s_chunk%d", name, c.chunk), func(t *testing.T) {
				var in bytes.Buffer
				binary.Write(&in, binary.LittleEndian, []int32{int32(kt), kvh, int32(T), pool, int32(c.zmax), int32(c.chunk), int32(len(tabs)), int32(len(conv))})
				binary.Write(&in, binary.LittleEndian, pos)
				binary.Write(&in, binary.LittleEndian, tokTab)
				binary.Write(&in, binary.LittleEndian, tabs)
				binary.Write(&in, binary.LittleEndian, q)
				binary.Write(&in, binary.LittleEndian, scale)
				binary.Write(&in, binary.LittleEndian, kf)
				binary.Write(&in, binary.LittleEndian, vf)
				binary.Write(&in, binary.LittleEndian, conv)
				stdout, err := runEmu(bin, in.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				two, err := runEmu(stages2, in.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(two.Bytes(), stdout.Bytes()) {
					t.Errorf("two K/V stages (DSTAGES=2) give other bytes than three")
				}
				rd := func(v any) {
					if err := binary.Read(stdout, binary.LittleEndian, v); err != nil {
						t.Fatal(err)
					}
				}
				kc, vc := make([]uint16, n), make([]uint16, n)
				rd(kc)
				rd(vc)
				dec := func(h []uint16, src []float32) []float32 {
					f := make([]float32, len(h))
					for i, x := range h {
						if kt == 1 {
							f[i] = f16Float(x)
							if x != f16Ref(src[i]) {
								t.Fatalf("f16 of %v: %#04x, want %#04x", src[i], x, f16Ref(src[i]))
							}
						} else {
							f[i] = bf16Float(x)
							if x != bf16Bits(src[i]) {
								t.Fatalf("bf16 of %v: %#04x, want %#04x", src[i], x, bf16Bits(src[i]))
							}
						}
					}
					return f
				}
				want := ref(dec(kc, kf), dec(vc, vf))
				for _, kname := range []string{"attn_decode", "attn_decode_deep", "attn_decode_tc", "attn_decode_tc2"} {
					got := make([]float32, T*heads*hd)
					cnt := make([]int32, T*kvh)
					rd(got)
					rd(cnt)
					tol := 1e-5
					if strings.HasPrefix(kname, "attn_decode_tc") {
						// Q and P rounded to the cache's type for the tensor cores.
						tol = [2]float64{tcTolBF16, tcTolF16}[kt]
					}
					compare(t, kname, got, want, tol)
					for i, x := range cnt {
						if x != 0 {
							t.Errorf("%s: counter %d left at %d", kname, i, x)
						}
					}
					if kname == "attn_decode" && c.chunk == 64 {
						var num, den float64
						for i := range got {
							d := float64(got[i]) - float64(exact[i])
							num += d * d
							den += float64(exact[i]) * float64(exact[i])
						}
						errs[kt] = math.Sqrt(num / den)
					}
				}
				hc := make([]uint16, len(conv))
				rd(hc)
				for i, f := range conv {
					switch {
					case kt == 0 && math.IsNaN(float64(f)):
						if !math.IsNaN(float64(bf16Float(hc[i]))) {
							t.Errorf("bf16 of NaN: %#04x", hc[i])
						}
					case kt == 0:
						if hc[i] != bf16Bits(f) {
							t.Errorf("bf16 of %v: %#04x, want %#04x", f, hc[i], bf16Bits(f))
						}
					case math.IsNaN(float64(f)):
						if !math.IsNaN(float64(f16Float(hc[i]))) {
							t.Errorf("f16 of NaN: %#04x", hc[i])
						}
					default:
						if hc[i] != f16Ref(f) {
							t.Errorf("f16 of %v: %#04x (%v), want %#04x (%v)", f, hc[i], f16Float(hc[i]), f16Ref(f), f16Float(f16Ref(f)))
						}
					}
				}
			})
		}
	}
	t.Logf("relative error against unrounded K/V: bf16 cache %.3g, f16 cache %.3g (%.1f× less)", errs[0], errs[1], errs[0]/errs[1])
	if errs[0] > 0 && errs[1] > 0 && errs[1] > errs[0]/4 {
		t.Errorf("f16 cache error %.3g is not well under the bf16 one %.3g", errs[1], errs[0])
	}
}

// f16Float decodes an IEEE half.
func f16Float(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return sign * float32(math.Ldexp(m, -24))
	case 31:
		if m != 0 {
			return float32(math.NaN())
		}
		return sign * float32(math.Inf(1))
	}
	return sign * float32(math.Ldexp(1024+m, e-25))
}

// f16Ref is the f16 nearest to f (ties to even), saturated to ±65504 as
// the kernels store the KV cache: by search over the finite halves, not
// by bit manipulation, to be an independent check of the kernels'.
func f16Ref(f float32) uint16 {
	var sign uint16
	a := float64(f)
	if a < 0 || a == 0 && math.Signbit(a) {
		sign, a = 0x8000, -a
	}
	if a >= 65504 {
		return sign | 0x7bff
	}
	lo, hi := 0, 0x7bff // largest h with f16Float(h) ≤ a
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if float64(f16Float(uint16(mid))) <= a {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	d0, d1 := a-float64(f16Float(uint16(lo))), float64(f16Float(uint16(lo+1)))-a
	if d1 < d0 || d1 == d0 && lo&1 == 1 {
		lo++
	}
	return sign | uint16(lo)
}

// TestKVDTypeFromEnv: INFERNIX_CUDA_KV's values, and the kernels' defines.
func TestKVDTypeFromEnv(t *testing.T) {
	for v, want := range map[string]kvDType{"": kvF16, "bf16": kvBF16, "f16": kvF16} {
		if got, ok := kvDTypeFromEnv(v); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", v, got, ok, want)
		}
	}
	if got, ok := kvDTypeFromEnv("fp8"); ok || got != kvF16 {
		t.Errorf(`"fp8": %v %v, want f16 and false`, got, ok)
	}
	if kvBF16.define() != "KVDT=DT_BF16" || kvF16.define() != "KVDT=DT_F16" {
		t.Error("defines")
	}
}

// TestAttnPrefillEmulated runs kernels/prefill.cu's tensor-core prefill
// attention under the CPU emulation (testdata/emu/prefill_main.cpp, head dim
// 64, 4 query heads per KV head, bf16 cache; tiles of 64 and of 128 rows)
// over two sequences in one batch, one from position 0 and one after 150
// cached positions, with
// scrambled block tables, against a float64 causal reference over the
// cache's own elements. The kernel is verified on the GPU (TestAttention),
// so this checks the emulation's ldmatrix and mma.sync, which
// attn_decode_tc's emulated test relies on, as much as the kernel.
func TestAttnPrefillEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	for _, rows := range []int{64, 128} {
		t.Run(fmt.Sprintf("rows%d", rows), func(t *testing.T) {
			main := "testdata/emu/prefill_main.cpp"
			if rows == 128 {
				main = "testdata/emu/prefill128_main.cpp"
			}
			bin := emuBinary(t, fmt.Sprintf("prefill%d", rows), main, "testdata/emu/prefill_main.cpp", "../../../kernels/prefill.cu")
			attnPrefillEmulatedCase(t, bin, rows)
		})
	}
}

func attnPrefillEmulatedCase(t *testing.T, bin string, rows int) {
	r := newRand(t)
	const hd, g, kvh, pool = 64, 4, 2, 8
	heads := kvh * g
	perm := r.Perm(pool)
	// Sequence 0: blocks perm[0:2], tokens at positions 0…99; sequence 1:
	// blocks perm[2:5], tokens at positions 150…186.
	tabs := []int32{int32(perm[0]), int32(perm[1]), int32(perm[2]), int32(perm[3]), int32(perm[4])}
	var pos, tokTab []int32
	for p := 0; p < 100; p++ {
		pos, tokTab = append(pos, int32(p)), append(tokTab, 0)
	}
	for p := 150; p < 187; p++ {
		pos, tokTab = append(pos, int32(p)), append(tokTab, 2)
	}
	T := len(pos)
	// Tiles as attnMetadata makes them: runs of one sequence, rows/G tokens at most.
	var tiles []int32
	for i := 0; i < T; {
		e := i + 1
		for e < T && tokTab[e] == tokTab[i] && e-i < rows/g {
			e++
		}
		tiles = append(tiles, int32(i), int32(e-i))
		i = e
	}
	q, kf, vf := randomQKV(r, T*heads*hd, pool*kvh*64*hd)
	scale := float32(1 / math.Sqrt(hd))
	var in bytes.Buffer
	binary.Write(&in, binary.LittleEndian, []int32{kvh, int32(T), pool, int32(len(tabs)), int32(len(tiles) / 2)})
	binary.Write(&in, binary.LittleEndian, pos)
	binary.Write(&in, binary.LittleEndian, tokTab)
	binary.Write(&in, binary.LittleEndian, tabs)
	binary.Write(&in, binary.LittleEndian, tiles)
	binary.Write(&in, binary.LittleEndian, q)
	binary.Write(&in, binary.LittleEndian, scale)
	binary.Write(&in, binary.LittleEndian, kf)
	binary.Write(&in, binary.LittleEndian, vf)
	stdout, err := runEmu(bin, in.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, T*heads*hd)
	if err := binary.Read(stdout, binary.LittleEndian, got); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, T*heads*hd)
	for ti := 0; ti < T; ti++ {
		L := int(pos[ti]) + 1
		for hh := 0; hh < heads; hh++ {
			h := hh / g
			qr := q[(ti*heads+hh)*hd:][:hd]
			row := func(p int) int { return ((int(tabs[int(tokTab[ti])+p/64])*kvh+h)*64 + p%64) * hd }
			s := make([]float64, L)
			mx := math.Inf(-1)
			for p := 0; p < L; p++ {
				var d float64
				for i := range qr {
					d += float64(qr[i]) * float64(bf16Float(bf16Bits(kf[row(p)+i])))
				}
				s[p] = d * float64(scale)
				mx = math.Max(mx, s[p])
			}
			var sum float64
			acc := make([]float64, hd)
			for p := 0; p < L; p++ {
				w := math.Exp(s[p] - mx)
				sum += w
				for i := range acc {
					acc[i] += w * float64(bf16Float(bf16Bits(vf[row(p)+i])))
				}
			}
			for i := range acc {
				want[(ti*heads+hh)*hd+i] = float32(acc[i] / sum)
			}
		}
	}
	// Q and P are rounded to bf16 for the tensor cores.
	compare(t, "attn_prefill", got, want, tcTolBF16)
}

// threeSequences scrambles 15 of a pool's cache blocks into the block
// tables of three sequences (12, 2 and 1 blocks: positions up to 767, 127
// and 63), concatenated, and returns each sequence's first entry.
func threeSequences(r *rand.Rand, pool int) (tabs, tokTab []int32) {
	for _, p := range r.Perm(pool)[:15] {
		tabs = append(tabs, int32(p))
	}
	return tabs, []int32{0, 12, 14}
}

// decodeAttentionRef is decode attention in float64: for every token t and
// query head, softmax(q·K·scale)·V over positions 0…pos[t] of its
// sequence's blocks in the paged cache kk, vv ([block][kvh][64][hd]).
func decodeAttentionRef(q, kk, vv []float32, pos, tokTab, tabs []int32, kvh, g, hd int, scale float32) []float32 {
	heads := kvh * g
	out := make([]float32, len(pos)*heads*hd)
	for ti := range pos {
		L := int(pos[ti]) + 1
		for hh := 0; hh < heads; hh++ {
			h := hh / g
			qr := q[(ti*heads+hh)*hd:][:hd]
			s := make([]float64, L)
			mx := math.Inf(-1)
			row := func(p int) int { return ((int(tabs[int(tokTab[ti])+p/64])*kvh+h)*64 + p%64) * hd }
			for p := 0; p < L; p++ {
				var d float64
				for i, x := range kk[row(p):][:hd] {
					d += float64(qr[i]) * float64(scale) * float64(x)
				}
				s[p] = d
				mx = math.Max(mx, d)
			}
			var sum float64
			acc := make([]float64, hd)
			for p := 0; p < L; p++ {
				w := math.Exp(s[p] - mx)
				sum += w
				for i, x := range vv[row(p):][:hd] {
					acc[i] += w * float64(x)
				}
			}
			for i := range acc {
				out[(ti*heads+hh)*hd+i] = float32(acc[i] / sum)
			}
		}
	}
	return out
}

// randomQKV draws nq query elements and a cache's nkv K and V elements: Q
// and K of unit RMS (as after a QK-norm), V unnormalised and off-centre.
func randomQKV(r *rand.Rand, nq, nkv int) (q, k, v []float32) {
	q, k, v = make([]float32, nq), make([]float32, nkv), make([]float32, nkv)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	for i := range k {
		k[i] = float32(r.NormFloat64())
		v[i] = float32(r.NormFloat64()*2 + 0.5)
	}
	return q, k, v
}

// TestAttnMergeEmulated runs the merges of the decode attention's splits,
// attn_merge_splits and attn_merge_wide (ATTN_DYN's many units), under the
// CPU emulation (testdata/emu/attn_merge_main.cpp, head dim 64) over
// random partials of 2, 65 and 300 splits in 512 slots: both match a
// float64 merge of the same partials, and a token of one split is left
// to the attention (not written).
func TestAttnMergeEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	bin := emuBinary(t, "attnmerge", "testdata/emu/attn_merge_main.cpp", "../../../kernels/attention.cu")
	spec := emuBinary(t, "attnmergespec", "testdata/emu/attn_merge_spec_main.cpp", "testdata/emu/attn_merge_main.cpp",
		"../../../kernels/attention.cu")
	r := newRand(t)
	const hd, heads, zmax, chunk, ld = 64, 4, 512, 128, 64 + 4 // PART_LD
	splits := []int{2, 65, 300, 1}
	T := len(splits)
	pos := make([]int32, T)
	for i, nz := range splits {
		pos[i] = int32((nz-1)*chunk + r.IntN(chunk)) // nz splits of chunk positions
	}
	// Slots past a token's splits hold what an earlier step left: never
	// added (NaN sums), and a maximum above every split's, which a merge
	// that took it in (MS_SPEC requests them) would weigh by.
	part := make([]float32, T*heads*zmax*ld)
	for i := range part {
		part[i] = float32(math.NaN())
		if i%ld == hd {
			part[i] = 50
		}
	}
	want := make([]float32, T*heads*hd)
	for ti, nz := range splits {
		for h := 0; h < heads; h++ {
			pp := part[(ti*heads+h)*zmax*ld:]
			M := math.Inf(-1)
			for z := 0; z < nz; z++ {
				m, l := r.Float64()*10-5, 0.5+r.Float64()*10
				pp[z*ld+hd], pp[z*ld+hd+1] = float32(m), float32(l)
				for d := 0; d < hd; d++ {
					pp[z*ld+d] = float32(r.NormFloat64() * l)
				}
				M = math.Max(M, float64(pp[z*ld+hd]))
			}
			var L float64
			o := make([]float64, hd)
			for z := 0; z < nz; z++ {
				w := math.Exp(float64(pp[z*ld+hd]) - M)
				L += w * float64(pp[z*ld+hd+1])
				for d := range o {
					o[d] += w * float64(pp[z*ld+d])
				}
			}
			for d := range o {
				want[(ti*heads+h)*hd+d] = float32(o[d] / L)
			}
		}
	}
	var in bytes.Buffer
	for _, v := range []any{[]int32{int32(T), heads, zmax, chunk}, pos, part} {
		binary.Write(&in, binary.LittleEndian, v)
	}
	n := T - 1           // the last token's one split is the attention's to write
	var merged []float32 // attn_merge_splits's, without MS_SPEC
	for _, b := range []struct{ bin, tag string }{{bin, ""}, {spec, " (MS_SPEC)"}} {
		stdout, err := runEmu(b.bin, in.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"attn_merge_splits", "attn_merge_wide"} {
			name += b.tag
			got := make([]float32, T*heads*hd)
			if err := binary.Read(stdout, binary.LittleEndian, got); err != nil {
				t.Fatal(err)
			}
			for i, v := range got[n*heads*hd:] {
				if !math.IsNaN(float64(v)) {
					t.Fatalf("%s: one split's output element %d written (%v)", name, i, v)
				}
			}
			compare(t, name, got[:n*heads*hd], want[:n*heads*hd], 1e-6)
			if name == "attn_merge_splits" {
				merged = got
			} else if name == "attn_merge_splits (MS_SPEC)" {
				for i := range got[:n*heads*hd] {
					if math.Float32bits(got[i]) != math.Float32bits(merged[i]) {
						t.Fatalf("%s: element %d %v, without MS_SPEC %v", name, i, got[i], merged[i])
					}
				}
			}
		}
	}
}
