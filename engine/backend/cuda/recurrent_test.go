package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

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
	defer func(v int) { gdnNarrowFrom = v }(gdnNarrowFrom)
	for _, from := range []int{gdnNarrowFrom, 1} { // blocks of 128 threads for these short runs, then of 32
		gdnNarrowFrom = from
		for _, c := range recCases {
			t.Run(fmt.Sprintf("%s_from%d", c.name(), from), func(t *testing.T) { gpuRecurrentCase(t, b, r, c) })
		}
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

// gpuRecurrentCase checks one recCase on the GPU against the CPU, then a
// decode step of one token a run that continues from the states it left.
func gpuRecurrentCase(t *testing.T, b *Backend, r *rand.Rand, c recCase) {
	in := c.inputs(r)
	want := cpuRecurrent(t, c, in)
	got := gpuRecurrent(t, b, c, in)
	want.compare(t, got, 1e-5)
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
}

// TestRecurrentBench (INFERNIX_BENCH_GDN=1) times a Qwen3-Next linear
// attention layer's conv and delta rule (16 key heads, 32 value heads of
// 128): a 4,096-token prefill of one sequence, and decode steps of 1 and 16
// sequences; lines "recurrent bench ..." in the log.
func TestRecurrentBench(t *testing.T) {
	if os.Getenv("INFERNIX_BENCH_GDN") != "1" {
		t.Skip("set INFERNIX_BENCH_GDN=1")
	}
	b := gpu(t)
	s := backend.GDNSpec{KHeads: 16, VHeads: 32, KDim: 128, VDim: 128}
	const K, slots = 4, 16
	C := 2*s.KHeads*s.KDim + s.VHeads*s.VDim
	vd := s.VHeads * s.VDim
	w, _ := b.Upload("conv1d.weight", backend.F32, []int{C, 1, K}, f32bytes(make([]float32, C*K)))
	aLog, _ := b.Upload("A_log", backend.F32, []int{s.VHeads}, f32bytes(make([]float32, s.VHeads)))
	dtBias, _ := b.Upload("dt_bias", backend.F32, []int{s.VHeads}, f32bytes(make([]float32, s.VHeads)))
	conv := b.Alloc(slots*(K-1), C)
	rec := b.Alloc(slots*vd, s.KDim)
	for _, c := range []struct {
		name      string
		seqs, per int
	}{{"prefill 4096", 1, 4096}, {"prefill 512", 1, 512}, {"decode 1", 1, 1}, {"decode 16", 16, 1}} {
		T := c.seqs * c.per
		ab := &backend.AttnBatch{}
		for q := 0; q < c.seqs; q++ {
			ab.Blocks = append(ab.Blocks, nil)
			for i := 0; i < c.per; i++ {
				ab.Seq = append(ab.Seq, int32(q))
				ab.Pos = append(ab.Pos, int32(1+i)) // continuing: the states are read
			}
		}
		x, out := b.Alloc(T, C), b.Alloc(T, C)
		core, a, bt := b.Alloc(T, vd), b.Alloc(T, s.VHeads), b.Alloc(T, s.VHeads)
		run := func(conv1d, delta bool) time.Duration {
			var ts []time.Duration
			// On the device thread (no hand-over per call); the times
			// include the launches (~6 µs each).
			b.RunOnDeviceThread(func() {
				for i := 0; i < 7; i++ {
					b.sync()
					t0 := time.Now()
					if conv1d {
						b.CausalConv1D(out, x, w, conv, ab)
					}
					if delta {
						b.GatedDeltaRule(core, out, a, bt, aLog, dtBias, rec, ab, s)
					}
					b.sync()
					ts = append(ts, time.Since(t0))
				}
			})
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			return median(ts[2:])
		}
		us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
		tc := run(true, false)
		from := gdnNarrowFrom
		gdnNarrowFrom = math.MaxInt
		t128 := run(false, true)
		gdnNarrowFrom = 1
		t32 := run(false, true)
		gdnNarrowFrom = from
		t.Logf("recurrent bench %s: conv %.1f µs, delta rule %.1f µs in blocks of 128 threads (%.3f µs a token), %.1f µs in blocks of 32 (%.3f)",
			c.name, us(tc), us(t128), us(t128)/float64(c.per), us(t32), us(t32)/float64(c.per))
		for _, x := range []backend.Tensor{x, out, core, a, bt} {
			b.Free(x)
		}
	}
}
