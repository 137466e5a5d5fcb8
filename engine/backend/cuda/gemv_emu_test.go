package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemvWideEmulated runs kernels/gemv.cu's fused decode products under
// the CPU emulation (testdata/emu/gemv_main.cpp): the plain kernel and its
// split-K form (INFERNIX_CUDA_GEMV_WIDE) with S slices, the latter twice
// with the blocks in different orders, for every mode (q|k|v with the norm
// prologue, SwiGLU, residual add) at uneven slices and row counts. The
// results must match a float64 reference, every output must be written,
// the two block orders must agree bit for bit (the last block of a group
// adds the partials in slice order, whichever it is), and the counters
// must be left at zero for the next launch. The GPU's own memory model and
// speed are TestFused*'s and the bench's to check.
func TestGemvWideEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	bin := emuBinary(t, "gemv", "testdata/emu/gemv_main.cpp", "../../../kernels/gemv.cu")
	// Variants that add in the default's order must match its bytes; GF_KS
	// adds in another and is checked against the reference instead.
	variants := []gemvEmuVariant{
		{"GF_RW=1 GF_U=8 GF_UR=16", emuBinary(t, "gemv-rw1-u8", "testdata/emu/gemv_variant_main.cpp", "testdata/emu/gemv_main.cpp", "../../../kernels/gemv.cu"), true, false},
		{"GF_PIPE=1 GF_U=2 GF_UR=3", emuBinary(t, "gemv-pipe-u2", "testdata/emu/gemv_pipe_main.cpp", "testdata/emu/gemv_main.cpp", "../../../kernels/gemv.cu"), true, false},
		{"GF_KS=4 GF_KSR=2 GF_KSS=2 GF_U=1", emuBinary(t, "gemv-ks4", "testdata/emu/gemv_ks_main.cpp", "testdata/emu/gemv_main.cpp", "../../../kernels/gemv.cu"), false, false},
		{"GF_XSH=1 GF_U=3", emuBinary(t, "gemv-xsh", "testdata/emu/gemv_xsh_main.cpp", "testdata/emu/gemv_main.cpp", "../../../kernels/gemv.cu"), true, true},
		{"GF_TMA=1 GF_TS=3 GF_TC=256", emuBinary(t, "gemv-tma", "testdata/emu/gemv_tma_main.cpp", "testdata/emu/gemv_main.cpp", "../../../kernels/gemv.cu"), true, false},
	}
	r := newRand(t)
	for _, c := range []struct {
		mode, norm, n int
		O             [3]int
	}{
		{epiNone, 1, 3, [3]int{48, 17, 40}}, // q|k|v: norm prologue, three products
		{epiNone, 0, 1, [3]int{33, 1, 1}},
		{epiResid, 0, 1, [3]int{40, 1, 1}}, // o_proj / down + residual
		{epiResid, 1, 1, [3]int{24, 1, 1}},
		{epiSwiGLU, 1, 2, [3]int{21, 21, 1}}, // gate|up + SwiGLU
	} {
		// Uneven slices (2056 = 768 + 768 + 520), whole ones, several rows.
		for _, s := range []struct{ T, I, S int }{{1, 2056, 3}, {1, 1024, 4}, {3, 2056, 2}} {
			R := [4]int{1, 2, 4, 8}[gemvIndex(s.T)]
			t.Run(fmt.Sprintf("m%d_n%d_T%d_I%d_S%d", c.mode, c.norm, s.T, s.I, s.S), func(t *testing.T) {
				gemvWideCase(t, bin, variants, r, c.mode, c.norm, c.n, c.O, R, s.T, s.I, s.S)
			})
		}
	}
}

// gemvEmuPasses is how many runs gemv_main.cpp makes of a case: plain,
// split-K, split-K with the blocks shuffled, plain looped (GemvP.nvb).
const gemvEmuPasses = 4

// gemvEmuVariant is a build of the emulation with other tunables
// (gemvf_variant.go).
type gemvEmuVariant struct {
	name, bin string
	exact     bool // adds in the default's order: byte-identical output
	looped    bool // changes the looped pass: runs it too (every pass)
}

// gemvWideCase runs one case through bin and checks it, then through each
// of variants: the exact ones' outputs must be byte-identical, the others'
// pass the same checks against the reference.
func gemvWideCase(t *testing.T, bin string, variants []gemvEmuVariant, r *rand.Rand, mode, norm, n int, O [3]int, R, T, I, S int) {
	x := make([]float32, T*I)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	nw := make([]float32, I)
	for i := range nw {
		nw[i] = 0.5 + r.Float32()
	}
	w := make([][]uint16, n)
	for j := range w {
		w[j] = make([]uint16, (O[j]*I+1)&^1)
		for i := range w[j] {
			w[j][i] = bf16Bits(float32(r.NormFloat64() * 0.05))
		}
	}
	aux := make([]float32, T*O[0])
	for i := range aux {
		aux[i] = float32(r.NormFloat64())
	}
	runBin := func(b string, passes int) []byte {
		var in bytes.Buffer
		binary.Write(&in, binary.LittleEndian, []int32{int32(mode), int32(norm), int32(R), int32(T), int32(I), int32(S), int32(n),
			int32(O[0]), int32(O[1]), int32(O[2]), int32(passes)})
		binary.Write(&in, binary.LittleEndian, x)
		binary.Write(&in, binary.LittleEndian, nw)
		for _, wj := range w {
			binary.Write(&in, binary.LittleEndian, wj)
		}
		binary.Write(&in, binary.LittleEndian, aux)
		out, err := runEmu(b, in.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	// The default runs every pass; the variants the plain and split-K ones
	// (their tunables apply there; block order is the default's to check)
	// and the looped one where they change it, which must match the start
	// of the default's.
	outBytes := runBin(bin, gemvEmuPasses)
	var inexact [][]byte
	for _, v := range variants {
		passes := 2
		if v.looped {
			passes = gemvEmuPasses
		}
		out := runBin(v.bin, passes)
		if !v.exact {
			inexact = append(inexact, out)
			continue
		}
		if len(out) == 0 || !bytes.HasPrefix(outBytes, out) {
			i := 0
			for i < len(out) && i < len(outBytes) && out[i] == outBytes[i] {
				i++
			}
			t.Errorf("%s: output differs from the default's at byte %d of %d", v.name, i, len(outBytes))
		}
	}
	gemvWideCheck(t, bytes.NewBuffer(outBytes), gemvEmuPasses, x, nw, w, aux, mode, norm, n, O, T, I)
	for _, out := range inexact {
		gemvWideCheck(t, bytes.NewBuffer(out), 2, x, nw, w, aux, mode, norm, n, O, T, I)
	}
}

// gemvWideCheck reads one run of the emulation (its plain, wide,
// shuffled-wide and looped passes) and checks every output against
// float64; the looped plain pass (INFERNIX_CUDA_GEMV_WAVE) must match the
// plain one bit for bit.
func gemvWideCheck(t *testing.T, stdout *bytes.Buffer, passes int, x, nw []float32, w [][]uint16, aux []float32, mode, norm, n int, O [3]int, T, I int) {

	// float64 reference.
	inv := make([]float64, T)
	hRef := make([]float32, T*I)
	for rr := 0; rr < T; rr++ {
		inv[rr] = 1
		if norm == 1 {
			var ss float64
			for i := 0; i < I; i++ {
				ss += float64(x[rr*I+i]) * float64(x[rr*I+i])
			}
			inv[rr] = 1 / math.Sqrt(ss/float64(I)+1e-6)
		}
		for i := 0; i < I; i++ {
			hRef[rr*I+i] = float32(float64(x[rr*I+i]) * inv[rr] * float64(nw[i]))
		}
	}
	prod := func(j int) []float32 {
		o := make([]float32, T*O[j])
		for rr := 0; rr < T; rr++ {
			for k := 0; k < O[j]; k++ {
				var s float64
				for i := 0; i < I; i++ {
					a := float64(x[rr*I+i])
					if norm == 1 {
						a *= float64(nw[i])
					}
					s += a * float64(bf16Float(w[j][k*I+i]))
				}
				o[rr*O[j]+k] = float32(s * inv[rr])
			}
		}
		return o
	}
	want := make([][]float32, n)
	for j := range want {
		want[j] = prod(j)
	}
	var auxRef, sumRef []float32
	switch mode {
	case epiSwiGLU:
		for i := range want[0] {
			g, u := float64(want[0][i]), float64(want[1][i])
			auxRef = append(auxRef, float32(g/(1+math.Exp(-g))*u))
		}
	case epiResid:
		for i := range want[0] {
			sumRef = append(sumRef, aux[i]+want[0][i])
		}
	}

	groups := 0
	for j := 0; j < n; j++ {
		if mode == epiSwiGLU {
			groups = (O[0] + 7) / 8
			break
		}
		groups += (O[j] + 15) / 16
	}
	read := func(k int) []float32 {
		v := make([]float32, k)
		if err := binary.Read(stdout, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	runs := make([][][]float32, passes)
	for pass := range runs {
		var got [][]float32
		for j := 0; j < n; j++ {
			got = append(got, read(T*O[j]))
		}
		h, a, s := read(T*I), read(T*O[0]), read(T*O[0])
		cnt := make([]int32, groups)
		if err := binary.Read(stdout, binary.LittleEndian, cnt); err != nil {
			t.Fatal(err)
		}
		name := [4]string{"plain", "wide", "wide-shuffled", "plain-looped"}[pass]
		for j := 0; j < n; j++ {
			compare(t, fmt.Sprintf("%s out%d", name, j), got[j], want[j], 1e-5)
		}
		if norm == 1 {
			compare(t, name+" h", h, hRef, 1e-5)
		}
		switch mode {
		case epiSwiGLU:
			compare(t, name+" swiglu", a, auxRef, 1e-5)
		case epiResid:
			compare(t, name+" sum", s, sumRef, 1e-5)
		}
		for g, c := range cnt {
			if (pass == 1 || pass == 2) && c != 0 {
				t.Errorf("%s: counter of group %d left at %d", name, g, c)
			}
		}
		runs[pass] = append(append(got, h, a), s)
	}
	for _, p := range [][2]int{{1, 2}, {0, 3}} {
		if p[1] >= passes {
			continue
		}
		a, b := runs[p[0]], runs[p[1]]
		for i := range a {
			for k := range a[i] {
				if math.Float32bits(a[i][k]) != math.Float32bits(b[i][k]) {
					t.Fatalf("output %d element %d: %v in one block order (pass %d), %v in another (pass %d)", i, k, a[i][k], p[0], b[i][k], p[1])
				}
			}
		}
	}
}

// bf16Bits rounds to the nearest bf16 (finite values).
func bf16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

func bf16Float(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
