package cuda

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// pcShape is one phase of a pchain chain (kernels/pchain.cu): O outputs
// over I inputs in S slices.
type pcShape struct{ O, I, S int }

// pchainReference computes the chain in float64 from the same bf16
// weights: each phase's input is the previous phase's output (its S
// partials added; the host's x0 first), scaled by 1/rms.
func pchainReference(shapes []pcShape, x0 []float32, w [][]uint16) [][]float64 {
	x := make([]float64, len(x0))
	for i, v := range x0 {
		x[i] = float64(v)
	}
	var outs [][]float64
	for p, s := range shapes {
		ss := 0.0
		for _, v := range x[:s.I] {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(s.I)+1e-6)
		out := make([]float64, s.O)
		for o := range out {
			a := 0.0
			for i := 0; i < s.I; i++ {
				a += x[i] * float64(bf16Float(w[p][o*s.I+i]))
			}
			out[o] = a * inv
		}
		outs = append(outs, out)
		x = out
	}
	return outs
}

// pchainError adds a phase's S partials of each output and returns the
// largest relative error against ref (relative to 1 + |ref|), or the first
// output with an unwritten (NaN) partial.
func pchainError(part []float32, s pcShape, ref []float64) (worst float64, unwritten int) {
	for o := 0; o < s.O; o++ {
		sum := 0.0
		for j := 0; j < s.S; j++ {
			v := float64(part[j*s.O+o])
			if math.IsNaN(v) {
				return 0, o
			}
			sum += v
		}
		worst = max(worst, math.Abs(sum-ref[o])/(1+math.Abs(ref[o])))
	}
	return worst, -1
}

// TestPchainEmulated runs the persistent product chain under the CPU
// emulation (one block of 16 warps, so that units wrap around the warps
// and phases have idle warps): every phase's outputs, their S partials
// added, must match a float64 reference, every partial must be written,
// every phase's counter must read one block, and the build that stops the
// stream at each phase boundary (PC_CROSS=0, another ring depth) must
// produce the same bytes: running ahead changes when weights arrive, never
// what is added. The bulk-copy form (PC_TMA=1) is checked the same way on
// shapes whose inputs are whole stages.
func TestPchainEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	bin := emuBinary(t, "pchain", "testdata/emu/pchain_main.cpp", "../../../kernels/pchain.cu")
	nocross := emuBinary(t, "pchain-nocross", "testdata/emu/pchain_nocross_main.cpp", "testdata/emu/pchain_main.cpp", "../../../kernels/pchain.cu")
	tma := emuBinary(t, "pchain-tma", "testdata/emu/pchain_tma_main.cpp", "testdata/emu/pchain_main.cpp", "../../../kernels/pchain.cu")
	r := newRand(t)
	// Each phase reads the first I of the previous one's outputs. Odd row
	// counts (a pair's second row past O), 2 and 3 slices, several units
	// a warp, and a last phase with fewer units than warps.
	pchainEmuCase(t, r, []string{bin, nocross}, []pcShape{{800, 512, 2}, {1030, 768, 3}, {1025, 256, 1}, {521, 1024, 1}, {300, 512, 2}, {9, 256, 1}})
	// PC_TMA (stages of 8 rows × 512 columns): row groups past O, 1 and 2
	// slices, a last phase of two row groups.
	pchainEmuCase(t, r, []string{tma}, []pcShape{{1030, 512, 1}, {520, 1024, 2}, {9, 512, 1}})
}

// pchainEmuCase runs shapes through each of bins (builds that must agree
// bit for bit) and checks the first's outputs against float64.
func pchainEmuCase(t *testing.T, r *rand.Rand, bins []string, shapes []pcShape) {
	t.Helper()
	x0 := make([]float32, shapes[0].I)
	for i := range x0 {
		x0[i] = float32(r.NormFloat64())
	}
	var in bytes.Buffer
	put := func(v ...int32) { binary.Write(&in, binary.LittleEndian, v) } //nolint:errcheck // bytes.Buffer
	put(int32(len(shapes)))
	for _, s := range shapes {
		put(int32(s.O), int32(s.I), int32(s.S))
	}
	binary.Write(&in, binary.LittleEndian, x0) //nolint:errcheck
	w := make([][]uint16, len(shapes))
	for p, s := range shapes {
		w[p] = make([]uint16, (s.O*s.I+1)&^1)
		for i := range w[p] {
			w[p][i] = uint16(math.Float32bits(float32(r.NormFloat64()*0.05)) >> 16)
		}
		binary.Write(&in, binary.LittleEndian, w[p]) //nolint:errcheck
	}
	ref := pchainReference(shapes, x0, w)
	outs := make([][]byte, len(bins))
	for k, b := range bins {
		got, err := runEmu(b, in.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		outs[k] = got.Bytes()
		if k > 0 && !bytes.Equal(outs[0], outs[k]) {
			t.Errorf("%s differs from %s's bytes", filepath.Base(b), filepath.Base(bins[0]))
		}
	}
	rd := bytes.NewReader(outs[0])
	for p, s := range shapes {
		part := make([]float32, s.S*s.O)
		if err := binary.Read(rd, binary.LittleEndian, part); err != nil {
			t.Fatal(err)
		}
		worst, unwritten := pchainError(part, s, ref[p])
		if unwritten >= 0 {
			t.Fatalf("phase %d: a partial of output %d not written", p, unwritten)
		}
		if worst > 1e-4 {
			t.Errorf("phase %d (%+v): max relative error %.2e against float64", p, s, worst)
		}
	}
	cnt := make([]uint32, len(shapes)+1)
	if err := binary.Read(rd, binary.LittleEndian, cnt); err != nil {
		t.Fatal(err)
	}
	if cnt[len(shapes)] != 0 {
		t.Errorf("stuck flag %d", cnt[len(shapes)])
	}
	for p, c := range cnt[:len(shapes)] {
		if c != 1 {
			t.Errorf("phase %d counter %d, want 1 (one block)", p, c)
		}
	}
}
