package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/sample"
)

// sampleEmu builds kernels/sample.cu against the CPU emulation in
// testdata/emu with the host's C++ compiler, once per test binary (nofloor:
// with INFERNIX_CUDA_SAMPLE_FLOOR=0's defines); it skips the test where
// there is none.
func sampleEmu(t *testing.T, nofloor bool) string {
	if nofloor {
		return emuBinary(t, "sample_nofloor", "testdata/emu/sample_nofloor_main.cpp", "testdata/emu/sample_main.cpp", "../../../kernels/sample.cu")
	}
	return emuBinary(t, "sample", "testdata/emu/sample_main.cpp", "../../../kernels/sample.cu")
}

type emuBuild struct {
	once sync.Once
	bin  string
	err  error
}

var emuBuilds sync.Map // name → *emuBuild

// emuFloats returns a reader of an emulation's output: each call reads
// the next n little-endian float32s, failing the test where they are
// missing.
func emuFloats(t *testing.T, r io.Reader) func(n int) []float32 {
	return func(n int) []float32 {
		v := make([]float32, n)
		if err := binary.Read(r, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// runEmu runs an emulation binary on input and returns its stdout; the
// error names the binary and carries its stderr.
func runEmu(bin string, input []byte) (*bytes.Buffer, error) {
	cmd := exec.Command(bin)
	cmd.Stdin = bytes.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("emulated kernel %s: %v: %s", filepath.Base(bin), err, stderr.Bytes())
	}
	return &stdout, nil
}

// needEmuLayout skips t where the emulations' binary inputs (Go's int and
// byte order written as the C++ side reads them) do not hold: a host that
// is not little-endian and 64-bit.
func needEmuLayout(t *testing.T) {
	t.Helper()
	if unsafe.Sizeof(int(0)) != 8 || !littleEndian() {
		t.Skip("the emulation's input layout assumes a little-endian 64-bit host")
	}
}

// emuBinary builds testdata/emu's main (including the kernel sources
// deps) with the host's C++ compiler, once per test binary and name; it
// skips the test where there is no compiler. The emulated tests run in
// parallel (each runs its own processes), so that on a cold cache their
// builds overlap.
func emuBinary(t *testing.T, name, main string, deps ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("the emulated kernel takes seconds (-short)")
	}
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ to build the kernel's CPU emulation")
	}
	v, _ := emuBuilds.LoadOrStore(name, &emuBuild{})
	e := v.(*emuBuild)
	e.once.Do(func() {
		// Cached by the sources' hash, so that a run costs no compilation
		// unless they changed.
		h := sha256.New()
		for _, f := range append([]string{"testdata/emu/emu.h", "testdata/emu/prelude_emu.h", "../../../kernels/flash.cuh", "../../../kernels/route.cuh", main}, deps...) {
			data, err := os.ReadFile(f)
			if err != nil {
				e.err = err
				return
			}
			h.Write(data)
		}
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		dir = filepath.Join(dir, "infernix", "emu")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			e.err = err
			return
		}
		e.bin = filepath.Join(dir, fmt.Sprintf("%s-%x", name, h.Sum(nil)[:8]))
		if _, err := os.Stat(e.bin); err == nil {
			return
		}
		tmp := e.bin + fmt.Sprintf(".tmp%d", os.Getpid())
		// -fcf-protection=none: emu.h switches fibers' stacks with a return
		// that no call made, which a shadow stack would refuse.
		out, err := exec.Command(cxx, "-std=c++20", "-O2", "-fcf-protection=none", "-ffp-contract=off", "-I", "../../../kernels",
			"-o", tmp, main).CombinedOutput()
		if err != nil {
			os.Remove(tmp)
			e.err = fmt.Errorf("building the emulation: %v\n%s", err, out)
			return
		}
		e.err = os.Rename(tmp, e.bin)
	})
	if e.err != nil {
		t.Fatal(e.err)
	}
	return e.bin
}

// emuRunner serves rows with the emulated kernel, blocks of nt threads,
// through the same encoding and decoding as SampleRows.
func emuRunner(t *testing.T, nt int, nofloor bool) rowRunner {
	bin := sampleEmu(t, nofloor)
	return func(rows [][]float32, req []backend.SampleRequest, out []backend.SampleResult) error {
		var d sample.Draw
		words := encodeSample(req, len(rows[0]), nil, &d)
		var in bytes.Buffer
		binary.Write(&in, binary.LittleEndian, []int32{int32(len(rows)), int32(len(rows[0])), int32(nt), int32(len(words))})
		binary.Write(&in, binary.LittleEndian, words)
		for _, r := range rows {
			binary.Write(&in, binary.LittleEndian, r)
		}
		stdout, err := runEmu(bin, in.Bytes())
		if err != nil {
			return err
		}
		raw := make([]int32, len(rows)*sampleOutWords)
		if err := binary.Read(stdout, binary.LittleEndian, raw); err != nil {
			return err
		}
		decodeSample(raw, req, out)
		return nil
	}
}

// TestSampleKernelEmulated runs the device sampling checks on
// kernels/sample.cu compiled for the CPU (testdata/emu): the kernel's
// logic, the encoding of requests and the decoding of results, against
// engine/sample. What it cannot show (the GPU's own arithmetic, memory
// model and performance) TestSampleRows* check on a GPU.
func TestSampleKernelEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	for _, nofloor := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "nofloor"}[nofloor], func(t *testing.T) {
			run := emuRunner(t, 64, nofloor)
			r := newRand(t)
			t0 := time.Now()
			t.Run("greedy", func(t *testing.T) { checkGreedy(t, run, 1500, r) })
			t.Run("odd_vocab", func(t *testing.T) { checkGreedy(t, emuRunner(t, 96, nofloor), 37, r) })
			t.Run("distribution", func(t *testing.T) { checkDistribution(t, run, 2000, 8, 2, r) })
			// More tokens than the kernel sorts at once (SCAND, 2,048): a
			// selection that counted too few gathers a wrong set.
			t.Run("distribution_wide", func(t *testing.T) { checkDistribution(t, run, 4099, 2, 1, r) })
			t.Run("ties", func(t *testing.T) { checkTies(t, run, 2500, 4, r) })
			t.Run("masked", func(t *testing.T) { checkMasked(t, run, 3000, 2, r) })
			if os.Getenv("INFERNIX_EMU_LARGE") == "1" {
				// Qwen3's vocabulary: minutes under the emulation.
				const v = 151936
				t.Run("large_greedy", func(t *testing.T) { checkGreedy(t, run, v, r) })
				t.Run("large_distribution", func(t *testing.T) { checkDistribution(t, run, v, 2, 1, r) })
				t.Run("large_ties", func(t *testing.T) { checkTies(t, run, v, 2, r) })
				t.Run("large_masked", func(t *testing.T) { checkMasked(t, run, v, 8, r) })
			}
			t.Logf("emulated in %v", time.Since(t0).Round(time.Millisecond))
		})
	}
}

func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}
