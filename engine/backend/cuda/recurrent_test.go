package cuda

import (
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

// gpuRecurrent runs recCase's operators on the GPU backend, outputs
// poisoned first, in the order cpuRecurrent does.
func gpuRecurrent(t *testing.T, b *Backend, c recCase, in *recInputs) *recOutputs {
	ab, T := c.batch()
	C := 2*c.KH*c.KD + c.VH*c.VD
	vd := c.VH * c.VD
	tensor := func(rows, cols int, v []float32) backend.Tensor {
		x := b.Alloc(rows, cols)
		write(t, b, x, v)
		return x
	}
	outT := func(rows, cols int) backend.Tensor {
		x := b.Alloc(rows, cols)
		poison(b, x)
		return x
	}
	w, err := b.Upload("conv1d.weight", backend.F32, []int{C, 1, c.K}, f32bytes(in.w))
	if err != nil {
		t.Fatal(err)
	}
	x := tensor(T, C, in.x)
	conv := tensor(c.slots*(c.K-1), C, in.conv)
	convOut := outT(T, C)
	b.CausalConv1D(convOut, x, w, conv, ab)
	rec := tensor(c.slots*vd, c.KD, in.rec)
	core := outT(T, vd)
	aLog, _ := b.Upload("A_log", backend.F32, []int{c.VH}, f32bytes(in.aLog))
	dtBias, _ := b.Upload("dt_bias", backend.F32, []int{c.VH}, f32bytes(in.dtBias))
	b.GatedDeltaRule(core, convOut, tensor(T, c.VH, in.a), tensor(T, c.VH, in.b), aLog, dtBias, rec, ab,
		backend.GDNSpec{KHeads: c.KH, VHeads: c.VH, KDim: c.KD, VDim: c.VD, Chunk: 64})
	normed := outT(T*c.VH, c.VD)
	nw, _ := b.Upload("norm.weight", backend.F32, []int{c.VD}, f32bytes(in.normW))
	b.RMSNormGated(normed, b.Reshape(core, T*c.VH, c.VD), tensor(T*c.VH, c.VD, in.z), nw, in.eps)
	sig := outT(T, vd)
	b.MulSigmoid(sig, core, tensor(T, vd, in.gate))
	width := C/2 - 2
	sl := outT(T, 2*width)
	b.SliceCols(sl, x, 2, 1, width)
	return &recOutputs{read(t, b, convOut), read(t, b, conv), read(t, b, core), read(t, b, rec), read(t, b, normed), read(t, b, sig), read(t, b, sl)}
}

// TestRecurrentOps checks the hybrid models' operators on the GPU against
// the CPU backend (recCases: fresh and continuing runs, every compiled key
// head dim), then a decode step of one token a run that continues from the
// states the first call left, and the state rows' copies to and from the
// host.
func TestRecurrentOps(t *testing.T) {
	b := gpu(t)
	r := newRand(t)
	for _, c := range recCases {
		t.Run(c.name(), func(t *testing.T) {
			in := c.inputs(r)
			want := cpuRecurrent(t, c, in)
			got := gpuRecurrent(t, b, c, in)
			want.compare(t, got, 1e-5)

			// The next token of every run, from the states just computed.
			next := c
			next.runs = nil
			for _, run := range c.runs {
				next.runs = append(next.runs, recRun{run.slot, run.pos + run.n, 1})
			}
			in2 := next.inputs(r)
			in2.conv, in2.rec = want.convState, want.rec
			want2 := cpuRecurrent(t, next, in2)
			in2.conv, in2.rec = got.convState, got.rec
			want2.compare(t, gpuRecurrent(t, b, next, in2), 1e-5)
		})
	}
	t.Run("shapes", func(t *testing.T) {
		for _, c := range []struct {
			s  backend.GDNSpec
			ok bool
		}{
			{backend.GDNSpec{KHeads: 16, VHeads: 32, KDim: 128, VDim: 128}, true},
			{backend.GDNSpec{KHeads: 2, VHeads: 4, KDim: 16, VDim: 16}, true},
			{backend.GDNSpec{KHeads: 2, VHeads: 4, KDim: 48, VDim: 64}, false},
			{backend.GDNSpec{KHeads: 3, VHeads: 4, KDim: 64, VDim: 64}, false},
		} {
			if err := b.CheckGDN(c.s); (err == nil) != c.ok {
				t.Errorf("CheckGDN(%+v) = %v, want ok %v", c.s, err, c.ok)
			}
		}
	})
	t.Run("state rows", func(t *testing.T) {
		x := b.Alloc(6, 40)
		v := make([]float32, 3*40)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		b.WriteStateRows(x, 2, v)
		back := make([]float32, len(v))
		b.ReadStateRows(x, 2, back)
		compare(t, "state rows read back", back, v, 0)
		all := read(t, b, x)
		for i, f := range all {
			if in := i >= 2*40 && i < 5*40; !in && f != 0 {
				t.Fatalf("element %d outside the written rows is %v", i, f)
			}
		}
	})
}
