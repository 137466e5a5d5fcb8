package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

// TestGemmSkinnyEmulated runs gemm_skinny_n2 (kernels/gemv.cu) under the
// CPU emulation against float64 products of the same bf16 inputs: the
// mma's permuted k order must pair each weight with its own activation,
// each of up to three products must get its own blocks, every output of
// the T rows must be written and none past them.
func TestGemmSkinnyEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	bin := emuBinary(t, "skinny", "testdata/emu/skinny_main.cpp", "../../../kernels/gemv.cu")
	r := newRand(t)
	for _, c := range []struct {
		T, I int
		O    []int
	}{{9, 256, []int{1}}, {16, 512, []int{37}}, {12, 768, []int{16, 5, 40}}, {10, 256, []int{20, 33}}, {16, 2048, []int{33}}} {
		t.Run(fmt.Sprintf("T%d_I%d_O%v", c.T, c.I, c.O), func(t *testing.T) {
			x := make([]uint16, (c.T*c.I+1)&^1)
			for i := range x[:c.T*c.I] {
				x[i] = bf16Bits(float32(r.NormFloat64()))
			}
			var in bytes.Buffer
			hd := []int32{int32(c.T), int32(c.I), int32(len(c.O)), 0, 0, 0}
			for j, o := range c.O {
				hd[3+j] = int32(o)
			}
			binary.Write(&in, binary.LittleEndian, hd)
			binary.Write(&in, binary.LittleEndian, x)
			ws := make([][]uint16, len(c.O))
			for j, o := range c.O {
				ws[j] = make([]uint16, (o*c.I+1)&^1)
				for i := range ws[j][:o*c.I] {
					ws[j][i] = bf16Bits(float32(r.NormFloat64() * 0.05))
				}
				binary.Write(&in, binary.LittleEndian, ws[j])
			}
			stdout, err := runEmu(bin, in.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			for j, O := range c.O {
				got := make([]float32, (c.T+1)*O)
				if err := binary.Read(stdout, binary.LittleEndian, got); err != nil {
					t.Fatal(err)
				}
				for i, v := range got[c.T*O:] {
					if !math.IsNaN(float64(v)) {
						t.Fatalf("product %d: row %d (past T) element %d written: %v", j, c.T, i, v)
					}
				}
				w := ws[j]
				for n := 0; n < c.T; n++ {
					for o := 0; o < O; o++ {
						var s, mag float64
						for k := 0; k < c.I; k++ {
							p := float64(bf16Float(x[n*c.I+k])) * float64(bf16Float(w[o*c.I+k]))
							s += p
							mag += math.Abs(p)
						}
						g := float64(got[n*O+o])
						if math.IsNaN(g) || math.Abs(g-s) > 1e-5*mag+1e-30 {
							t.Fatalf("product %d token %d output %d: %v, want %v (Σ|terms| %.3g)", j, n, o, g, s, mag)
						}
					}
				}
			}
		})
	}
}
