package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// pchainVariant is one compilation of kernels/pchain.cu.
type pchainVariant struct {
	name string
	defs []string
}

// The variants the bench measures (TestKernelsCompile compiles each):
// the per-warp cp.async ring (run 23 call b: w16d6 3.1 TB/s over the
// chain, w8d12 3.6, the fused kernels 3.8) and the bulk-copy ring
// (PC_TMA).
var pchainVariants = []pchainVariant{
	{"w16d6", nil},
	{"w16d6-nocross", []string{"PC_CROSS=0"}},
	{"w8d12", []string{"PC_WARPS=8", "PC_D=12"}},
	{"tma-r4-st5", []string{"GF_TMA=1", "PC_TMA=1"}},
	{"tma-r4-st3", []string{"GF_TMA=1", "PC_TMA=1", "PC_ST=3"}},
	{"tma-r2-st8", []string{"GF_TMA=1", "PC_TMA=1", "PC_R=2", "PC_ST=8"}},
	{"tma-w8-r4-st5", []string{"GF_TMA=1", "PC_TMA=1", "PC_WARPS=8"}},
	{"tma-w32-r4-st5", []string{"GF_TMA=1", "PC_TMA=1", "PC_WARPS=32"}},
}

// pchainKernel is a loaded variant: its kernel and launch shape.
type pchainKernel struct {
	k            *kernel
	warps, smem  int
	tma          bool // PC_TMA: units of rows × kc columns (else row pairs over slices sized by pcSlices)
	rows, kc     int
	name         string
	residentOnce bool // the grid (one block a SM) fits at once: its shared memory admits one block a SM
}

// layout returns a phase's slices and units for this variant over W warps.
func (pk *pchainKernel) layout(O, I, W int) (S, units int) {
	if pk.tma {
		S = I / pk.kc
		return S, (O + pk.rows - 1) / pk.rows * S
	}
	S = pcSlices(O, I, W)
	return S, (O + 1) / 2 * S
}

func pcDefine(defs []string, name string, def int) int {
	for _, d := range defs {
		var v int
		if n, _ := fmt.Sscanf(d, name+"=%d", &v); n == 1 {
			return v
		}
	}
	return def
}

func loadPchain(b *Backend, v pchainVariant) (*pchainKernel, error) {
	pk := &pchainKernel{name: v.name, warps: pcDefine(v.defs, "PC_WARPS", 16), tma: pcDefine(v.defs, "PC_TMA", 0) == 1}
	const xsBytes = 4 * 12288 // PC_MAXI floats of input in shared memory
	pk.smem = xsBytes + pk.warps*pcDefine(v.defs, "PC_D", 6)*1024
	if pk.tma {
		pk.rows, pk.kc = pcDefine(v.defs, "PC_R", 4), pcDefine(v.defs, "PC_KC", 4096)
		pk.smem = xsBytes + pcDefine(v.defs, "PC_ST", 5)*pk.rows*pk.kc*2
	}
	if err := b.load("pchain.cu", v.defs, map[string]**kernel{"pchain": &pk.k}); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if !b.bind() {
		return nil, b.err
	}
	if err := b.drv.FuncSetAttribute(pk.k.fn, driver.FuncAttrMaxDynamicShared, pk.smem); err != nil {
		return nil, err
	}
	// Two blocks must not share an SM (the barrier needs every block
	// running), nor may one block not fit.
	pk.residentOnce = 2*pk.smem > b.smemPerSM && pk.smem <= b.maxSmem && pk.k.regs*pk.warps*32 <= 65536
	return pk, nil
}

// pchainKernels loads every variant that can run here (a failed load
// fails t; a variant whose grid cannot be resident at once is logged and
// left out).
func pchainKernels(t testing.TB, b *Backend) []*pchainKernel {
	var ks []*pchainKernel
	for _, v := range pchainVariants {
		pk, err := loadPchain(b, v)
		if err != nil {
			t.Errorf("%s: %v", v.name, err)
			continue
		}
		if !pk.residentOnce {
			t.Logf("%s: %d bytes of shared memory, %d registers: not one block a SM; skipped", v.name, pk.smem, pk.k.regs)
			continue
		}
		ks = append(ks, pk)
	}
	return ks
}

// pcSlices picks S for a phase of O rows over I inputs and W warps: the
// fewest slices (I/S a multiple of 256) whose units spread over the warps
// within 10% of even, else the most even.
func pcSlices(O, I, W int) int {
	best, bestR := 1, math.Inf(1)
	for _, S := range []int{1, 2, 3, 4, 6, 8, 12, 16} {
		if I%(256*S) != 0 {
			continue
		}
		units := (O + 1) / 2 * S
		per := float64(units) / float64(W)
		r := math.Ceil(per) / per
		if r <= 1.1 {
			return S
		}
		if r < bestR {
			best, bestR = S, r
		}
	}
	return best
}

// pchainChain is a chain's device state: the phase table, the partials,
// the counters.
type pchainChain struct {
	shapes []pcShape
	table  driver.DevPtr
	outs   []driver.DevPtr
	cnt    driver.DevPtr // len(shapes) counters, then the stuck flag
	bytes  int64         // weight bytes
}

// newPchain lays out a chain of shapes (S chosen for W warps) over the
// weights ws (bf16 [O, I] each) and the input x0 [I_0].
func newPchain(t testing.TB, b *Backend, pk *pchainKernel, dims [][2]int, ws []driver.DevPtr, x0 driver.DevPtr, alloc func(uint64) driver.DevPtr) *pchainChain {
	c := &pchainChain{}
	table := make([]byte, 64*len(dims))
	W := b.smCount * pk.warps
	for p, d := range dims {
		s := pcShape{O: d[0], I: d[1]}
		var units int
		s.S, units = pk.layout(d[0], d[1], W)
		c.shapes = append(c.shapes, s)
		c.outs = append(c.outs, alloc(uint64(4*s.S*s.O)))
		c.bytes += int64(s.O) * int64(s.I) * 2
		src, srcO, srcS := x0, s.I, 1
		if p > 0 {
			src, srcO, srcS = c.outs[p-1], c.shapes[p-1].O, c.shapes[p-1].S
			if srcO < s.I {
				t.Fatalf("pchain phase %d reads %d inputs of %d", p, s.I, srcO)
			}
		}
		e := table[64*p:]
		le := binary.LittleEndian
		le.PutUint64(e[0:], uint64(ws[p]))
		le.PutUint64(e[8:], uint64(c.outs[p]))
		le.PutUint64(e[16:], uint64(src))
		for i, v := range []int{s.O, s.I, s.S, units, srcO, srcS, 0, 0} {
			le.PutUint32(e[24+4*i:], uint32(v))
		}
	}
	c.table = alloc(uint64(len(table)))
	if err := b.upload(c.table, table); err != nil {
		t.Fatal(err)
	}
	c.cnt = alloc(uint64(4 * (len(dims) + 1)))
	b.memset(c.cnt, 0, len(dims)+1)
	return c
}

// run launches phases [p0, p1) of c (counters zeroed first when p0 is 0).
func (c *pchainChain) run(b *Backend, pk *pchainKernel, p0, p1 int) {
	if p0 == 0 {
		b.memset(c.cnt, 0, len(c.shapes)) // the stuck flag stays: it is read at the end
	}
	b.launch(pk.k, uint32(b.smCount), 1, 1, uint32(32*pk.warps), 1, uint32(pk.smem), ptr(c.table), uint64(p0), uint64(p1), ptr(c.cnt),
		ptr(c.cnt+driver.DevPtr(4*len(c.shapes))))
}

// TestPchain runs a Qwen3-8B layer's products and the next layer's q|k|v
// as a persistent chain on the GPU, every variant, in one launch and in a
// launch per phase, against a float64 reference of the same bf16 weights;
// the variants that add in the same order (the same units, slices and
// warps a row) must agree bit for bit.
func TestPchain(t *testing.T) {
	b := gpu(t)
	r := newRand(t)
	dims := [][2]int{{6144, 4096}, {4096, 4096}, {24576, 4096}, {4096, 12288}, {6144, 4096}, {9, 4096}}
	alloc, release := devAllocs(t, b, "pchain test")
	defer release()
	var ws []driver.DevPtr
	var hw [][]uint16
	for _, d := range dims {
		h := make([]uint16, d[0]*d[1])
		for i := range h {
			h[i] = bf16Bits(float32(r.NormFloat64() * 0.03))
		}
		hw = append(hw, h)
		p := alloc(uint64(2 * len(h)))
		if err := b.upload(p, unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), 2*len(h))); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, p)
	}
	x0h := make([]float32, dims[0][1])
	for i := range x0h {
		x0h[i] = float32(r.NormFloat64())
	}
	x0 := alloc(uint64(4 * len(x0h)))
	if err := b.upload(x0, f32bytes(x0h)); err != nil {
		t.Fatal(err)
	}
	var refShapes []pcShape
	for _, d := range dims {
		refShapes = append(refShapes, pcShape{O: d[0], I: d[1], S: 1})
	}
	ref := pchainReference(refShapes, x0h, hw)
	bits := map[string][]float32{} // by what decides the order of the additions
	for _, pk := range pchainKernels(t, b) {
		c := newPchain(t, b, pk, dims, ws, x0, alloc)
		for _, split := range []bool{false, true} {
			for p, o := range c.outs {
				b.memset(o, 0x7fc00000, c.shapes[p].S*c.shapes[p].O)
			}
			if split {
				for p := range c.shapes {
					c.run(b, pk, p, p+1)
				}
			} else {
				c.run(b, pk, 0, len(c.shapes))
			}
			b.sync()
			if n := c.stuck(t, b); n != 0 {
				t.Fatalf("%s: %d blocks gave up at a barrier", pk.name, n)
			}
			var all []float32
			for p, s := range c.shapes {
				part := readF32(t, b, c.outs[p], s.S*s.O)
				all = append(all, part...)
				worst, unwritten := pchainError(part, s, ref[p])
				if unwritten >= 0 {
					t.Fatalf("%s split=%v phase %d: a partial of output %d not written", pk.name, split, p, unwritten)
				}
				if worst > 1e-3 {
					t.Errorf("%s split=%v phase %d %+v: max relative error %.2e against float64", pk.name, split, p, s, worst)
				}
			}
			key := fmt.Sprintf("tma %v, %d rows, %d warps", pk.tma, pk.rows, pk.warps)
			if prev, ok := bits[key]; ok {
				if !equalBits(prev, all) {
					t.Errorf("%s split=%v: results differ from the first variant of %s", pk.name, split, key)
				}
			} else {
				bits[key] = all
			}
		}
	}
}

// devAllocs returns an allocator of device buffers (failing t) and what
// frees them all.
func devAllocs(t testing.TB, b *Backend, what string) (alloc func(uint64) driver.DevPtr, release func()) {
	var bufs []driver.DevPtr
	alloc = func(n uint64) driver.DevPtr {
		p, err := b.malloc(n, what)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, p)
		return p
	}
	return alloc, func() {
		for _, p := range bufs {
			b.free(p)
		}
	}
}

func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// readF32 returns n floats from device p.
func readF32(t testing.TB, b *Backend, p driver.DevPtr, n int) []float32 {
	t.Helper()
	return read(t, b, &Tensor{ptr: p, rows: 1, cols: n, dt: backend.F32})
}

// stuck is how many blocks gave up at a barrier since the chain was made
// (the word after the counters).
func (c *pchainChain) stuck(t testing.TB, b *Backend) uint32 {
	t.Helper()
	return math.Float32bits(readF32(t, b, c.cnt+driver.DevPtr(4*len(c.shapes)), 1)[0])
}

// TestPchainBench (INFERNIX_BENCH_PCHAIN=1; results as JSON to
// $INFERNIX_BENCH_OUT) times Qwen3-8B's decode products, 36 layers of
// q|k|v, o_proj, gate|up, down and the LM head on random bf16 weights
// (15.1 GB), as graphs: (1) the fused product kernels the engine runs
// (gemvf, a launch a product, PDL), (2) pchain in one launch, (3) pchain
// in a launch a layer, for each variant; and the LM head alone in both.
// Each figure is the median of 7 replays after 3, as GB/s of weights.
func TestPchainBench(t *testing.T) {
	if os.Getenv("INFERNIX_BENCH_PCHAIN") == "" {
		t.Skip("set INFERNIX_BENCH_PCHAIN=1")
	}
	b := gpu(t)
	pb := newProdBench(t, b)
	defer pb.close()
	ls, head, x, alloc := pb.ls, pb.head, pb.x, pb.alloc
	graphTime, report, gemvf := pb.graphTime, pb.report, pb.gemvf
	const H, Q, KV, F, V, L = pbH, pbQ, pbKV, pbF, pbV, pbL
	layerBytes, headBytes := pb.layerBytes(), pb.headBytes()
	// (1) The engine's fused products, a launch each (PDL as in decode).
	report("gemvf_layers_head", int64(L)*layerBytes+headBytes, graphTime(gemvf(true, L)))
	report("gemvf_head", headBytes, graphTime(gemvf(true, 0)))
	report("gemvf_layers_head_again", int64(L)*layerBytes+headBytes, graphTime(gemvf(true, L)))
	// (2), (3) The chain: per layer q|k|v → o_proj (reads q's 4096) →
	// gate|up → down (reads the first 12,288), then the LM head.
	var dims [][2]int
	var ws []driver.DevPtr
	for _, y := range ls {
		dims = append(dims, [2]int{Q + 2*KV, H}, [2]int{H, Q}, [2]int{2 * F, H}, [2]int{H, F})
		ws = append(ws, y.qkv.ptr, y.o.ptr, y.gu.ptr, y.d.ptr)
	}
	dims = append(dims, [2]int{V, H})
	ws = append(ws, head.ptr)
	for _, pk := range pchainKernels(t, b) {
		c := newPchain(t, b, pk, dims, ws, x, alloc)
		n := len(dims)
		report("pchain_"+pk.name+"_one_launch", c.bytes, graphTime(func() { c.run(b, pk, 0, n) }))
		report("pchain_"+pk.name+"_launch_per_layer", c.bytes, graphTime(func() {
			c.run(b, pk, 0, 4)
			for p := 4; p < n; p += 4 {
				c.run(b, pk, p, min(p+4, n))
			}
		}))
		report("pchain_"+pk.name+"_head", headBytes, graphTime(func() {
			b.memset(c.cnt, 0, n)
			c.run(b, pk, n-1, n)
		}))
		b.sync()
		if n := c.stuck(t, b); n != 0 {
			t.Errorf("%s: %d blocks gave up at a barrier: its figures are void", pk.name, n)
			pb.res["pchain_"+pk.name+"_stuck"] = n
		}
	}
	report("gemvf_layers_head_last", int64(L)*layerBytes+headBytes, graphTime(gemvf(true, L)))
	pb.writeJSON()
}
