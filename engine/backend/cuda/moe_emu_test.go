package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

// TestMoECombineRowsEmulated runs kernels/gemv.cu's moe_combine_rows (the
// grouped MoE path's combine) under the CPU emulation
// (testdata/emu/moe_main.cpp) on rows laid out by moePlan, next to the
// indexed path's moe_combine on the same values in pair order: the two must
// agree bit for bit (same fmaf sequence), match a float64 reference, write
// every output and read no padding row (those hold NaN).
func TestMoECombineRowsEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	bin := emuBinary(t, "moe", "testdata/emu/moe_main.cpp", "../../../kernels/gemv.cu")
	r := newRand(t)
	var p moePlan
	for _, c := range []struct{ T, K, E, H, nt int }{
		{9, 2, 8, 70, 64}, {40, 8, 8, 33, 32}, {33, 2, 64, 256, 256}, {20, 8, 64, 300, 256}, {1, 1, 1, 5, 32},
	} {
		t.Run(fmt.Sprintf("T%d_K%d_E%d_H%d_nt%d", c.T, c.K, c.E, c.H, c.nt), func(t *testing.T) {
			idx := skewedChoices(r, c.T, c.K, c.E, c.T%2 == 1)
			if err := p.build(idx, c.T, c.K, c.E, 8); err != nil {
				t.Fatal(err)
			}
			n, P := c.T*c.K, p.off[c.E]
			rowOf := p.words[P:]
			w := make([]float32, n)
			for i := range w {
				w[i] = r.Float32()
			}
			y := make([]float32, n*c.H)
			for i := range y {
				y[i] = float32(r.NormFloat64())
			}
			yg := make([]float32, P*c.H)
			for i := range yg {
				yg[i] = float32(math.NaN()) // padding rows
			}
			for q := 0; q < n; q++ {
				copy(yg[int(rowOf[q])*c.H:][:c.H], y[q*c.H:][:c.H])
			}
			var in bytes.Buffer
			binary.Write(&in, binary.LittleEndian, []int32{int32(c.T), int32(c.K), int32(c.H), int32(P), int32(c.nt)})
			binary.Write(&in, binary.LittleEndian, w)
			binary.Write(&in, binary.LittleEndian, rowOf)
			binary.Write(&in, binary.LittleEndian, y)
			binary.Write(&in, binary.LittleEndian, yg)
			stdout, err := runEmu(bin, in.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			pairs, rows := make([]float32, c.T*c.H), make([]float32, c.T*c.H)
			if err := binary.Read(stdout, binary.LittleEndian, pairs); err != nil {
				t.Fatal(err)
			}
			if err := binary.Read(stdout, binary.LittleEndian, rows); err != nil {
				t.Fatal(err)
			}
			want := make([]float32, c.T*c.H)
			for tok := 0; tok < c.T; tok++ {
				for j := 0; j < c.H; j++ {
					var s float64
					for k := 0; k < c.K; k++ {
						q := tok*c.K + k
						s += float64(w[q]) * float64(y[q*c.H+j])
					}
					want[tok*c.H+j] = float32(s)
				}
			}
			compare(t, "moe_combine", pairs, want, 1e-6)
			compare(t, "moe_combine_rows", rows, want, 1e-6)
			for i := range rows {
				if math.Float32bits(rows[i]) != math.Float32bits(pairs[i]) {
					t.Fatalf("element %d: moe_combine_rows %v, moe_combine %v", i, rows[i], pairs[i])
				}
			}
		})
	}
}
