package cuda

import (
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/model"
)

// attnBlockTimes is one block's ATTN_TIMING record (kernels/attention.cu):
// global-timer readings in ns, its SM, whether it merged its head's splits,
// its tiles and its head's splits; when its count returned, and, when it
// merged, when the split weights were ready and when the sums were added.
type attnBlockTimes struct {
	entry, waited, firstTile, loopEnd, exit uint64
	sm                                      uint32
	merged                                  bool
	tiles, splits                           int
	counted, weighted, summed               uint64
	index                                   int // in the grid: (split·T + token)·kvh + KV head
}

// attnTimelineStats summarises a launch's records: times in µs from the
// earliest PDL_WAIT return (the moment the previous kernel had finished).
type attnTimelineStats struct {
	Blocks, Merging       int
	Splits, MaxTiles      int
	WaitedLast            float64 // the last block's PDL_WAIT return: blocks that started late
	FirstTile             float64 // median time from a block's wait to its first tile done
	LoopEnd10, LoopEnd50  float64 // when the blocks' main loops ended
	LoopEnd90, LoopEndMax float64
	MergeMax              float64 // the longest merge (exit − loop end of a merging block)
	// That merge's phases: loop end to its count's return (the partial
	// written and published), to the split weights, to the sums added, to
	// its exit (the outputs and the prepared q written).
	MergeCount, MergeWeights float64
	MergeSums, MergeOut      float64
	ExitLast                 float64 // the launch's span
	TBs                      float64 // the K/V bytes over the span
}

// summariseAttn reduces the records of one launch (kvBytes: the K/V bytes
// it read); ok is false when there are none or one is impossible.
func summariseAttn(bs []attnBlockTimes, kvBytes int64) (attnTimelineStats, bool) {
	if len(bs) == 0 {
		return attnTimelineStats{}, false
	}
	t0 := uint64(math.MaxUint64)
	for _, b := range bs {
		if b.entry == 0 || b.waited < b.entry || b.firstTile < b.waited || b.loopEnd < b.firstTile || b.exit < b.loopEnd {
			return attnTimelineStats{}, false
		}
		t0 = min(t0, b.waited)
	}
	us := func(t uint64) float64 { return float64(t-t0) / 1e3 }
	var waited, first, loop []float64
	s := attnTimelineStats{Blocks: len(bs)}
	for _, b := range bs {
		waited = append(waited, us(b.waited))
		first = append(first, float64(b.firstTile-b.waited)/1e3)
		loop = append(loop, us(b.loopEnd))
		s.ExitLast = max(s.ExitLast, us(b.exit))
		s.MaxTiles = max(s.MaxTiles, b.tiles)
		s.Splits = max(s.Splits, b.splits)
		if b.merged {
			s.Merging++
			if d := float64(b.exit-b.loopEnd) / 1e3; d >= s.MergeMax {
				s.MergeMax = d
				if b.counted >= b.loopEnd && b.weighted >= b.counted && b.summed >= b.weighted && b.exit >= b.summed {
					s.MergeCount, s.MergeWeights = float64(b.counted-b.loopEnd)/1e3, float64(b.weighted-b.counted)/1e3
					s.MergeSums, s.MergeOut = float64(b.summed-b.weighted)/1e3, float64(b.exit-b.summed)/1e3
				}
			}
		}
	}
	for _, v := range [][]float64{waited, first, loop} {
		sort.Float64s(v)
	}
	pct := percentile
	s.WaitedLast = waited[len(waited)-1]
	s.FirstTile = pct(first, 0.5)
	s.LoopEnd10, s.LoopEnd50, s.LoopEnd90, s.LoopEndMax = pct(loop, 0.1), pct(loop, 0.5), pct(loop, 0.9), loop[len(loop)-1]
	if s.ExitLast > 0 {
		s.TBs = float64(kvBytes) / (s.ExitLast * 1e-6) / 1e12
	}
	return s, true
}

// benchAttnTiming (INFERNIX_BENCH_ATTN_TIMING=1, the attention module
// compiled with ATTN_TIMING=1) records the folded decode attention's
// blocks over decode steps at context ctx (step runs one decode forward of
// the token at that position) and prints the last layer's launch of the
// last step: the graph-replayed path as the bench measures it.
func benchAttnTiming(b *Backend, cfg *model.Config, res map[string]any, ctx int, step func(pos int)) {
	const maxBlocks = 1 << 15
	buf, err := b.malloc(128*maxBlocks, "attention timeline") // 16 u64 a block
	if err != nil {
		panic(err)
	}
	defer b.free(buf)
	b.flush()
	b.attnTimeline = buf
	defer func() {
		b.flush()
		b.attnTimeline = 0
	}()
	for i := 0; i < 4; i++ { // eager, capture, replay
		step(ctx + i)
	}
	b.memset(buf, 0, 32*maxBlocks)
	step(ctx + 4)
	b.sync()
	host := make([]float32, 32*maxBlocks)
	b.ReadRows(&Tensor{ptr: buf, rows: 1, cols: 32 * maxBlocks, dt: backend.F32}, host)
	if b.err != nil {
		panic(b.err)
	}
	var bs []attnBlockTimes
	for i := 0; i < maxBlocks; i++ {
		u := func(k int) uint64 { return hostU64(host, 16*i+k) }
		if u(0) == 0 {
			continue
		}
		bs = append(bs, attnBlockTimes{entry: u(0), waited: u(1), firstTile: u(2), loopEnd: u(3), exit: u(4),
			sm: uint32(u(5)), merged: u(5)>>32 != 0, tiles: int(u(6)), splits: int(u(7)),
			counted: u(8), weighted: u(9), summed: u(10), index: i})
	}
	kvBytes := int64(ctx+5) * int64(cfg.NumKeyValueHeads) * int64(cfg.HeadDim) * 2 * 2
	s, ok := summariseAttn(bs, kvBytes)
	if !ok {
		panic(fmt.Sprintf("attention timing at %d: no records or an impossible one (%d blocks; compiled with ATTN_TIMING=1?)", ctx, len(bs)))
	}
	res[fmt.Sprintf("attn_timing_ctx%d", ctx)] = s
	rows, spread := attnBlockRows(bs, cfg.NumKeyValueHeads)
	res[fmt.Sprintf("attn_blocks_ctx%d", ctx)] = rows
	fmt.Printf("attn timing ctx %6d  loop ends' spread of means (max − min, µs): by KV head %.2f, by split %.2f, by SM %.2f; within an SM (mean |Δ| of its blocks) %.2f\n",
		ctx, spread[0], spread[1], spread[2], spread[3])
	fmt.Printf("attn timing ctx %6d  blocks %4d (merging %2d, %d splits, ≤%d tiles)  last wait end %5.2f  first tile %5.2f  loop end p10 %6.2f p50 %6.2f p90 %6.2f last %6.2f  merge max %5.2f (count %4.2f weights %4.2f sums %4.2f out %4.2f)  exit last %6.2f µs  %.2f TB/s\n",
		ctx, s.Blocks, s.Merging, s.Splits, s.MaxTiles, s.WaitedLast, s.FirstTile, s.LoopEnd10, s.LoopEnd50, s.LoopEnd90, s.LoopEndMax,
		s.MergeMax, s.MergeCount, s.MergeWeights, s.MergeSums, s.MergeOut, s.ExitLast, s.TBs)
}

func TestAttnTimelineSummary(t *testing.T) {
	// Four blocks waited at 1.0…1.3 µs (from 1,000,000 ns), first tiles
	// 2 µs later, loops ending at 10, 11, 12, 20 µs after the first wait;
	// the last block merges for 3 µs. 23 MB in 23 µs: 1 TB/s.
	var bs []attnBlockTimes
	for i := 0; i < 4; i++ {
		w := uint64(1_000_000 + 100*i)
		loop := uint64(1_000_000 + []uint64{10_000, 11_000, 12_000, 20_000}[i])
		exit := loop + 500
		if i == 3 {
			exit = loop + 3000
		}
		bt := attnBlockTimes{entry: w - 50, waited: w, firstTile: w + 2000, loopEnd: loop, exit: exit,
			sm: uint32(i), merged: i == 3, tiles: 16, splits: 4, counted: loop + 400}
		if i == 3 { // counted after 0.4 µs, weights 0.8 later, sums 1.2, out 0.6
			bt.weighted, bt.summed = loop+1200, loop+2400
		}
		bs = append(bs, bt)
	}
	got, ok := summariseAttn(bs, 23_000_000)
	if !ok {
		t.Fatal("a valid timeline was refused")
	}
	want := attnTimelineStats{Blocks: 4, Merging: 1, Splits: 4, MaxTiles: 16, WaitedLast: 0.3, FirstTile: 2,
		LoopEnd10: 10, LoopEnd50: 12, LoopEnd90: 20, LoopEndMax: 20, MergeMax: 3, ExitLast: 23, TBs: 1,
		MergeCount: 0.4, MergeWeights: 0.8, MergeSums: 1.2, MergeOut: 0.6}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if got.Blocks != want.Blocks || got.Merging != want.Merging || got.Splits != want.Splits || got.MaxTiles != want.MaxTiles ||
		!near(got.WaitedLast, want.WaitedLast) || !near(got.FirstTile, want.FirstTile) || !near(got.LoopEnd10, want.LoopEnd10) ||
		!near(got.LoopEnd50, want.LoopEnd50) || !near(got.LoopEnd90, want.LoopEnd90) || !near(got.LoopEndMax, want.LoopEndMax) ||
		!near(got.MergeMax, want.MergeMax) || !near(got.ExitLast, want.ExitLast) || !near(got.TBs, want.TBs) ||
		!near(got.MergeCount, want.MergeCount) || !near(got.MergeWeights, want.MergeWeights) ||
		!near(got.MergeSums, want.MergeSums) || !near(got.MergeOut, want.MergeOut) {
		t.Errorf("summary %+v, want %+v", got, want)
	}
	for name, bad := range map[string][]attnBlockTimes{
		"none":               nil,
		"no entry":           {{waited: 5, firstTile: 6, loopEnd: 7, exit: 8}},
		"waits before entry": {{entry: 5, waited: 4, firstTile: 6, loopEnd: 7, exit: 8}},
		"exit before loop":   {{entry: 1, waited: 2, firstTile: 3, loopEnd: 7, exit: 6}},
	} {
		if _, ok := summariseAttn(bad, 1); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// attnBlockRows lays out a launch's records (one token: block i is KV head
// i mod kvh, split i / kvh) as rows [head, split, SM, wait, first tile,
// loop end, exit], times in µs from the earliest wait, for the JSON; and
// how the loop ends group: the spread (max − min) of their means by KV
// head, by split and by SM, and the mean |Δ| between blocks of one SM. Why:
// at 32K the loops end over ~8 µs (run 18) with every block reading the
// same bytes; which of these the lateness follows says what could even it.
func attnBlockRows(bs []attnBlockTimes, kvh int) ([][7]float64, [4]float64) {
	t0 := uint64(math.MaxUint64)
	for _, b := range bs {
		t0 = min(t0, b.waited)
	}
	us := func(t uint64) float64 { return float64(t-t0) / 1e3 }
	rows := make([][7]float64, 0, len(bs))
	byHead, bySplit, bySM := map[int][]float64{}, map[int][]float64{}, map[int][]float64{}
	for _, b := range bs {
		h, z := b.index%kvh, b.index/kvh
		e := us(b.loopEnd)
		rows = append(rows, [7]float64{float64(h), float64(z), float64(b.sm), us(b.waited), us(b.firstTile), e, us(b.exit)})
		byHead[h] = append(byHead[h], e)
		bySplit[z] = append(bySplit[z], e)
		bySM[int(b.sm)] = append(bySM[int(b.sm)], e)
	}
	spreadOfMeans := func(g map[int][]float64) float64 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range g {
			var m float64
			for _, x := range v {
				m += x
			}
			m /= float64(len(v))
			lo, hi = min(lo, m), max(hi, m)
		}
		return hi - lo
	}
	var within float64
	n := 0
	for _, v := range bySM {
		for i := range v {
			for j := i + 1; j < len(v); j++ {
				within += math.Abs(v[i] - v[j])
				n++
			}
		}
	}
	if n > 0 {
		within /= float64(n)
	}
	return rows, [4]float64{spreadOfMeans(byHead), spreadOfMeans(bySplit), spreadOfMeans(bySM), within}
}

func TestAttnBlockRows(t *testing.T) {
	// kvh 2, 2 splits: blocks 0…3 are (head, split) (0,0) (1,0) (0,1)
	// (1,1); blocks 0 and 2 share SM 7, 1 and 3 SM 9. Loop ends (µs after
	// the first wait at 1 µs): 10, 14, 12, 20.
	ends := []uint64{10_000, 14_000, 12_000, 20_000}
	sms := []uint32{7, 9, 7, 9}
	var bs []attnBlockTimes
	for i := range ends {
		w := uint64(1_000 + 100*i)
		bs = append(bs, attnBlockTimes{entry: w, waited: w, firstTile: w + 1000, loopEnd: 1_000 + ends[i], exit: 2_000 + ends[i], sm: sms[i], index: i})
	}
	rows, spread := attnBlockRows(bs, 2)
	if len(rows) != 4 || rows[3] != [7]float64{1, 1, 9, 0.3, 1.3, 20, 21} {
		t.Fatalf("rows %v", rows)
	}
	// Means: by head 11 and 17 (spread 6); by split 12 and 16 (4); by SM
	// 11 and 17 (6); within an SM |10−12| and |14−20|: mean 4.
	want := [4]float64{6, 4, 6, 4}
	for i := range want {
		if math.Abs(spread[i]-want[i]) > 1e-9 {
			t.Errorf("spread %v, want %v", spread, want)
			break
		}
	}
}
