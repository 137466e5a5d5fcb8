package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"unsafe"
)

// TestGemmSkinnyEmulated runs gemm_skinny (kernels/gemv.cu) under the CPU
// emulation against a float64 product of the same bf16 inputs: the mma's
// permuted k order must pair each weight with its own activation, every
// output of the T rows must be written and none past them.
func TestGemmSkinnyEmulated(t *testing.T) {
	if unsafe.Sizeof(int(0)) != 8 || !littleEndian() {
		t.Skip("the emulation's input layout assumes a little-endian 64-bit host")
	}
	bin := emuBinary(t, "skinny", "testdata/emu/skinny_main.cpp", "../../../kernels/gemv.cu")
	r := newRand(t)
	for _, c := range []struct{ T, I, O int }{{9, 256, 1}, {16, 512, 37}, {12, 768, 16}, {10, 256, 20}, {16, 2048, 33}} {
		t.Run(fmt.Sprintf("T%d_I%d_O%d", c.T, c.I, c.O), func(t *testing.T) {
			x, w := make([]uint16, (c.T*c.I+1)&^1), make([]uint16, (c.O*c.I+1)&^1)
			for i := range x[:c.T*c.I] {
				x[i] = bf16Bits(float32(r.NormFloat64()))
			}
			for i := range w[:c.O*c.I] {
				w[i] = bf16Bits(float32(r.NormFloat64() * 0.05))
			}
			var in bytes.Buffer
			binary.Write(&in, binary.LittleEndian, []int32{int32(c.T), int32(c.I), int32(c.O)})
			binary.Write(&in, binary.LittleEndian, x)
			binary.Write(&in, binary.LittleEndian, w)
			stdout, err := runEmu(bin, in.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, (c.T+1)*c.O)
			if err := binary.Read(stdout, binary.LittleEndian, got); err != nil {
				t.Fatal(err)
			}
			for i, v := range got[c.T*c.O:] {
				if !math.IsNaN(float64(v)) {
					t.Fatalf("row %d (past T) element %d written: %v", c.T, i, v)
				}
			}
			for n := 0; n < c.T; n++ {
				for o := 0; o < c.O; o++ {
					var s, mag float64
					for k := 0; k < c.I; k++ {
						p := float64(bf16Float(x[n*c.I+k])) * float64(bf16Float(w[o*c.I+k]))
						s += p
						mag += math.Abs(p)
					}
					g := float64(got[n*c.O+o])
					if math.IsNaN(g) || math.Abs(g-s) > 1e-5*mag+1e-30 {
						t.Fatalf("token %d output %d: %v, want %v (Σ|terms| %.3g)", n, o, g, s, mag)
					}
				}
			}
		})
	}
}
