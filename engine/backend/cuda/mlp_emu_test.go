package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

// TestMLPFusedEmulated runs mlp_fused (kernels/mlp.cu) under the CPU
// emulation against a float64 MLP of the same bf16 weights: uneven shares
// of F, blocks with no rows at all (G > F), one and several warps a column
// slice, blocks in shuffled orders (the last to count itself writes the
// outputs, whichever it is), with and without the residual sum and the
// normalised x. Every output must be written, and each of two launches in
// a row must leave the reduction's scratch and counter at zero.
func TestMLPFusedEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	bin := emuBinary(t, "mlp", "testdata/emu/mlp_main.cpp", "../../../kernels/mlp.cu")
	r := newRand(t)
	for _, c := range []struct{ I, F, G, NW, resid, withH, seed int }{
		{512, 37, 5, 4, 1, 1, 7},  // NS 2, K 2: shares of 7 and 8 rows
		{768, 20, 3, 3, 1, 0, 0},  // NS 3, K 1, blocks in index order
		{256, 9, 12, 8, 0, 1, 3},  // G > F: three blocks own no row
		{1024, 64, 2, 8, 1, 1, 1}, // NS 4, K 2, 32 rows a block
	} {
		t.Run(fmt.Sprintf("I%d_F%d_G%d_NW%d_r%d_h%d", c.I, c.F, c.G, c.NW, c.resid, c.withH), func(t *testing.T) {
			I, F := c.I, c.F
			x, nw, resid := make([]float32, I), make([]float32, I), make([]float32, I)
			for i := range x {
				x[i] = float32(r.NormFloat64())
				nw[i] = 0.5 + r.Float32()
				resid[i] = float32(r.NormFloat64())
			}
			bf := func(scale float64) []uint16 {
				w := make([]uint16, F*I)
				for i := range w {
					w[i] = bf16Bits(float32(r.NormFloat64() * scale))
				}
				return w
			}
			wg, wu, wdt := bf(0.05), bf(0.05), bf(0.05)
			var in bytes.Buffer
			binary.Write(&in, binary.LittleEndian, []int32{int32(I), int32(F), int32(c.G), int32(c.NW), int32(c.resid), int32(c.withH), int32(c.seed)})
			for _, v := range []any{x, nw, wg, wu, wdt, resid} {
				binary.Write(&in, binary.LittleEndian, v)
			}
			out, err := runEmu(bin, in.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			// The float64 reference, and each output's Σ|terms| for its bound.
			var ss float64
			for _, v := range x {
				ss += float64(v) * float64(v)
			}
			inv := 1 / math.Sqrt(ss/float64(I)+1e-6)
			xh := make([]float64, I)
			for i := range xh {
				xh[i] = float64(x[i]) * inv * float64(nw[i])
			}
			dot := func(w []uint16, j int) (s, mag float64) {
				for i := 0; i < I; i++ {
					p := float64(bf16Float(w[j*I+i])) * xh[i]
					s += p
					mag += math.Abs(p)
				}
				return
			}
			gate, up, act := make([]float64, F), make([]float64, F), make([]float64, F)
			gmag, umag := make([]float64, F), make([]float64, F)
			for j := 0; j < F; j++ {
				gate[j], gmag[j] = dot(wg, j)
				up[j], umag[j] = dot(wu, j)
				act[j] = gate[j] / (1 + math.Exp(-gate[j])) * up[j]
			}
			m, mmag := make([]float64, I), make([]float64, I)
			for i := 0; i < I; i++ {
				for j := 0; j < F; j++ {
					p := act[j] * float64(bf16Float(wdt[j*I+i]))
					m[i] += p
					mmag[i] += math.Abs(p)
				}
			}
			check := func(run int, what string, got []float32, want, mag []float64, rel float64) {
				t.Helper()
				for i, g := range got {
					if math.IsNaN(float64(g)) || math.Abs(float64(g)-want[i]) > rel*mag[i]+1e-6 {
						t.Fatalf("launch %d: %s[%d] = %v, want %v (Σ|terms| %.3g)", run, what, i, g, want[i], mag[i])
					}
				}
			}
			for run := 0; run < 2; run++ {
				read := emuFloats(t, out)
				g, u, a, gm, gs, gh := read(F), read(F), read(F), read(I), read(I), read(I)
				acc := read(I)
				var cnt int32
				if err := binary.Read(out, binary.LittleEndian, &cnt); err != nil {
					t.Fatal(err)
				}
				check(run, "gate", g, gate, gmag, 1e-5)
				check(run, "up", u, up, umag, 1e-5)
				amag := make([]float64, F)
				for j := range amag {
					// silu′ is at most ~1.1: the act's error follows gate's and up's.
					amag[j] = 2 * (gmag[j]*math.Abs(up[j]) + umag[j]*math.Abs(gate[j]) + 1e-3)
				}
				check(run, "act", a, act, amag, 1e-5)
				check(run, "m", gm, m, mmag, 1e-4)
				if c.resid == 1 {
					want, mag := make([]float64, I), make([]float64, I)
					for i := range want {
						want[i] = float64(resid[i]) + m[i]
						mag[i] = math.Abs(float64(resid[i])) + mmag[i]
					}
					check(run, "sum", gs, want, mag, 1e-4)
				} else {
					for i, v := range gs {
						if !math.IsNaN(float64(v)) {
							t.Fatalf("launch %d: sum[%d] written (%v) without a residual", run, i, v)
						}
					}
				}
				for i, v := range gh {
					if c.withH == 0 {
						if !math.IsNaN(float64(v)) {
							t.Fatalf("launch %d: h[%d] written (%v) without h", run, i, v)
						}
						continue
					}
					if d := math.Abs(float64(v) - xh[i]); math.IsNaN(float64(v)) || d > 1e-5*math.Abs(xh[i])+1e-6 {
						t.Fatalf("launch %d: h[%d] = %v, want %v", run, i, v, xh[i])
					}
				}
				for i, v := range acc {
					if v != 0 {
						t.Fatalf("launch %d left acc[%d] = %v", run, i, v)
					}
				}
				if cnt != 0 {
					t.Fatalf("launch %d left the counter at %d", run, cnt)
				}
			}
		})
	}
}
