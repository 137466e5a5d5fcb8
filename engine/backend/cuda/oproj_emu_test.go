package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

// TestAttnOProjEmulated runs attn_oproj (kernels/attention.cu: a decode
// token's split merge folded into the output projection) under the CPU
// emulation at head dims 128, 64 and 32: its o must be attn_merge_splits's,
// bit for bit (stale slots past the token's splits hold NaN sums and a
// maximum above every split's, as a growing context leaves them); where
// the context is one split it must take o as the attention left it; out
// must match a float64 product of the same bf16 weights and sum resid +
// out. Two launches in a row, the second with the heads along the grid's
// x (INFERNIX_CUDA_OPROJ=fold-heads) and the blocks in other orders, must
// give the same bits (the heads' shares add in head order, whichever
// block comes last) and leave every counter at zero.
func TestAttnOProjEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	bins := map[int]string{
		128: emuBinary(t, "attnoproj", "testdata/emu/attn_oproj_main.cpp", "../../../kernels/attention.cu"),
		64: emuBinary(t, "attnoproj64", "testdata/emu/attn_oproj64_main.cpp", "testdata/emu/attn_oproj_main.cpp",
			"../../../kernels/attention.cu"),
		32: emuBinary(t, "attnoproj32", "testdata/emu/attn_oproj32_main.cpp", "testdata/emu/attn_oproj_main.cpp",
			"../../../kernels/attention.cu"),
	}
	r := newRand(t)
	const opRows = 128 // OP_ROWS
	for _, c := range []struct{ hd, heads, zmax, nz, O, resid, seed int }{
		{128, 4, 16, 11, 256, 1, 5}, // Qwen3's head dim, 640 positions' splits
		{128, 3, 64, 64, 128, 0, 0}, // every slot used, no residual, blocks in index order
		{128, 2, 64, 37, 384, 1, 9}, // past the first batch of 16 sums
		{128, 5, 16, 1, 128, 1, 2},  // one split: o is the attention's
		{64, 4, 32, 20, 256, 1, 7},  // 8 lanes a row
		{64, 2, 8, 2, 128, 0, 3},
		{32, 8, 4, 3, 256, 1, 11}, // the small test models' shape
	} {
		t.Run(fmt.Sprintf("hd%d_h%d_z%d_nz%d_O%d_r%d", c.hd, c.heads, c.zmax, c.nz, c.O, c.resid), func(t *testing.T) {
			hd, heads, zmax, O, ld := c.hd, c.heads, c.zmax, c.O, c.hd+4 // PART_LD
			const chunk = 64
			pos := (c.nz-1)*chunk + r.IntN(chunk)
			part := make([]float32, heads*zmax*ld)
			for i := range part {
				part[i] = float32(math.NaN())
				if i%ld == hd {
					part[i] = 50
				}
			}
			for h := 0; h < heads; h++ {
				for z := 0; z < c.nz; z++ {
					pp := part[(h*zmax+z)*ld:]
					m, l := r.Float64()*10-5, 0.5+r.Float64()*10
					pp[hd], pp[hd+1] = float32(m), float32(l)
					for d := 0; d < hd; d++ {
						pp[d] = float32(r.NormFloat64() * l)
					}
				}
			}
			o0 := make([]float32, heads*hd)
			for i := range o0 {
				o0[i] = float32(math.NaN()) // never read where the merge writes o
				if c.nz == 1 {
					o0[i] = float32(r.NormFloat64())
				}
			}
			I := heads * hd
			w := make([]uint16, O*I)
			for i := range w {
				w[i] = bf16Bits(float32(r.NormFloat64() * 0.05))
			}
			resid := make([]float32, O)
			for i := range resid {
				resid[i] = float32(r.NormFloat64())
			}
			var in bytes.Buffer
			for _, v := range []any{[]int32{int32(heads), int32(zmax), chunk, int32(pos), int32(O), int32(c.resid), int32(c.seed)}, part, o0, w, resid} {
				binary.Write(&in, binary.LittleEndian, v)
			}
			stdout, err := runEmu(bins[hd], in.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			read := emuFloats(t, stdout)
			merged := read(I)
			if c.nz == 1 {
				merged = o0
			}
			want, mag := make([]float64, O), make([]float64, O)
			for row := 0; row < O; row++ {
				for k := 0; k < I; k++ {
					p := float64(bf16Float(w[row*I+k])) * float64(merged[k])
					want[row] += p
					mag[row] += math.Abs(p)
				}
			}
			var first []float32
			for run := 0; run < 2; run++ {
				o, out, sum := read(I), read(O), read(O)
				cnt := make([]int32, O/opRows)
				if err := binary.Read(stdout, binary.LittleEndian, cnt); err != nil {
					t.Fatal(err)
				}
				for i := range o {
					if math.Float32bits(o[i]) != math.Float32bits(merged[i]) {
						t.Fatalf("launch %d: o[%d] = %v, attn_merge_splits %v", run, i, o[i], merged[i])
					}
				}
				for i, g := range out {
					if math.IsNaN(float64(g)) || math.Abs(float64(g)-want[i]) > 1e-5*mag[i]+1e-6 {
						t.Fatalf("launch %d: out[%d] = %v, want %v (Σ|terms| %.3g)", run, i, g, want[i], mag[i])
					}
					s := sum[i]
					if c.resid == 0 {
						if !math.IsNaN(float64(s)) {
							t.Fatalf("launch %d: sum[%d] written (%v) without a residual", run, i, s)
						}
						continue
					}
					if ws := resid[i] + g; math.Float32bits(s) != math.Float32bits(ws) {
						t.Fatalf("launch %d: sum[%d] = %v, want resid + out = %v", run, i, s, ws)
					}
				}
				for i, v := range cnt {
					if v != 0 {
						t.Fatalf("launch %d left counter %d at %d", run, i, v)
					}
				}
				if run == 0 {
					first = out
					continue
				}
				for i := range out {
					if math.Float32bits(out[i]) != math.Float32bits(first[i]) {
						t.Fatalf("out[%d] = %v in the second launch, %v in the first (the blocks in another order)", i, out[i], first[i])
					}
				}
			}
		})
	}
}
