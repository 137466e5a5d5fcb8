package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cpu"
)

// recCase is a linear-attention layer's shapes and a batch of sequence runs
// (each fresh at position 0 or continuing its slot's state).
type recCase struct {
	KD, VD, KH, VH, K, slots int
	runs                     []recRun
}

type recRun struct {
	slot, pos, n int
}

func (c recCase) name() string {
	return fmt.Sprintf("kd%d_vd%d_kh%d_vh%d_k%d_runs%v", c.KD, c.VD, c.KH, c.VH, c.K, c.runs)
}

var recCases = []recCase{
	{KD: 16, VD: 16, KH: 2, VH: 4, K: 4, slots: 4, runs: []recRun{{2, 0, 5}, {0, 9, 1}, {3, 3, 3}}},
	{KD: 128, VD: 128, KH: 1, VH: 2, K: 4, slots: 2, runs: []recRun{{1, 7, 2}, {0, 0, 1}}},
	{KD: 64, VD: 32, KH: 2, VH: 2, K: 2, slots: 3, runs: []recRun{{2, 4, 3}}},
	{KD: 256, VD: 24, KH: 1, VH: 1, K: 3, slots: 2, runs: []recRun{{1, 0, 2}, {0, 5, 1}}},
	{KD: 8, VD: 8, KH: 1, VH: 2, K: 4, slots: 1, runs: []recRun{{0, 2, 4}}},
	{KD: 32, VD: 40, KH: 2, VH: 4, K: 4, slots: 5, runs: []recRun{{4, 0, 1}, {1, 1, 1}, {2, 30, 1}, {0, 0, 6}}},
	// One token a run (decode): the conv moves each state on itself.
	{KD: 128, VD: 64, KH: 2, VH: 4, K: 4, slots: 4, runs: []recRun{{3, 0, 1}, {1, 5, 1}, {0, 1, 1}}},
}

// batch returns the runs as an AttnBatch (sequence i in slot runs[i].slot).
func (c recCase) batch() (*backend.AttnBatch, int) {
	ab := &backend.AttnBatch{}
	for i, r := range c.runs {
		ab.Slots = append(ab.Slots, int32(r.slot))
		ab.Blocks = append(ab.Blocks, nil)
		for j := 0; j < r.n; j++ {
			ab.Seq = append(ab.Seq, int32(i))
			ab.Pos = append(ab.Pos, int32(r.pos+j))
		}
	}
	return ab, len(ab.Seq)
}

// recInputs are one layer's inputs, f32.
type recInputs struct {
	x, w, conv, a, b, aLog, dtBias, rec, normW, z, gate []float32
	eps                                                 float32
}

func (c recCase) inputs(r *rand.Rand) *recInputs {
	_, T := c.batch()
	C := 2*c.KH*c.KD + c.VH*c.VD
	rv := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * scale)
		}
		return v
	}
	return &recInputs{
		x: rv(T*C, 1), w: rv(C*c.K, 0.5), conv: rv(c.slots*(c.K-1)*C, 1),
		a: rv(T*c.VH, 1), b: rv(T*c.VH, 1.5), aLog: rv(c.VH, 0.5), dtBias: rv(c.VH, 0.5),
		rec: rv(c.slots*c.VH*c.VD*c.KD, 0.3), normW: rv(c.VD, 1), z: rv(T*c.VH*c.VD, 1), gate: rv(T*c.VH*c.VD, 1),
		eps: 1e-6,
	}
}

// recOutputs are what the layer's operators produce, f32.
type recOutputs struct {
	conv, convState, core, rec, normed, sig, slice []float32
}

// cpuRecurrent runs the operators on the CPU backend (the reference; the
// delta rule in its recurrent form).
func cpuRecurrent(t *testing.T, c recCase, in *recInputs) *recOutputs {
	ab, T := c.batch()
	C := 2*c.KH*c.KD + c.VH*c.VD
	vd := c.VH * c.VD
	tensor := func(rows, cols int, v []float32) backend.Tensor {
		x := cpuBe.Alloc(rows, cols)
		copy(x.(*cpu.Tensor).F32(), v)
		return x
	}
	f := func(x backend.Tensor) []float32 { return append([]float32(nil), x.(*cpu.Tensor).F32()...) }
	x, w := tensor(T, C, in.x), tensor(C, c.K, in.w)
	conv := tensor(c.slots*(c.K-1), C, in.conv)
	convOut := cpuBe.Alloc(T, C)
	cpuBe.CausalConv1D(convOut, x, w, conv, ab)
	rec := tensor(c.slots*vd, c.KD, in.rec)
	core := cpuBe.Alloc(T, vd)
	cpuBe.GatedDeltaRule(core, convOut, tensor(T, c.VH, in.a), tensor(T, c.VH, in.b), tensor(1, c.VH, in.aLog), tensor(1, c.VH, in.dtBias),
		rec, ab, backend.GDNSpec{KHeads: c.KH, VHeads: c.VH, KDim: c.KD, VDim: c.VD})
	normed := cpuBe.Alloc(T*c.VH, c.VD)
	cpuBe.RMSNormGated(normed, cpuBe.Reshape(core, T*c.VH, c.VD), tensor(T*c.VH, c.VD, in.z), tensor(1, c.VD, in.normW), in.eps)
	sig := cpuBe.Alloc(T, vd)
	cpuBe.MulSigmoid(sig, core, tensor(T, vd, in.gate))
	width := C/2 - 2
	sl := cpuBe.Alloc(T, 2*width)
	cpuBe.SliceCols(sl, x, 2, 1, width)
	return &recOutputs{f(convOut), f(conv), f(core), f(rec), f(normed), f(sig), f(sl)}
}

func (o *recOutputs) compare(t *testing.T, got *recOutputs, rel float64) {
	t.Helper()
	compare(t, "conv output", got.conv, o.conv, rel)
	compare(t, "conv state", got.convState, o.convState, rel)
	compare(t, "delta rule output", got.core, o.core, rel)
	compare(t, "recurrent state", got.rec, o.rec, rel)
	compare(t, "gated RMSNorm", got.normed, o.normed, rel)
	compare(t, "sigmoid gate", got.sig, o.sig, rel)
	compare(t, "column slice", got.slice, o.slice, 0)
}

// TestRecurrentEmulated runs kernels/recurrent.cu under the CPU emulation
// against the CPU backend: the conv and its state across fresh and
// continuing runs of several slots (and runs shorter than the kernel), the
// delta rule for every key head dim it is compiled for (rows split over 1 to
// 8 threads, blocks with rows past VD), and the gated norm, sigmoid gate
// and column slice.
func TestRecurrentEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	bin := emuBinary(t, "recurrent", "testdata/emu/recurrent_main.cpp", "../../../kernels/recurrent.cu")
	r := newRand(t)
	for _, nt := range []int{128, 32} {
		for _, c := range recCases {
			t.Run(fmt.Sprintf("%s_threads%d", c.name(), nt), func(t *testing.T) { emulateRecurrent(t, bin, r, c, nt) })
		}
	}
}

func emulateRecurrent(t *testing.T, bin string, r *rand.Rand, c recCase, nt int) {
	in := c.inputs(r)
	want := cpuRecurrent(t, c, in)
	ab, T := c.batch()
	table, nruns := runTable(nil, ab, T)
	C := 2*c.KH*c.KD + c.VH*c.VD
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, []int32{int32(T), int32(C), int32(c.K), int32(c.KH), int32(c.VH), int32(c.KD), int32(c.VD),
		int32(c.slots), int32(nruns), int32(len(table)), int32(nt)})
	binary.Write(&buf, binary.LittleEndian, table)
	binary.Write(&buf, binary.LittleEndian, in.eps)
	for _, v := range [][]float32{in.x, in.w, in.conv, in.a, in.b, in.aLog, in.dtBias, in.rec, in.normW, in.z, in.gate} {
		binary.Write(&buf, binary.LittleEndian, v)
	}
	stdout, err := runEmu(bin, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	rd := emuFloats(t, stdout)
	vd := c.VH * c.VD
	got := &recOutputs{conv: rd(T * C), convState: rd(len(in.conv)), core: rd(T * vd), rec: rd(len(in.rec)),
		normed: rd(T * vd), sig: rd(T * vd), slice: rd(T * (C - 4))}
	want.compare(t, got, 2e-6)
}
