package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

// TestAttnPrepFoldEmulated runs the decode attention on the tensor cores
// with the q/k preparation (QK-norm, RoPE, KV store) as its own kernel
// (attn_prep, then attn_decode_tc) and folded in (attn_decode_tc_prep),
// under the CPU emulation (testdata/emu/attn_prep_main.cpp, head dim 64, 4
// query heads per KV head), blocks in shuffled orders, for a bf16 and an
// f16 cache, with the norms and a full RoPE and without norms and with a
// partial one, split over many blocks and in one. For each case:
//   - the fold leaves every output bit for bit as the two kernels do: the
//     attention's output, q and k in their buffers, the whole cache (the
//     new positions stored, nothing else touched) and the split counters
//     (zero), and likewise for attn_decode_tc2 (the transposed products)
//     and its fold, whose output is attn_decode_tc's within the tensor
//     cores' rounding;
//   - with splits of 2 tiles, the fold's units handed out to 2 blocks a
//     token and KV head (ATTN_DYN, testdata/emu/attn_prep_dyn_main.cpp)
//     leave the same bits, and the counters at zero; with ATTN_ACC
//     (testdata/emu/attn_prep_acc_main.cpp: a block's units added into one
//     partial) the same bits but the output, which is the defaults' within
//     the tensor cores' rounding;
//   - attn_prep's q and k match a float64 reference of the norm and RoPE,
//     and the stored position holds that k and the raw v, rounded to the
//     cache's type;
//   - the attention's output matches a float64 reference over the cache's
//     own elements and the prepared q.
func TestAttnPrepFoldEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	bin := emuBinary(t, "attnprep", "testdata/emu/attn_prep_main.cpp", "../../../kernels/attention.cu")
	// The same with the opt-in merge and fold paths (DM_ASYNC, ATTN_NEWROW),
	// which must give the same bits.
	optBin := emuBinary(t, "attnprepopt", "testdata/emu/attn_prep_opt_main.cpp", "testdata/emu/attn_prep_main.cpp",
		"../../../kernels/attention.cu")
	// The fold's units handed out to fewer blocks (ATTN_DYN), which must
	// give the same bits too.
	dynBin := emuBinary(t, "attnprepdyn", "testdata/emu/attn_prep_dyn_main.cpp", "testdata/emu/attn_prep_main.cpp",
		"../../../kernels/attention.cu")
	accBin := emuBinary(t, "attnprepacc", "testdata/emu/attn_prep_acc_main.cpp", "testdata/emu/attn_prep_main.cpp",
		"../../../kernels/attention.cu")
	r := newRand(t)
	const hd, g, kvh, pool, maxpos = 64, 4, 2, 16, 768
	heads := kvh * g
	tabs, tokTab := threeSequences(r, pool)
	// One decode token each: deep in a block, first of a block, first of all.
	pos := []int32{700, 64, 0}
	T := len(pos)
	q, kf, vf := randomQKV(r, T*heads*hd, pool*kvh*64*hd)
	k, v := make([]float32, T*kvh*hd), make([]float32, T*kvh*hd)
	for i := range k {
		k[i] = float32(r.NormFloat64()*1.5 + 0.2)
		v[i] = float32(r.NormFloat64()*2 - 0.3)
	}
	qw, kw := make([]float32, hd), make([]float32, hd)
	for i := range qw {
		qw[i] = float32(1 + 0.3*r.NormFloat64())
		kw[i] = float32(1 + 0.3*r.NormFloat64())
	}
	const scale, qeps, keps = float32(0.125), float32(1e-6), float32(1e-5)

	// prep is the float64 reference of one row's norm and RoPE.
	prep := func(row, w []float32, eps float32, p, half int, cos, sin []float32) []float32 {
		x := make([]float64, hd)
		for i, a := range row {
			x[i] = float64(a)
		}
		if w != nil {
			var ss float64
			for _, a := range x {
				ss += a * a
			}
			inv := 1 / math.Sqrt(ss/hd+float64(eps))
			for i := range x {
				x[i] *= inv * float64(w[i])
			}
		}
		y := append([]float64(nil), x...)
		for i := 0; i < half; i++ {
			c, s := float64(cos[p*half+i]), float64(sin[p*half+i])
			y[i] = x[i]*c - x[i+half]*s
			y[i+half] = x[i+half]*c + x[i]*s
		}
		out := make([]float32, hd)
		for i, a := range y {
			out[i] = float32(a)
		}
		return out
	}

	for _, kt := range []int{0, 1} {
		for _, rc := range []struct {
			norm bool
			half int
		}{{true, hd / 2}, {false, hd / 4}} {
			half := rc.half
			cos, sin := make([]float32, maxpos*half), make([]float32, maxpos*half)
			for p := 0; p < maxpos; p++ {
				for i := 0; i < half; i++ {
					a := float64(p) * math.Pow(10000, -2*float64(i)/hd)
					cos[p*half+i], sin[p*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
				}
			}
			for _, c := range []struct{ chunk, zmax int }{{64, 16}, {128, 8}, {1024, 1}} {
				name := fmt.Sprintf("%s_norm%v_half%d_chunk%d", [2]string{"bf16", "f16"}[kt], rc.norm, half, c.chunk)
				t.Run(name, func(t *testing.T) {
					var in bytes.Buffer
					w := func(v any) { binary.Write(&in, binary.LittleEndian, v) }
					norm := int32(0)
					if rc.norm {
						norm = 1
					}
					w([]int32{int32(kt), kvh, int32(T), pool, int32(c.zmax), int32(c.chunk), int32(len(tabs)), int32(half), norm, maxpos})
					w(pos)
					w(tokTab)
					w(tabs)
					for _, x := range [][]float32{q, k, v, qw, kw, cos, sin, {scale, qeps, keps}, kf, vf} {
						w(x)
					}
					type result struct {
						out, q, k []float32
						kc, vc    []uint16
						cnt       []int32
					}
					run := func(bin string) (res [4]result) { // separate, folded; then the same with attn_decode_tc2
						stdout, err := runEmu(bin, in.Bytes())
						if err != nil {
							t.Fatal(err)
						}
						for i := range res {
							rs := &res[i]
							rs.out, rs.q, rs.k = make([]float32, len(q)), make([]float32, len(q)), make([]float32, len(k))
							rs.kc, rs.vc, rs.cnt = make([]uint16, len(kf)), make([]uint16, len(vf)), make([]int32, T*kvh)
							for _, x := range []any{rs.out, rs.q, rs.k, rs.kc, rs.vc, rs.cnt} {
								if err := binary.Read(stdout, binary.LittleEndian, x); err != nil {
									t.Fatal(err)
								}
							}
						}
						return res
					}
					res := run(bin)
					var alts [][4]result
					if c.chunk == 128 { // the splits that outnumber the dynamic blocks
						alts = append(alts, run(dynBin))
					}
					if kt == 1 && rc.norm { // one format is enough for the opt-in paths (the test's time)
						alts = append(alts, run(optBin))
					}
					for _, opt := range alts {
						for i := range res {
							a, b := res[i], opt[i]
							bq := b.q
							if i%2 == 1 { // folded, merged by attn_merge_splits: q is left as it was given
								if c.zmax > 1 {
									for j := range q {
										if math.Float32bits(b.q[j]) != math.Float32bits(q[j]) {
											t.Fatalf("deferred merge: q element %d changed", j)
										}
									}
								}
								bq = a.q
							}
							sameFold(t, a.out, b.out, a.q, bq, a.k, b.k, a.kc, b.kc, a.vc, b.vc, a.cnt, b.cnt)
						}
					}
					if c.chunk == 128 {
						// ATTN_ACC: the fold on the tensor cores (way 1) adds
						// units in another grouping; the rest is untouched.
						acc := run(accBin)
						tol := [2]float64{tcTolBF16, tcTolF16}[kt]
						for i := range res {
							a, b := res[i], acc[i]
							bq, bout := b.q, b.out
							if i%2 == 1 {
								bq = a.q
							}
							if i == 1 {
								compare(t, "ATTN_ACC", b.out, a.out, tol)
								bout = a.out
							}
							sameFold(t, a.out, bout, a.q, bq, a.k, b.k, a.kc, b.kc, a.vc, b.vc, a.cnt, b.cnt)
						}
					}
					for _, pair := range [][2]int{{0, 1}, {2, 3}} {
						sep, fold := res[pair[0]], res[pair[1]]
						sameFold(t, sep.out, fold.out, sep.q, fold.q, sep.k, fold.k, sep.kc, fold.kc, sep.vc, fold.vc, sep.cnt, fold.cnt)
					}
					// attn_decode_tc2 adds in another order: its output is the
					// default's within the tensor cores' rounding.
					compare(t, "attn_decode_tc2", res[2].out, res[0].out, [2]float64{tcTolBF16, tcTolF16}[kt])
					sep, fold := res[0], res[1]
					// The prep against float64, and what was stored.
					var nqw, nkw []float32
					if rc.norm {
						nqw, nkw = qw, kw
					}
					enc := func(f float32) uint16 {
						if kt == 1 {
							return f16Ref(f)
						}
						return bf16Bits(f)
					}
					dec := func(h uint16) float32 {
						if kt == 1 {
							return f16Float(h)
						}
						return bf16Float(h)
					}
					wantQ, wantK := make([]float32, len(q)), make([]float32, len(k))
					kc := append([]uint16(nil), fold.kc...)
					for ti := 0; ti < T; ti++ {
						p := int(pos[ti])
						for hh := 0; hh < heads; hh++ {
							copy(wantQ[(ti*heads+hh)*hd:], prep(q[(ti*heads+hh)*hd:][:hd], nqw, qeps, p, half, cos, sin))
						}
						for h := 0; h < kvh; h++ {
							kr := prep(k[(ti*kvh+h)*hd:][:hd], nkw, keps, p, half, cos, sin)
							copy(wantK[(ti*kvh+h)*hd:], kr)
							slot := ((int(tabs[int(tokTab[ti])+p/64])*kvh+h)*64 + p%64) * hd
							for i := 0; i < hd; i++ {
								if got := dec(fold.vc[slot+i]); got != dec(enc(v[(ti*kvh+h)*hd+i])) {
									t.Fatalf("V stored at token %d head %d element %d: %v, want %v", ti, h, i, got, v[(ti*kvh+h)*hd+i])
								}
								if d := math.Abs(float64(dec(fold.kc[slot+i])) - float64(kr[i])); d > 1e-2*math.Max(1, math.Abs(float64(kr[i]))) {
									t.Fatalf("K stored at token %d head %d element %d: %v, want %v", ti, h, i, dec(fold.kc[slot+i]), kr[i])
								}
							}
						}
					}
					compare(t, "prepared q", sep.q, wantQ, 1e-5)
					compare(t, "prepared k", sep.k, wantK, 1e-5)
					// Elsewhere the cache is as it was.
					for i := range kc {
						p := i / hd % 64
						blk := i / (hd * 64 * kvh)
						stored := false
						for ti := 0; ti < T; ti++ {
							P := int(pos[ti])
							if P%64 == p && int(tabs[int(tokTab[ti])+P/64]) == blk {
								stored = true
							}
						}
						if !stored && (kc[i] != enc(kf[i]) || fold.vc[i] != enc(vf[i])) {
							t.Fatalf("cache element %d changed", i)
						}
					}

					// The attention over the cache as stored.
					kd, vd := make([]float32, len(fold.kc)), make([]float32, len(fold.vc))
					for i := range kd {
						kd[i], vd[i] = dec(fold.kc[i]), dec(fold.vc[i])
					}
					want := decodeAttentionRef(sep.q, kd, vd, pos, tokTab, tabs, kvh, g, hd, scale)
					compare(t, "attention", fold.out, want, [2]float64{tcTolBF16, tcTolF16}[kt])
				})
			}
		}
	}
}

// sameFold fails t unless two runs (the separate prep + attention and the
// folded kernel, or the defaults and the opt-in paths) left the same bits
// everywhere, and every split counter at zero.
func sameFold(t *testing.T, out, fout, q, fq, k, fk []float32, kc, fkc, vc, fvc []uint16, cnt, fcnt []int32) {
	t.Helper()
	for _, c := range []struct {
		what string
		a, b []float32
	}{{"out", out, fout}, {"q", q, fq}, {"k", k, fk}} {
		for i := range c.a {
			if math.Float32bits(c.a[i]) != math.Float32bits(c.b[i]) {
				t.Fatalf("%s: element %d is %v in the second run, %v in the first", c.what, i, c.b[i], c.a[i])
			}
		}
	}
	for _, c := range []struct {
		what string
		a, b []uint16
	}{{"K cache", kc, fkc}, {"V cache", vc, fvc}} {
		for i := range c.a {
			if c.a[i] != c.b[i] {
				t.Fatalf("%s: element %d is %#04x in the second run, %#04x in the first", c.what, i, c.b[i], c.a[i])
			}
		}
	}
	for i := range cnt {
		if cnt[i] != 0 || fcnt[i] != 0 {
			t.Fatalf("counter %d left at %d / %d", i, cnt[i], fcnt[i])
		}
	}
}
