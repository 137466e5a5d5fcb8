package cuda

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/sample"
)

// gpuRandomWeights fills each weight on the device (uniform values of
// standard deviation 0.02, norm scales 1), like model.SyntheticWeights but
// without generating gigabytes on the host. Bytes counts what the model
// reads per decoded token's worth of weights.
type gpuRandomWeights struct {
	b     *Backend
	seed  uint32
	Bytes int64
	// ExpertBytes counts the routed experts' weights among Bytes (a MoE
	// token reads K of every E).
	ExpertBytes int64
}

func (w *gpuRandomWeights) Has(name string) bool { return true }

func (w *gpuRandomWeights) Tensor(name string, shape ...int) (backend.Tensor, error) {
	rows, cols := 1, shape[len(shape)-1]
	for _, d := range shape[:len(shape)-1] {
		rows *= d
	}
	b := w.b
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := &Tensor{rows: rows, cols: cols, dt: backend.BF16}
	if rows == 1 {
		t.dt = backend.F32
	}
	p, err := b.wmalloc(t.bytes(), name)
	if err != nil {
		return nil, err
	}
	t.ptr = p
	n := rows * cols
	switch {
	case rows == 1:
		b.memset(p, 0x3f800000, n) // f32 ones
	default:
		w.seed++
		b.launch(b.k.fill[kvBF16], gridFor(n), 1, 1, 256, 1, 0, ptr(p), uint64(n), uint64(w.seed*2654435761), f32(0.02*1.7320508))
	}
	if !strings.Contains(name, "embed_tokens") {
		w.Bytes += int64(t.bytes())
	}
	if strings.Contains(name, ".mlp.experts.") {
		w.ExpertBytes += int64(t.bytes())
	}
	return t, b.err
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// TestBench measures the performance figures on a model config
// (INFERNIX_CUDA_BENCH=tests/testdata/configs/qwen3-8b) with random weights
// made on the device; JSON goes to $INFERNIX_BENCH_OUT.
func TestBench(t *testing.T) {
	dir := os.Getenv("INFERNIX_CUDA_BENCH")
	if dir == "" {
		t.Skip("set INFERNIX_CUDA_BENCH to a model config directory")
	}
	b := gpu(t)
	var res map[string]any
	var failed any
	body := func() {
		defer func() { failed = recover() }()
		res = benchBody(t, b, dir)
	}
	// On the device thread, as the engine's scheduler would run: no
	// hand-over per driver call.
	if os.Getenv("INFERNIX_BENCH_DEVICE_THREAD") != "0" {
		b.RunOnDeviceThread(body)
	} else {
		body()
	}
	if failed != nil {
		panic(failed)
	}
	reportBench(t, dir, res)
}

// benchBody measures; it panics on failure (it may run on the device
// thread, where t.Fatal must not be called).
func benchBody(t *testing.T, b *Backend, dir string) map[string]any {
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		panic(err)
	}
	res := map[string]any{"model": filepath.Base(dir), "device": b.Name(), "commit": os.Getenv("INFERNIX_COMMIT"),
		"date": time.Now().UTC().Format(time.RFC3339)}
	// INFERNIX_BENCH_LAYERS=N keeps the first N layers: per-layer figures
	// (the grouped MoE ablation) with a fraction of the random weights.
	if n, err := strconv.Atoi(os.Getenv("INFERNIX_BENCH_LAYERS")); err == nil && n > 0 && n < cfg.NumHiddenLayers {
		cfg.NumHiddenLayers = n
		res["layers"] = n
	}

	// Copy bandwidth: the decode roofline's denominator.
	runtime.LockOSThread()
	const cp = 4 << 30
	src, err1 := b.malloc(cp, "bench copy")
	dst, err2 := b.malloc(cp, "bench copy")
	runtime.UnlockOSThread()
	if err1 == nil && err2 == nil {
		var ts []time.Duration
		for i := 0; i < 6; i++ {
			b.sync()
			t0 := time.Now()
			b.copyDtoD(dst, src, cp)
			runtime.LockOSThread()
			b.sync()
			runtime.UnlockOSThread()
			ts = append(ts, time.Since(t0))
		}
		bw := 2 * float64(cp) / median(ts[1:]).Seconds()
		res["copy_bandwidth_gb_s"] = bw / 1e9
		b.free(src)
		b.free(dst)
	}
	bw, _ := res["copy_bandwidth_gb_s"].(float64)
	// INFERNIX_BENCH_GEMV_TIMING=1: each decode product's per-warp timeline
	// alone (gemv_timing_test.go), then nothing else.
	if os.Getenv("INFERNIX_BENCH_GEMV_TIMING") == "1" {
		benchGemvTiming(b, cfg, res)
		return res
	}

	// Upload from pageable host memory (what loading a checkpoint from
	// the page cache does, minus reading the file).
	host := make([]byte, 1<<30)
	for i := range host {
		host[i] = byte(i * 7)
	}
	var ups []time.Duration
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		w, err := b.Upload("bench upload", backend.BF16, []int{1 << 19, 1 << 10}, host)
		if err != nil {
			panic(err)
		}
		b.sync()
		ups = append(ups, time.Since(t0))
		b.Free(w)
	}
	res["upload_gb_s"] = float64(len(host)) / median(ups).Seconds() / 1e9

	ws := &gpuRandomWeights{b: b}
	bld, _ := model.Lookup(cfg.Arch())
	t0 := time.Now()
	// INFERNIX_BENCH_KV_BLOCKS: a smaller cache where the weights take most
	// of the GPU (the MoE decode bench of a whole Qwen3-30B-A3B on 80 GB).
	kvBlocks := 1200
	if n, err := strconv.Atoi(os.Getenv("INFERNIX_BENCH_KV_BLOCKS")); err == nil && n > 0 {
		kvBlocks = n
	}
	m, err := bld(cfg, ws, b, model.Options{KVBlocks: kvBlocks, MaxBatchTokens: 4096})
	if err != nil {
		panic(err)
	}
	b.sync()
	res["build_s"] = time.Since(t0).Seconds()
	if cfg.NumExperts > 0 && ws.ExpertBytes > 0 {
		// What one token reads: K of every E routed experts.
		ws.Bytes -= ws.ExpertBytes * int64(cfg.NumExperts-cfg.NumExpertsPerTok) / int64(cfg.NumExperts)
	}
	res["weight_bytes_per_token"] = ws.Bytes
	V := cfg.VocabSize
	logits := make([]float32, 32*V) // up to 32 lanes

	seqBlocks := func(first, n int) []int32 {
		bl := make([]int32, n)
		for i := range bl {
			bl[i] = int32(first + i)
		}
		return bl
	}
	forward := func(blocks [][]int32, start []int, n int) time.Duration {
		bt := &model.Batch{Attn: backend.AttnBatch{Blocks: blocks}}
		for s := range blocks {
			for i := 0; i < n; i++ {
				bt.Tokens = append(bt.Tokens, int32((start[s]+i*7919+s*13)%V))
				bt.Attn.Seq = append(bt.Attn.Seq, int32(s))
				bt.Attn.Pos = append(bt.Attn.Pos, int32(start[s]+i))
			}
			bt.Outputs = append(bt.Outputs, int32(len(bt.Tokens)-1))
		}
		t0 := time.Now()
		if err := m.Forward(bt, logits[:len(blocks)*V]); err != nil {
			panic(err)
		}
		if b.err != nil {
			panic(b.err)
		}
		return time.Since(t0)
	}

	// Prefill: one 4,096-token forward (median of 3 after a warm-up).
	lane0 := [][]int32{seqBlocks(0, 70)}
	if os.Getenv("INFERNIX_BENCH_MOE_DECODE") == "1" {
		benchMoEDecode(b, res, bw, float64(ws.Bytes), forward, seqBlocks)
		return res
	}
	if os.Getenv("INFERNIX_BENCH_MOE_GROUPED") == "1" {
		benchMoEGrouped(b, res, func() time.Duration { return forward(lane0, []int{0}, 4096) }, logits[:V])
		return res
	}
	forward(lane0, []int{0}, 4096)
	var pf []time.Duration
	for i := 0; i < 3; i++ {
		pf = append(pf, forward(lane0, []int{0}, 4096))
	}
	res["prefill_4096_tok_s"] = 4096 / median(pf).Seconds()
	// With 128-row prefill attention tiles (INFERNIX_CUDA_PREFILL_ROWS=128).
	rows := b.prefillRows
	b.prefillRows = 128
	forward(lane0, []int{0}, 4096) // compiles the kernel
	pf = pf[:0]
	for i := 0; i < 3; i++ {
		pf = append(pf, forward(lane0, []int{0}, 4096))
	}
	b.prefillRows = rows
	res["prefill_4096_rows128_tok_s"] = 4096 / median(pf).Seconds()
	// The same without the norms' and SwiGLU's bf16 copies (shadowBF16).
	b.noShadow = true
	pf = pf[:0]
	for i := 0; i < 3; i++ {
		pf = append(pf, forward(lane0, []int{0}, 4096))
	}
	b.noShadow = false
	res["prefill_4096_noshadow_tok_s"] = 4096 / median(pf).Seconds()

	decode := func(name string, blocks [][]int32, ctx int, steps int) {
		start := make([]int, len(blocks))
		for i := range start {
			start[i] = ctx
		}
		for i := 0; i < 4; i++ { // warm-up: eager, capture, replay
			forward(blocks, start, 1)
			for j := range start {
				start[j]++
			}
		}
		// The host's walk of each replayed step: from the forward's call
		// to its graph's launch, while the device idles.
		var walk time.Duration
		walked := 0
		t0 := time.Now()
		for i := 0; i < steps; i++ {
			ts, r0 := time.Now(), b.g.Replays
			forward(blocks, start, 1)
			if b.g.Replays == r0+1 {
				walk += b.g.launchedAt.Sub(ts)
				walked++
			}
			for j := range start {
				start[j]++
			}
		}
		el := time.Since(t0)
		tps := float64(steps*len(blocks)) / el.Seconds()
		res[name+"_tok_s"] = tps
		if walked > 0 {
			res[name+"_host_walk_us"] = float64(walk.Microseconds()) / float64(walked)
		}
		if bw > 0 && len(blocks) == 1 {
			res[name+"_roofline_ratio"] = tps / (bw * 1e9 / float64(ws.Bytes))
		}
	}
	// median3 records name as the median of three decode measurements in a
	// row, and their spread (max − min) as name_spread_tok_s: successive
	// figures in one process differ by up to ±2% (run 14).
	median3 := func(name string, blocks [][]int32, ctx int, steps int) {
		var v []float64
		for i := 0; i < 3; i++ {
			decode(name, blocks, ctx+i*(steps+4), steps)
			v = append(v, res[name+"_tok_s"].(float64))
		}
		sort.Float64s(v)
		res[name+"_tok_s"] = v[1]
		res[name+"_spread_tok_s"] = v[2] - v[0]
		if bw > 0 && len(blocks) == 1 {
			res[name+"_roofline_ratio"] = v[1] / (bw * 1e9 / float64(ws.Bytes))
		}
	}
	// graphOnly replays the last decode step's graph n times back to back
	// (the same positions each time): the device's time a step, copies
	// included, without the host's walk and synchronisation between steps.
	graphOnly := func(name string, n int) {
		g := b.g.last
		if g == nil {
			return
		}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b.sync()
		t0 := time.Now()
		for i := 0; i < n && b.err == nil; i++ {
			b.fail(g.launch(b, 0))
		}
		b.sync()
		if b.err != nil {
			panic(b.err)
		}
		res[name+"_graph_only_tok_s"] = float64(n) / time.Since(t0).Seconds()
	}
	// Decode at 512 tokens of context (the prompt prefilled for real).
	forward([][]int32{seqBlocks(100, 16)}, []int{0}, 512)
	if os.Getenv("INFERNIX_BENCH_PROFILE") == "prefill" {
		// One 4,096-token prefill (after the warm-up above), bounded for
		// `ncu --profile-from-start off`; no figures.
		forward(lane0, []int{0}, 4096)
		b.sync()
		if err := b.drv.ProfilerStart(); err != nil {
			panic(err)
		}
		forward(lane0, []int{0}, 4096)
		b.sync()
		if err := b.drv.ProfilerStop(); err != nil {
			panic(err)
		}
		return res
	}
	if os.Getenv("INFERNIX_BENCH_PROFILE") == "lanes16" {
		// One graph-replayed 16-lane decode step at 512 (cuBLASLt
		// products), bounded for `ncu --profile-from-start off`.
		var lanes [][]int32
		start := make([]int, 16)
		for i := range start {
			lanes = append(lanes, seqBlocks(720+i*12, 12))
			start[i] = 512
		}
		for _, kv := range b.kvCaches {
			b.FillKV(kv, 7, 1)
		}
		for i := 0; i < 4; i++ {
			forward(lanes, start, 1)
			for j := range start {
				start[j]++
			}
		}
		b.sync()
		if err := b.drv.ProfilerStart(); err != nil {
			panic(err)
		}
		forward(lanes, start, 1)
		b.sync()
		if err := b.drv.ProfilerStop(); err != nil {
			panic(err)
		}
		return res
	}
	if os.Getenv("INFERNIX_BENCH_PROFILE") != "" {
		// One graph-replayed decode step at 512 and one at 32K, bounded
		// for `ncu --profile-from-start off`; no figures.
		blocks := [][]int32{seqBlocks(100, 16)}
		for i := 0; i < 4; i++ {
			forward(blocks, []int{512 + i}, 1)
		}
		for _, kv := range b.kvCaches {
			b.FillKV(kv, 7, 1)
		}
		long := [][]int32{seqBlocks(200, 520)}
		for i := 0; i < 4; i++ {
			forward(long, []int{32768 + i}, 1)
		}
		b.sync()
		if err := b.drv.ProfilerStart(); err != nil {
			panic(err)
		}
		forward(blocks, []int{516}, 1)
		forward(long, []int{32772}, 1)
		b.sync()
		if err := b.drv.ProfilerStop(); err != nil {
			panic(err)
		}
		return res
	}
	// About a second of decode first, untimed: figures taken in a fresh
	// process rose by 1–2% over its first seconds (run 14: the graphed
	// headline below the eager figure measured after it).
	decode("warmup", [][]int32{seqBlocks(100, 16)}, 512, 250)
	delete(res, "warmup_tok_s")
	delete(res, "warmup_roofline_ratio")
	median3("decode_1lane_ctx512", [][]int32{seqBlocks(100, 16)}, 512, 64)
	graphOnly("decode_1lane_ctx512", 64)
	// splitAB measures decode with each step's graph in one part, launched
	// after the host's walk, and in two, the first launched during the walk
	// (splitAt), alternately, one figure per name ("…split…" in two parts).
	splitAB := func(blocks []int32, ctx int, names ...string) {
		split := b.g.split
		for _, n := range names {
			b.g.split = !strings.Contains(n, "nosplit")
			b.g.dropAll()
			decode(n, [][]int32{blocks}, ctx, 64)
		}
		b.g.split = split
		b.g.dropAll()
	}
	splitAB(seqBlocks(100, 16), 600, "decode_1lane_ctx512_nosplit", "decode_1lane_ctx512_split", "decode_1lane_ctx512_nosplit_2", "decode_1lane_ctx512_split_2")
	// foldAB measures decode with each named setting, alternately: every
	// MLP through mlp_fused (INFERNIX_CUDA_MLP=fused) where the name says
	// "mlpfused", through the two fused products otherwise; the attention's
	// merge folded into o_proj (INFERNIX_CUDA_OPROJ=fold) where it says
	// "oprojfold". The first fused steps transpose the down weights (a copy
	// each, kept to the end). Then each fused form's graph alone, as
	// graphOnly does for the headline.
	foldAB := func(blocks []int32, ctx int, names ...string) {
		if !b.fuse {
			return
		}
		mlpOK := b.mlpLoad()
		mlp, oproj := b.mlp.on, b.oproj.on
		for _, n := range names {
			b.mlp.on = mlpOK && strings.Contains(n, "mlpfused")
			b.oproj.on = strings.Contains(n, "oprojfold")
			if strings.Contains(n, "mlpfused") && !mlpOK {
				continue
			}
			b.g.dropAll()
			mr, or := b.mlp.runs, b.oproj.runs
			decode(n, [][]int32{blocks}, ctx, 64)
			if b.mlp.on && b.mlp.runs == mr {
				panic("bench: no MLP went through mlp_fused")
			}
			if b.oproj.on && b.oproj.runs == or {
				panic("bench: no o-projection went through attn_oproj")
			}
			if b.mlp.on || b.oproj.on {
				graphOnly(n, 64)
			}
		}
		b.mlp.on, b.oproj.on = mlp, oproj
		b.g.dropAll()
	}
	foldAB(seqBlocks(100, 16), 610, "decode_1lane_ctx512_mlp2", "decode_1lane_ctx512_mlpfused", "decode_1lane_ctx512_mlp2_2",
		"decode_1lane_ctx512_mlpfused_2", "decode_1lane_ctx512_mlp2_3", "decode_1lane_ctx512_mlpfused_3")
	foldAB(seqBlocks(100, 16), 620, "decode_1lane_ctx512_unfolded", "decode_1lane_ctx512_oprojfold", "decode_1lane_ctx512_unfolded_2",
		"decode_1lane_ctx512_oprojfold_2", "decode_1lane_ctx512_oprojfold_mlpfused", "decode_1lane_ctx512_unfolded_3",
		"decode_1lane_ctx512_oprojfold_3", "decode_1lane_ctx512_oprojfold_mlpfused_2")
	// INFERNIX_BENCH_WALK_PROFILE=FILE: a CPU profile of 2,000 more decode
	// steps at 512 (the host's walk of each step), then nothing else. It
	// asks for 5 kHz; the kernel's timer may give less (250 Hz in run 37,
	// though pprof then counts each sample as 0.2 ms).
	if f := os.Getenv("INFERNIX_BENCH_WALK_PROFILE"); f != "" {
		w, err := os.Create(f)
		if err != nil {
			panic(err)
		}
		runtime.SetCPUProfileRate(5000)
		if err := pprof.StartCPUProfile(w); err != nil {
			panic(err)
		}
		decode("decode_1lane_ctx512_walkprof", [][]int32{seqBlocks(100, 48)}, 800, 2000)
		pprof.StopCPUProfile()
		w.Close()
		return res
	}
	// Same without graphs.
	b.g.enabled = false
	decode("decode_1lane_ctx512_eager", [][]int32{seqBlocks(100, 16)}, 580, 16)
	b.g.enabled = true
	// Decode at 32K: the cache is filled with random values instead of a
	// 32K prefill.
	for _, kv := range b.kvCaches {
		b.FillKV(kv, 7, 1)
	}
	median3("decode_1lane_ctx32k", [][]int32{seqBlocks(200, 520)}, 32768, 32)
	graphOnly("decode_1lane_ctx32k", 32)
	splitAB(seqBlocks(200, 520), 32900, "decode_1lane_ctx32k_nosplit", "decode_1lane_ctx32k_split")
	foldAB(seqBlocks(200, 520), 33000, "decode_1lane_ctx32k_mlp2", "decode_1lane_ctx32k_mlpfused", "decode_1lane_ctx32k_mlp2_2", "decode_1lane_ctx32k_mlpfused_2",
		"decode_1lane_ctx32k_oprojfold", "decode_1lane_ctx32k_unfolded", "decode_1lane_ctx32k_oprojfold_2")
	// INFERNIX_BENCH_ATTN_TIMING=1 (with the attention compiled with
	// ATTN_TIMING=1): the folded decode attention's block timeline at 512
	// and 32K, graph-replayed (attn_timing_test.go).
	if os.Getenv("INFERNIX_BENCH_ATTN_TIMING") == "1" {
		for _, c := range []struct {
			ctx    int
			blocks []int32
		}{{640, seqBlocks(100, 16)}, {32840, seqBlocks(200, 520)}} {
			benchAttnTiming(b, cfg, res, c.ctx, func(pos int) { forward([][]int32{c.blocks}, []int{pos}, 1) })
		}
	}
	// INFERNIX_BENCH_STEP_TIMING=1 (every module compiled with
	// STEP_TIMING=1): every launch of a graph-replayed decode step at 512
	// and 32K, and of a 16-lane step at 520 (step_timing_test.go).
	if os.Getenv("INFERNIX_BENCH_STEP_TIMING") == "1" {
		for _, c := range []struct {
			ctx    int
			blocks []int32
		}{{640, seqBlocks(100, 16)}, {32840, seqBlocks(200, 520)}} {
			benchStepTiming(b, res, fmt.Sprintf("ctx%d", c.ctx), c.ctx, func(pos int) { forward([][]int32{c.blocks}, []int{pos}, 1) })
		}
		var lanes [][]int32
		for i := 0; i < 16; i++ {
			lanes = append(lanes, seqBlocks(720+i*12, 12))
		}
		benchStepTiming(b, res, "16lanes_ctx520", 520, func(pos int) {
			start := make([]int, len(lanes))
			for i := range start {
				start[i] = pos
			}
			forward(lanes, start, 1)
		})
	}
	// INFERNIX_BENCH_STOP=32k: the two single-lane figures only (a process
	// per whole-backend setting, such as INFERNIX_CUDA_PDL_TRIGGER).
	if os.Getenv("INFERNIX_BENCH_STOP") == "32k" {
		return res
	}
	// INFERNIX_BENCH_ATTN_BLOCKS="528,1056": decode at 32K with the decode
	// attention aiming at that many blocks (INFERNIX_CUDA_ATTN_BLOCKS),
	// the default before each; INFERNIX_BENCH_STOP=attn ends the bench
	// there.
	if e := os.Getenv("INFERNIX_BENCH_ATTN_BLOCKS"); e != "" {
		saved := b.attnBlocks
		for i, f := range strings.Split(e, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				panic(fmt.Sprintf("INFERNIX_BENCH_ATTN_BLOCKS: %v", err))
			}
			b.attnBlocks = saved
			decode(fmt.Sprintf("decode_1lane_ctx32k_blocks_default_%d", i), [][]int32{seqBlocks(200, 520)}, 32768, 32)
			b.attnBlocks = n
			decode(fmt.Sprintf("decode_1lane_ctx32k_blocks%d", n), [][]int32{seqBlocks(200, 520)}, 32768, 32)
			decode(fmt.Sprintf("decode_1lane_ctx512_blocks%d", n), [][]int32{seqBlocks(100, 16)}, 512, 32)
		}
		b.attnBlocks = saved
		if os.Getenv("INFERNIX_BENCH_STOP") == "attn" {
			return res
		}
	}
	// 16 lanes at 512 each.
	var lanes [][]int32
	for i := 0; i < 16; i++ {
		lanes = append(lanes, seqBlocks(720+i*12, 12))
	}
	decode("decode_16lanes_ctx512", lanes, 512, 32)
	b.noShadow = true
	decode("decode_16lanes_ctx512_noshadow", lanes, 512, 32)
	b.noShadow = false
	// The skinny products on the tensor cores (gemm_skinny,
	// INFERNIX_CUDA_SKINNY) in place of cuBLASLt's, the setting in force
	// measured again after them (run 22: +2%); and 32 lanes.
	if b.k.skinny != nil {
		sk := b.skinny
		b.skinny = !sk
		decode("decode_16lanes_ctx512_"+map[bool]string{true: "skinny", false: "noskinny"}[!sk], lanes, 512, 32)
		b.skinny = sk
		decode("decode_16lanes_ctx512_2", lanes, 512, 32)
	}
	lanes32 := append([][]int32(nil), lanes...)
	for i := 16; i < 32; i++ {
		lanes32 = append(lanes32, seqBlocks(720+i*12, 12))
	}
	decode("decode_32lanes_ctx512", lanes32, 512, 32)
	// Ablations, one switch off each (graphs as above, caches holding
	// random values): what PDL, operator fusion and the one-launch decode
	// attention are each worth.
	fz := b.fz
	if pdl := b.pdl; b.pdlOK {
		// The setting in force again, then the other, at 512 and 32K.
		for _, on := range []bool{pdl, !pdl} {
			b.flush()
			b.pdl = on
			name := map[bool]string{true: "pdl", false: "nopdl"}[on]
			decode("decode_1lane_ctx512_"+name, [][]int32{seqBlocks(100, 16)}, 600, 64)
			decode("decode_1lane_ctx32k_"+name, [][]int32{seqBlocks(200, 520)}, 32800, 32)
		}
		b.flush()
		b.pdl = pdl
	}
	// The q/k prep as its own kernel rather than folded into the decode
	// attention (INFERNIX_CUDA_NOFUSE=prep), the default measured again
	// first for a fair pair.
	for _, fold := range []bool{true, false} {
		b.flush()
		b.fz.prep = fold
		name := map[bool]string{true: "prepfold", false: "noprepfold"}[fold]
		decode("decode_1lane_ctx512_"+name, [][]int32{seqBlocks(100, 16)}, 700, 64)
		decode("decode_1lane_ctx32k_"+name, [][]int32{seqBlocks(200, 520)}, 32900, 32)
	}
	b.flush()
	b.fz.prep = fz.prep
	// Run 16 measured the decode attention's transposed products
	// (INFERNIX_CUDA_DECODE_ATTN=tc2) against attn_decode_tc in the order
	// tc, tc2, tc2, tc: no faster (165.5 / 164.8 against 165.6 / 166.2 at
	// 32K), and the chained products (one persistent kernel with grid
	// barriers, commits a6dfde6 and 20dae6d) 5% slower; neither is measured
	// here any more.
	b.flush()
	fuse := b.fuse
	b.fuse = false
	decode("decode_1lane_ctx512_unfused", [][]int32{seqBlocks(116, 12)}, 512, 32)
	b.fuse = fuse
	b.attnOld = true
	decode("decode_1lane_ctx32k_oldattn", [][]int32{seqBlocks(200, 520)}, 32810, 16)
	b.attnOld = false
	// Split-K products (INFERNIX_CUDA_GEMV_WIDE, sized per launch; run 12:
	// no faster than one slice) and decode attention without the tensor
	// cores (INFERNIX_CUDA_DECODE_ATTN=simt; run 13: 142 against tc's 152
	// tok/s at 32K). Runs 12–13 measured 2 and 4 slices, the deep SIMT
	// attention and cuBLASLt's next heuristic choices for 16 lanes
	// (INFERNIX_CUDA_GEMM_ALGO): none was faster.
	// The products of more than one wave (gate|up, the LM head) looped
	// over one (INFERNIX_CUDA_GEMV_WAVE), in the order set, other, set,
	// other, so that drift within the process shows.
	wave, noWave := b.gemvWave, 0
	if wave == 0 {
		noWave = 64 // the other setting, named for the usual case
	}
	for i, w := range []int{wave, noWave, wave, noWave} {
		b.flush()
		b.gemvWave = w
		name := map[bool]string{true: "wave", false: "nowave"}[w > 0]
		if i >= 2 {
			name += "_2"
		}
		decode("decode_1lane_ctx512_"+name, [][]int32{seqBlocks(100, 16)}, 620, 64)
		decode("decode_1lane_ctx32k_"+name, [][]int32{seqBlocks(200, 520)}, 32820, 32)
	}
	b.flush()
	b.gemvWave = wave
	wide := b.gemvWide
	b.flush()
	b.gemvWide = -1
	decode("decode_1lane_ctx512_wide", [][]int32{seqBlocks(100, 16)}, 640, 32)
	b.flush()
	b.gemvWide = wide
	tc := b.attnTC
	b.attnTC = false
	decode("decode_1lane_ctx32k_simt", [][]int32{seqBlocks(200, 520)}, 32840, 16)
	decode("decode_1lane_ctx512_simt", [][]int32{seqBlocks(100, 16)}, 660, 32)
	b.attnTC = tc
	// The other KV cache type (INFERNIX_CUDA_KV; f16 unless the run is
	// f16 already): the same bytes per position, so the same speed is
	// expected. The caches are refilled in that type, then back.
	kvDTs := make([]kvDType, len(b.kvCaches))
	other := kvF16
	if b.kvDT == kvF16 {
		other = kvBF16
	}
	for i, kv := range b.kvCaches {
		kvDTs[i], kv.dt = kv.dt, other
		b.FillKV(kv, 7, 1)
	}
	decode("decode_1lane_ctx32k_kv"+other.String(), [][]int32{seqBlocks(200, 520)}, 32870, 16)
	for i, kv := range b.kvCaches {
		kv.dt = kvDTs[i]
		b.FillKV(kv, 7, 1)
	}
	// The fused products' compile-time variants (gemvf_variant.go): decode
	// at 512 with each, the default first again for a fair comparison.
	func() {
		saved, pdl := b.gemvf, b.pdl
		defer func() {
			b.pdl = pdl
			if err := b.useGemvfVariant(saved); err != nil {
				panic(err)
			}
		}()
		// INFERNIX_BENCH_GEMVF_PDL=1: the variants (PDL_TRIGGER ones
		// among them) with programmatic dependent launch on.
		if os.Getenv("INFERNIX_BENCH_GEMVF_PDL") == "1" && b.pdlOK {
			b.flush()
			b.pdl = true
		}
		// INFERNIX_BENCH_GEMVF="GF_U=1;GF_PIPE=1" measures others; the
		// default runs before each, so that drift shows beside every pair.
		specs := benchGemvfVariants
		if e := os.Getenv("INFERNIX_BENCH_GEMVF"); e != "" {
			specs = strings.Split(e, ";")
		}
		seen := map[string]int{}
		for _, spec := range specs {
			for _, sp := range []string{"", spec} {
				v, err := parseGemvfVariant(sp)
				if err == nil {
					err = b.useGemvfVariant(v)
				}
				if err != nil {
					res["gemvf_error"] = fmt.Sprintf("%s: %v", sp, err)
					return
				}
				name := v.name()
				if seen[name]++; seen[name] > 1 {
					name += fmt.Sprintf("_%d", seen[name])
				}
				decode("decode_1lane_ctx512_gemvf_"+name, [][]int32{seqBlocks(100, 16)}, 512, 64)
				decode("decode_1lane_ctx32k_gemvf_"+name, [][]int32{seqBlocks(200, 520)}, 32880, 16)
			}
		}
	}()
	if sampleOn() {
		// Decode at 512 with the token chosen as a server would (Qwen3's
		// non-thinking defaults: temperature 0.7, top-k 20, top-p 0.8,
		// seeded), on the device and, for comparison, on the host after
		// copying the logits. Last, and its failure recorded rather than
		// raised, so that a faulting kernel costs no other figure.
		func() {
			defer func() {
				if r := recover(); r != nil {
					res["devsample_error"] = fmt.Sprint(r)
				}
			}()
			benchSampling(b, m, res, seqBlocks(100, 16), lanes, V)
		}()
	}
	rp, capt, fb := b.GraphStats()
	res["graph_replays"], res["graph_captures"], res["graph_fallbacks"] = rp, capt, fb

	if bw > 0 {
		res["decode_roofline_tok_s"] = bw * 1e9 / float64(ws.Bytes)
	}
	return res
}

// benchMoEDecode (INFERNIX_BENCH_MOE_DECODE=1, a MoE config; the bench
// stops after it) measures decode at 512 positions, one lane, 4 and 16,
// with the fused MoE path (kernels/moe.cu) grouped by expert for every
// batch, token by token, and the indexed path, in turn (twice over: later
// figures of a process drift up by 1–2%), each the median of three after a
// second of warm-up; the one-lane figures also against the roofline of the
// weights one token reads (its K of every E experts).
func benchMoEDecode(b *Backend, res map[string]any, bw, bytes float64, forward func([][]int32, []int, int) time.Duration,
	seqBlocks func(first, n int) []int32) {
	saved, savedT := b.moeFused, b.moeGroupT
	defer func() { b.moeFused, b.moeGroupT = saved, savedT }()
	one := [][]int32{seqBlocks(0, 32)} // 2,048 positions
	var lanes [][]int32
	for i := 0; i < 16; i++ {
		lanes = append(lanes, seqBlocks(32+i*12, 12)) // 224 blocks in all
	}
	prompt := func(bl [][]int32) {
		for _, s := range bl {
			forward([][]int32{s}, []int{0}, 512)
		}
	}
	prompt(one)
	prompt(lanes)
	pos := 512
	decode := func(bl [][]int32, steps int) float64 {
		start := make([]int, len(bl))
		run := func(n int) time.Duration {
			for i := range start {
				start[i] = pos
			}
			t0 := time.Now()
			for i := 0; i < n; i++ {
				forward(bl, start, 1)
				for j := range start {
					start[j]++
				}
			}
			pos += n
			return time.Since(t0)
		}
		run(4) // eager, capture, replay
		var v []float64
		for i := 0; i < 3; i++ {
			v = append(v, float64(steps*len(bl))/run(steps).Seconds())
		}
		sort.Float64s(v)
		return v[1]
	}
	b.moeFused = true
	decode(one, 250) // warm-up
	if os.Getenv("INFERNIX_BENCH_STEP_TIMING") == "1" {
		// Every launch of a graph-replayed one-lane step at 640 positions,
		// fused and indexed (kernels compiled with STEP_TIMING=2).
		for _, fused := range []bool{true, false} {
			b.moeFused, b.moeGroupT = fused, 0
			benchStepTiming(b, res, map[bool]string{true: "moe_fused_ctx640", false: "moe_indexed_ctx640"}[fused], 640,
				func(p int) { forward(one, []int{p}, 1) })
		}
		return
	}
	runs, gruns := b.moeFusedRuns, b.moeGroupRuns
	for i, name := range []string{"grouped", "fused", "indexed", "grouped", "fused", "indexed"} {
		b.moeFused = name != "indexed"
		b.moeGroupT = map[bool]int{true: 1, false: 0}[name == "grouped"]
		sfx := ""
		if i >= 3 {
			sfx = "_2"
		}
		pos = 512 + i*200
		v := decode(one, 64)
		res["moe_decode_1lane_ctx512_"+name+sfx+"_tok_s"] = v
		if bw > 0 {
			res["moe_decode_1lane_ctx512_"+name+sfx+"_roofline_ratio"] = v / (bw * 1e9 / bytes)
		}
		pos = 512 + i*30 // 768 positions a lane
		res["moe_decode_4lanes_ctx512_"+name+sfx+"_tok_s"] = decode(lanes[:4], 32)
		pos = 512 + i*30
		res["moe_decode_16lanes_ctx512_"+name+sfx+"_tok_s"] = decode(lanes, 16)
	}
	res["moe_fused_calls"] = b.moeFusedRuns - runs
	res["moe_grouped_decode_calls"] = b.moeGroupRuns - gruns
}

// benchMoEGrouped is the grouped MoE path's ablation (issue 6; a MoE config
// and INFERNIX_BENCH_MOE_GROUPED=1, after which the bench stops: its other
// figures are the dense model's): a 4,096-token prefill through the grouped
// path (median of 3 after a warm-up) and through the indexed one (a single
// forward: at this length it may take many seconds), and how far apart
// their last-token logits are. It panics on failure, like benchBody.
func benchMoEGrouped(b *Backend, res map[string]any, prefill func() time.Duration, logits []float32) {
	saved := b.moeGrouped
	defer func() { b.moeGrouped = saved }()
	b.moeGrouped = true
	runs := b.moeGroupedRuns
	prefill()
	var ts []time.Duration
	for i := 0; i < 3; i++ {
		ts = append(ts, prefill())
	}
	res["prefill_4096_moe_grouped_tok_s"] = 4096 / median(ts).Seconds()
	res["moe_grouped_layer_calls"] = b.moeGroupedRuns - runs
	grouped := append([]float32(nil), logits...)
	b.moeGrouped = false
	res["prefill_4096_moe_indexed_tok_s"] = 4096 / prefill().Seconds()
	var diff, scale float64
	for i, v := range logits {
		diff = math.Max(diff, math.Abs(float64(v)-float64(grouped[i])))
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	res["moe_grouped_logits_max_abs_diff"], res["moe_indexed_logits_max_abs"] = diff, scale
}

// benchSampling measures decode at 512 tokens of context with sampling on
// the device (ForwardSample) and on the host (Forward + SampleHost), and
// the lanes' decode with sampling on the device. It panics on failure,
// like benchBody.
func benchSampling(b *Backend, m model.Model, res map[string]any, blocks []int32, lanes [][]int32, V int) {
	if err := b.enableSampling(); err != nil {
		panic(err)
	}
	ms, ok := m.(model.Sampling)
	if !ok || ms.SampleLimits().Rows == 0 {
		panic("the model does not sample on the device")
	}
	seed := uint64(1)
	logits := make([]float32, V)
	out := make([]backend.SampleResult, 1)
	run := func(name string, p sample.Params, device bool, start, steps int, mask []uint64) {
		p.Seed = &seed
		s := sample.New(p, V, nil)
		s.SetMask(mask)
		req := []backend.SampleRequest{{Sampler: s, Logprobs: -1, Force: -1}}
		tok := int32(17)
		one := func(pos int) {
			bt := &model.Batch{Tokens: []int32{tok}, Outputs: []int32{0}, Attn: backend.AttnBatch{Blocks: [][]int32{blocks}, Seq: []int32{0}, Pos: []int32{int32(pos)}}}
			var err error
			if device {
				err = ms.ForwardSample(bt, req, out)
			} else if err = m.Forward(bt, logits); err == nil {
				backend.SampleHost(logits, V, req, out)
			}
			if err != nil {
				panic(err)
			}
			tok = out[0].Token
			s.Accept(tok)
		}
		for i := 0; i < 4; i++ { // warm-up: eager, capture, replay
			one(start + i)
		}
		t0 := time.Now()
		for i := 0; i < steps; i++ {
			one(start + 4 + i)
		}
		res[name+"_tok_s"] = float64(steps) / time.Since(t0).Seconds()
	}
	qwen := sample.Params{Temperature: 0.7, TopK: 20, TopP: 0.8, RepetitionPenalty: 1}
	run("decode_1lane_ctx512_devsample", qwen, true, 512, 64, nil)
	run("decode_1lane_ctx512_hostsample", qwen, false, 512, 64, nil)
	// Greedy (temperature 0): one pass over the row on the device; no
	// logits cross to the host, where the headline copies all 608 KB.
	greedy := sample.Params{Temperature: 0, RepetitionPenalty: 1}
	run("decode_1lane_ctx512_devsample_greedy", greedy, true, 512, 64, nil)
	run("decode_1lane_ctx512_devsample_2", qwen, true, 512, 64, nil)
	// The same with other builds of kernels/sample.cu (sampleVariants):
	// one load per thread in flight (as before run 39), and no
	// selections' floors (INFERNIX_CUDA_SAMPLE_FLOOR=0, before run 40).
	def := b.k.sample
	for _, v := range sampleVariants {
		if v.name != "su1" && v.name != "nofloor" {
			continue
		}
		var k *kernel
		if err := b.load("sample.cu", v.defines, map[string]**kernel{"sample_rows": &k}); err != nil {
			continue
		}
		b.k.sample = k
		run("decode_1lane_ctx512_devsample_"+v.name, qwen, true, 512, 64, nil)
		run("decode_1lane_ctx512_devsample_greedy_"+v.name, greedy, true, 512, 64, nil)
		b.k.sample = def
		run("decode_1lane_ctx512_devsample_after_"+v.name, qwen, true, 512, 64, nil)
	}
	// Top-p alone (the whole vocabulary: engine/sample's scan path).
	topp := sample.Params{Temperature: 0.7, TopP: 0.9, RepetitionPenalty: 1}
	run("decode_1lane_ctx512_devsample_topp", topp, true, 512, 32, nil)
	run("decode_1lane_ctx512_hostsample_topp", topp, false, 512, 32, nil)
	// A constrained lane (a mask allowing every other token, as a grammar's
	// would be uploaded each step): sampled on the device with its mask,
	// against the host path constrained lanes took before run 30.
	mask := make([]uint64, (V+63)/64)
	for i := range mask {
		mask[i] = 0x5555555555555555
	}
	run("decode_1lane_ctx512_devsample_masked", qwen, true, 512, 64, mask)
	run("decode_1lane_ctx512_hostsample_masked", qwen, false, 512, 64, mask)
	// The lanes as the engine decodes them: each samples on the device and
	// only the tokens come back, where decode_16lanes_ctx512 copies every
	// lane's logits to the host (16 × 608 KB a step: run 22's 16-lane step
	// timeline spans 6.0 ms of the bench's 7.2).
	n := len(lanes)
	if n == 0 || ms.SampleLimits().Rows < n {
		return
	}
	reqs, outs := make([]backend.SampleRequest, n), make([]backend.SampleResult, n)
	samplers, toks := make([]*sample.Sampler, n), make([]int32, n)
	for i := range reqs {
		p, sd := qwen, uint64(i+1)
		p.Seed = &sd
		samplers[i] = sample.New(p, V, nil)
		reqs[i] = backend.SampleRequest{Sampler: samplers[i], Logprobs: -1, Force: -1}
		toks[i] = int32(17 + i)
	}
	step := func(pos int) {
		bt := &model.Batch{Attn: backend.AttnBatch{Blocks: lanes}}
		for i := range lanes {
			bt.Tokens = append(bt.Tokens, toks[i])
			bt.Outputs = append(bt.Outputs, int32(i))
			bt.Attn.Seq = append(bt.Attn.Seq, int32(i))
			bt.Attn.Pos = append(bt.Attn.Pos, int32(pos))
		}
		if err := ms.ForwardSample(bt, reqs, outs); err != nil {
			panic(err)
		}
		for i := range outs {
			toks[i] = outs[i].Token
			samplers[i].Accept(toks[i])
		}
	}
	for i := 0; i < 4; i++ { // warm-up: eager, capture, replay
		step(512 + i)
	}
	const steps = 32
	t0 := time.Now()
	for i := 0; i < steps; i++ {
		step(516 + i)
	}
	res[fmt.Sprintf("decode_%dlanes_ctx512_devsample_tok_s", n)] = float64(steps*n) / time.Since(t0).Seconds()
}

func reportBench(t *testing.T, dir string, res map[string]any) {
	data, _ := json.MarshalIndent(res, "", "  ")
	t.Logf("%s", data)
	if d := os.Getenv("INFERNIX_BENCH_OUT"); d != "" {
		name := fmt.Sprintf("bench-%s.json", filepath.Base(dir))
		if err := os.WriteFile(filepath.Join(d, name), append(data, '\n'), 0o644); err != nil {
			t.Error(err)
		}
	}
	fmt.Printf("\n| measure | tok/s | target |\n|---|---|---|\n")
	for _, r := range []struct {
		k      string
		target string
	}{{"decode_1lane_ctx512_tok_s", "≥ 250"}, {"decode_1lane_ctx32k_tok_s", "≥ 180"}, {"prefill_4096_tok_s", "≥ 30000"},
		{"decode_16lanes_ctx512_tok_s", "≥ 2000"}, {"decode_1lane_ctx512_eager_tok_s", ""},
		{"decode_1lane_ctx512_devsample_tok_s", ""}, {"decode_1lane_ctx512_hostsample_tok_s", ""},
		{"decode_1lane_ctx512_devsample_masked_tok_s", ""}, {"decode_1lane_ctx512_hostsample_masked_tok_s", ""},
		{"decode_16lanes_ctx512_devsample_tok_s", ""}} {
		v, _ := res[r.k].(float64)
		fmt.Printf("| %s | %.1f | %s |\n", strings.TrimSuffix(r.k, "_tok_s"), v, r.target)
	}
}
