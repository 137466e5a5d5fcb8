package cuda

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// prodBench holds Qwen3-8B's decode products on random bf16 weights (36
// layers of q|k|v, o_proj, gate|up, down and the LM head, 15.1 GB) for
// the benches that time them as graphs (TestPchainBench; run 25's
// TestChainBench, 199f54b, ordered them by a counter of finished blocks).
type prodBench struct {
	t       testing.TB
	b       *Backend
	ls      []prodLayer
	head    *Tensor
	x       driver.DevPtr // the residual stream, updated in place by o_proj and down
	nw      driver.DevPtr
	hbuf    driver.DevPtr
	outs    [3]driver.DevPtr
	alloc   func(uint64) driver.DevPtr
	res     map[string]any
	cleanup []func()
}

type prodLayer struct{ q, k, v, o, g, u, d, qkv, gu *Tensor }

const (
	pbH, pbQ, pbKV, pbF, pbV, pbL = 4096, 4096, 1024, 12288, 151936, 36
	// pbX0 is every element of the residual stream as the bench starts
	// (0.01 as f32 bits).
	pbX0 = 0x3c23d70a
)

func newProdBench(t testing.TB, b *Backend) *prodBench {
	pb := &prodBench{t: t, b: b, res: map[string]any{"device": b.Name()}}
	alloc, release := devAllocs(t, b, "product bench")
	pb.alloc = alloc
	pb.cleanup = append(pb.cleanup, release)
	rw := &gpuRandomWeights{b: b}
	weight := func(rows, cols int) *Tensor {
		w, err := rw.Tensor("product bench weight", rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		pb.cleanup = append(pb.cleanup, func() { b.Free(w) })
		return w.(*Tensor)
	}
	for l := 0; l < pbL; l++ {
		// pchain reads q|k|v and gate|up as one matrix each; the fused
		// kernels read them as separate ones of the same bytes.
		qkv, gu := weight(pbQ+2*pbKV, pbH), weight(2*pbF, pbH)
		sub := func(w *Tensor, row, rows int) *Tensor {
			return &Tensor{ptr: w.ptr + driver.DevPtr(2*row*w.cols), rows: rows, cols: w.cols, dt: backend.BF16}
		}
		pb.ls = append(pb.ls, prodLayer{q: sub(qkv, 0, pbQ), k: sub(qkv, pbQ, pbKV), v: sub(qkv, pbQ+pbKV, pbKV), o: weight(pbH, pbQ),
			g: sub(gu, 0, pbF), u: sub(gu, pbF, pbF), d: weight(pbH, pbF), qkv: qkv, gu: gu})
	}
	pb.head = weight(pbV, pbH)
	f32buf := func(n int, bits uint32) driver.DevPtr {
		p := alloc(uint64(4 * n))
		b.memset(p, bits, n)
		return p
	}
	pb.x = f32buf(max(pbH, pbF), pbX0)
	pb.nw = f32buf(max(pbH, pbF), 0x3f800000)
	pb.hbuf = f32buf(max(pbH, pbF), 0)
	pb.outs = [3]driver.DevPtr{f32buf(pbV, 0), f32buf(pbV, 0), f32buf(pbV, 0)}
	b.sync()
	if b.err != nil {
		t.Fatal(b.err)
	}
	return pb
}

func (pb *prodBench) close() {
	for i := len(pb.cleanup) - 1; i >= 0; i-- {
		pb.cleanup[i]()
	}
}

// Bytes of weights a layer and the LM head read.
func (pb *prodBench) layerBytes() int64 {
	return 2*int64(pbH)*int64(pbQ+2*pbKV+pbQ+2*pbF) + 2*int64(pbF)*int64(pbH)
}
func (pb *prodBench) headBytes() int64 { return 2 * int64(pbV) * int64(pbH) }

func (pb *prodBench) graphTime(enqueue func()) time.Duration { return graphTime(pb.t, pb.b, enqueue) }

// graphTime captures enqueue() as a graph and returns the median of 7
// replays after 3.
func graphTime(t testing.TB, b *Backend, enqueue func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if !b.bind() {
		t.Fatal(b.err)
	}
	if err := b.drv.BeginCapture(b.stream); err != nil {
		t.Fatal(err)
	}
	enqueue()
	g, err := b.drv.EndCapture(b.stream)
	if err != nil || b.err != nil {
		t.Fatal(err, b.err)
	}
	defer b.drv.GraphDestroy(g) //nolint:errcheck
	e, err := b.drv.GraphInstantiate(g)
	if err != nil {
		t.Fatal(err)
	}
	defer b.drv.GraphExecDestroy(e) //nolint:errcheck
	ev0, _ := b.drv.EventCreate()
	ev1, _ := b.drv.EventCreate()
	defer b.drv.EventDestroy(ev0) //nolint:errcheck
	defer b.drv.EventDestroy(ev1) //nolint:errcheck
	var ds []time.Duration
	for i := 0; i < 10; i++ {
		b.drv.EventRecord(ev0, b.stream) //nolint:errcheck
		if err := b.drv.GraphLaunch(e, b.stream); err != nil {
			t.Fatal(err)
		}
		b.drv.EventRecord(ev1, b.stream) //nolint:errcheck
		if err := b.drv.EventSynchronize(ev1); err != nil {
			t.Fatal(err)
		}
		ms, err := b.drv.EventElapsed(ev0, ev1)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 3 {
			ds = append(ds, time.Duration(float64(ms)*1e6))
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// report records and prints a timing as µs and GB/s of weights.
func (pb *prodBench) report(name string, bytes int64, d time.Duration) {
	gbs := float64(bytes) / d.Seconds() / 1e9
	pb.res[name+"_us"] = float64(d.Nanoseconds()) / 1e3
	pb.res[name+"_GBps"] = gbs
	fmt.Printf("product bench %-32s %9.1f µs  %6.0f GB/s  (%.2f GB)\n", name, float64(d.Nanoseconds())/1e3, gbs, float64(bytes)/1e9)
}

// gemvf returns an enqueue of the engine's fused products, a launch each
// (PDL as in decode): layers layers, then the LM head if lm.
func (pb *prodBench) gemvf(lm bool, layers int) func() {
	b := pb.b
	x, nw, hbuf, outs := pb.x, pb.nw, pb.hbuf, pb.outs
	return func() {
		for l := 0; l < layers; l++ {
			y := pb.ls[l]
			q := pending{kind: pendGemv, n: 3, x: hbuf, T: 1, I: pbH, norm: true, epi: epiNone, nrm: normOp{x: x, w: nw, out: hbuf, rows: 1, n: pbH, eps: 1e-6}}
			q.jobs[0], q.jobs[1], q.jobs[2] = gemvJob{outs[0], y.q, pbQ}, gemvJob{outs[1], y.k, pbKV}, gemvJob{outs[2], y.v, pbKV}
			b.launchGemvf(&q)
			o := pending{kind: pendGemv, n: 1, x: outs[0], T: 1, I: pbQ, epi: epiResid, aux: x, sum: x}
			o.jobs[0] = gemvJob{outs[1], y.o, pbH}
			b.launchGemvf(&o)
			gu := pending{kind: pendGemv, n: 2, x: hbuf, T: 1, I: pbH, norm: true, epi: epiSwiGLU, aux: outs[2], nrm: normOp{x: x, w: nw, out: hbuf, rows: 1, n: pbH, eps: 1e-6}}
			gu.jobs[0], gu.jobs[1] = gemvJob{outs[0], y.g, pbF}, gemvJob{outs[1], y.u, pbF}
			b.launchGemvf(&gu)
			d := pending{kind: pendGemv, n: 1, x: outs[2], T: 1, I: pbF, epi: epiResid, aux: x, sum: x}
			d.jobs[0] = gemvJob{outs[1], y.d, pbH}
			b.launchGemvf(&d)
		}
		if lm {
			h := pending{kind: pendGemv, n: 1, x: hbuf, T: 1, I: pbH, norm: true, epi: epiNone, nrm: normOp{x: x, w: nw, out: hbuf, rows: 1, n: pbH, eps: 1e-6}}
			h.jobs[0] = gemvJob{outs[0], pb.head, pbV}
			b.launchGemvf(&h)
		}
	}
}

func (pb *prodBench) writeJSON() { writeBenchJSON(pb.t, pb.res) }

// writeBenchJSON writes a bench's results to $INFERNIX_BENCH_OUT, if set.
func writeBenchJSON(t testing.TB, res map[string]any) {
	if out := os.Getenv("INFERNIX_BENCH_OUT"); out != "" {
		data, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(out, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
