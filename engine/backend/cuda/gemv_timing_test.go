package cuda

import (
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
	"github.com/infernix/infernix/engine/model"
)

// warpTimes is one warp's timeline from a GF_TIMING kernel (kernels/gemv.cu):
// global-timer nanoseconds at entry, after its first weights were added,
// and at exit, and its SM.
type warpTimes struct {
	start, first, end uint64
	sm                uint32
}

// timelineStats summarises one launch's warps in microseconds from the
// first warp's start: when the last warp started, the median latency of
// the first weights, when the warps ended (10th, 50th, 90th percentile and
// the last), the span, and the span's read rate for bytes. ok is false if
// a warp recorded nothing.
type timelineStats struct {
	Warps                              int
	LastStart, FirstLoad               float64
	End10, End50, End90, EndLast, Tail float64 // Tail: EndLast − End90
	TBs                                float64
}

func summarise(ws []warpTimes, bytes int64) (timelineStats, bool) {
	if len(ws) == 0 {
		return timelineStats{}, false
	}
	t0 := uint64(math.MaxUint64)
	for _, w := range ws {
		if w.start == 0 || w.end < w.start || w.first != 0 && (w.first < w.start || w.first > w.end) {
			return timelineStats{}, false
		}
		t0 = min(t0, w.start)
	}
	us := func(t uint64) float64 { return float64(t-t0) / 1e3 }
	var starts, firsts, ends []float64
	for _, w := range ws {
		starts = append(starts, us(w.start))
		ends = append(ends, us(w.end))
		if w.first != 0 {
			firsts = append(firsts, float64(w.first-w.start)/1e3)
		}
	}
	sort.Float64s(starts)
	sort.Float64s(firsts)
	sort.Float64s(ends)
	pct := percentile
	s := timelineStats{Warps: len(ws), LastStart: starts[len(starts)-1], FirstLoad: pct(firsts, 0.5),
		End10: pct(ends, 0.1), End50: pct(ends, 0.5), End90: pct(ends, 0.9), EndLast: ends[len(ends)-1]}
	s.Tail = s.EndLast - s.End90
	if s.EndLast > 0 {
		s.TBs = float64(bytes) / (s.EndLast * 1e-6) / 1e12
	}
	return s, true
}

// benchGemvTiming (INFERNIX_BENCH_GEMV_TIMING=1) runs each decode product
// of cfg's shapes alone, one token, with GF_TIMING on: several copies of
// the weights in turn (more bytes than L2 holds), then five timed launches;
// res gets the launch with the median span per product.
func benchGemvTiming(b *Backend, cfg *model.Config, res map[string]any) {
	saved := b.gemvf
	v, err := parseGemvfVariant("GF_TIMING=1")
	if err == nil {
		err = b.useGemvfVariant(v)
	}
	if err != nil {
		panic(err)
	}
	defer func() {
		b.gemvfTimeline = 0
		if err := b.useGemvfVariant(saved); err != nil {
			panic(err)
		}
	}()
	var bufs []driver.DevPtr
	alloc := func(n uint64, what string) driver.DevPtr {
		p, err := b.malloc(n, what)
		if err != nil {
			panic(err)
		}
		bufs = append(bufs, p)
		return p
	}
	defer func() {
		for _, p := range bufs {
			b.free(p)
		}
	}()
	ws := &gpuRandomWeights{b: b}
	var weights []backend.Tensor
	defer func() {
		for _, w := range weights {
			b.Free(w)
		}
	}()
	weight := func(rows, cols int) *Tensor {
		w, err := ws.Tensor("timing weight", rows, cols)
		if err != nil {
			panic(err)
		}
		weights = append(weights, w)
		return w.(*Tensor)
	}
	f32buf := func(n int, bits uint32) driver.DevPtr {
		p := alloc(uint64(4*n), "timing activations")
		b.memset(p, bits, n)
		return p
	}
	H, q, kv, F, V := cfg.HiddenSize, cfg.NumAttentionHeads*cfg.HeadDim, cfg.NumKeyValueHeads*cfg.HeadDim, cfg.IntermediateSize, cfg.VocabSize
	maxO := max(V, q+2*kv, F)
	x := f32buf(max(H, F, q), 0x3c23d70a) // 0.01
	nw := f32buf(max(H, F), 0x3f800000)
	outs := [3]driver.DevPtr{f32buf(maxO, 0), f32buf(maxO, 0), f32buf(maxO, 0)}
	aux, sum := f32buf(maxO, 0), f32buf(maxO, 0)
	type product struct {
		name    string
		epi     int
		norm    bool
		I       int
		O       []int
		weights int64
	}
	ps := []product{
		{"qkv", epiNone, true, H, []int{q, kv, kv}, 0},
		{"o_proj", epiResid, false, q, []int{H}, 0},
		{"gate_up", epiSwiGLU, true, H, []int{F, F}, 0},
		{"down", epiResid, false, F, []int{H}, 0},
		{"lm_head", epiNone, true, H, []int{V}, 0},
	}
	// Every warp of the largest product records 32 bytes (the kernels know
	// no bound: the buffer must hold them all).
	maxWarps := 0
	for _, p := range ps {
		blocks := 0
		for _, o := range p.O {
			blocks += (o + b.gemvf.rowsPerBlock(p.epi) - 1) / b.gemvf.rowsPerBlock(p.epi)
			if p.epi == epiSwiGLU {
				break // both rows of an output in one warp
			}
		}
		maxWarps = max(maxWarps, blocks*gemvfWarps)
	}
	tl := &Tensor{ptr: alloc(uint64(32*maxWarps), "timeline"), rows: 1, cols: 8 * maxWarps, dt: backend.F32}
	host := make([]float32, 8*maxWarps)
	wave, other := b.gemvWave, 0
	if wave == 0 {
		other = 64
	}
	defer func() { b.gemvWave = wave }()
	// Each product as the backend is set, then with the other
	// INFERNIX_CUDA_GEMV_WAVE (the products of more than one wave looped
	// over one: gemvWaveGrid), named name+wave or name-wave.
	runsOf := append([]product(nil), ps...)
	for _, p := range ps {
		p.name += map[bool]string{true: "-wave", false: "+wave"}[wave > 0]
		runsOf = append(runsOf, p)
	}
	for i, p := range runsOf {
		b.gemvWave = wave
		if i >= len(ps) {
			b.gemvWave = other
		}
		var bytes int64
		for _, o := range p.O {
			bytes += int64(o) * int64(p.I) * 2
		}
		copies := int(max(1, (256<<20+bytes-1)/bytes))
		sets := make([][]*Tensor, copies)
		for c := range sets {
			for _, o := range p.O {
				sets[c] = append(sets[c], weight(o, p.I))
			}
		}
		launch := func(c int) {
			q := pending{kind: pendGemv, n: len(p.O), x: x, T: 1, I: p.I, norm: p.norm, epi: p.epi, aux: aux, sum: sum}
			for j, o := range p.O {
				q.jobs[j] = gemvJob{out: outs[j], w: sets[c][j], O: o}
			}
			if p.norm {
				q.nrm = normOp{x: x, w: nw, rows: 1, n: p.I, eps: 1e-6}
			}
			if p.epi == epiSwiGLU {
				q.aux = outs[2]
			}
			b.launchGemvf(&q)
		}
		for i := 0; i < 2*copies; i++ {
			launch(i % copies)
		}
		b.sync()
		var runs []timelineStats
		for i := 0; i < 5; i++ {
			b.memset(tl.ptr, 0, 8*maxWarps)
			b.gemvfTimeline = tl.ptr
			launch(i % copies)
			b.gemvfTimeline = 0
			b.sync()
			b.ReadRows(tl, host)
			if b.err != nil {
				panic(b.err)
			}
			var ws []warpTimes
			for w := 0; w < maxWarps; w++ {
				u := func(k int) uint64 { return hostU64(host, 4*w+k) }
				if u(0) == 0 && u(2) == 0 {
					continue
				}
				ws = append(ws, warpTimes{start: u(0), first: u(1), end: u(2), sm: uint32(u(3))})
			}
			s, ok := summarise(ws, bytes)
			if !ok {
				panic(fmt.Sprintf("gemv timing %s: a warp recorded an impossible timeline", p.name))
			}
			runs = append(runs, s)
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].EndLast < runs[j].EndLast })
		m := runs[len(runs)/2]
		res["gemv_timing_"+p.name] = m
		fmt.Printf("gemv timing %-13s %7.1f MB  warps %6d  last start %5.2f  first load %5.2f  end p10 %6.2f p50 %6.2f p90 %6.2f last %6.2f µs  tail %5.2f  %.2f TB/s\n",
			p.name, float64(bytes)/1e6, m.Warps, m.LastStart, m.FirstLoad, m.End10, m.End50, m.End90, m.EndLast, m.Tail, m.TBs)
	}
}

// percentile is the p-th (0…1) of sorted values v, 0 when there are none.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return v[min(len(v)-1, int(p*float64(len(v))))]
}

// hostU64 is the i-th u64 of a device buffer of u64 records read back as
// float32s.
func hostU64(host []float32, i int) uint64 {
	return uint64(math.Float32bits(host[2*i])) | uint64(math.Float32bits(host[2*i+1]))<<32
}

func TestTimelineSummary(t *testing.T) {
	// Ten warps starting 0…0.9 µs apart, first weights 1 µs after each
	// start, ending at 10…19 µs, the last one at 30 µs.
	var ws []warpTimes
	for i := 0; i < 10; i++ {
		s := uint64(1_000_000 + 100*i)
		end := s + uint64(10_000+1000*i)
		if i == 9 {
			end = 1_000_000 + 30_000
		}
		ws = append(ws, warpTimes{start: s, first: s + 1000, end: end, sm: uint32(i % 3)})
	}
	got, ok := summarise(ws, 30_000_000) // 30 MB in 30 µs: 1 TB/s
	if !ok {
		t.Fatal("a valid timeline was refused")
	}
	want := timelineStats{Warps: 10, LastStart: 0.9, FirstLoad: 1, End10: 11.1, End50: 15.5, End90: 30, EndLast: 30, Tail: 0, TBs: 1}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if got.Warps != want.Warps || !near(got.LastStart, want.LastStart) || !near(got.FirstLoad, want.FirstLoad) ||
		!near(got.End10, want.End10) || !near(got.End50, want.End50) || !near(got.End90, want.End90) ||
		!near(got.EndLast, want.EndLast) || !near(got.Tail, want.Tail) || !near(got.TBs, want.TBs) {
		t.Errorf("summary %+v, want %+v", got, want)
	}
	for name, bad := range map[string][]warpTimes{
		"none":           nil,
		"never started":  {{start: 0, first: 0, end: 5}},
		"ends first":     {{start: 10, first: 0, end: 5}},
		"load after end": {{start: 10, first: 30, end: 20}},
	} {
		if _, ok := summarise(bad, 1); ok {
			t.Errorf("%s: an impossible timeline was accepted", name)
		}
	}
}
