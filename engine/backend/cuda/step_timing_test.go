package cuda

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// stepSlots and the slot layout are kernels/prelude.cuh's STEP_TIMING
// table: 8 u64 a slot, pairs of (least, greatest) grid id, entry, PDL_WAIT
// return and exit.
const stepSlots = 4096

// stepLaunch is one launch's record, times in µs from the step's first
// entry (NaN where the kernel has no STEP_TIMER or no PDL_ENTRY).
type stepLaunch struct {
	Name                 string
	Grid                 uint64
	Entry, Waited, Exit  float64 // the first block's
	EntryLast, WaitedEnd float64 // the last block's entry and wait return
	ExitLast             float64 // the launch's end
	Adds                 float64 // ExitLast − the previous launch's ExitLast: what it adds to the step
}

// stepKernel summarises the launches of one kernel over a step.
type stepKernel struct {
	Name     string
	Launches int
	Adds     float64 // the mean of Adds (µs)
	Span     float64 // the mean ExitLast − Entry
	// The mean time from the previous launch's end to this one's first
	// wait return (negative: it had waited before that end was recorded)
	// and to its first entry (negative: it entered during the previous).
	WaitAfter, EntryAfter float64
}

type stepTimeline struct {
	Launches  []stepLaunch
	Kernels   []stepKernel
	Span      float64 // last exit − first entry
	Collided  int     // slots that two launches shared
	Unmatched bool    // the launches' count differs from the names recorded
}

// summariseStep turns the table into launches in grid-id order, named by
// names (the launches of the captured step in order) when the counts agree.
func summariseStep(tab []uint64, names []string) stepTimeline {
	var s stepTimeline
	type slot struct{ v [8]uint64 }
	var used []slot
	for i := 0; i+8 <= len(tab); i += 8 {
		var sl slot
		copy(sl.v[:], tab[i:i+8])
		if sl.v[0] == math.MaxUint64 {
			continue
		}
		if sl.v[0] != sl.v[1] {
			s.Collided++
		}
		used = append(used, sl)
	}
	sort.Slice(used, func(i, j int) bool { return used[i].v[0] < used[j].v[0] })
	t0 := uint64(math.MaxUint64)
	for _, u := range used {
		for _, k := range []int{2, 4} {
			if u.v[k] != math.MaxUint64 {
				t0 = min(t0, u.v[k])
			}
		}
	}
	us := func(t uint64, set bool) float64 {
		if !set {
			return math.NaN()
		}
		return float64(int64(t-t0)) / 1e3
	}
	s.Unmatched = len(names) != len(used)
	prevEnd := math.NaN()
	for i, u := range used {
		l := stepLaunch{Grid: u.v[0],
			Entry: us(u.v[2], u.v[2] != math.MaxUint64), EntryLast: us(u.v[3], u.v[3] != 0),
			Waited: us(u.v[4], u.v[4] != math.MaxUint64), WaitedEnd: us(u.v[5], u.v[5] != 0),
			Exit: us(u.v[6], u.v[6] != math.MaxUint64), ExitLast: us(u.v[7], u.v[7] != 0)}
		if !s.Unmatched {
			l.Name = names[i]
		} else {
			l.Name = fmt.Sprintf("launch%d", i)
		}
		l.Adds = l.ExitLast - prevEnd
		if !math.IsNaN(l.ExitLast) {
			prevEnd = l.ExitLast
			s.Span = max(s.Span, l.ExitLast)
		}
		s.Launches = append(s.Launches, l)
	}
	// Per kernel, in order of first appearance.
	idx := map[string]int{}
	sums := map[string]*[4]float64{}
	counts := map[string]*[4]int{}
	for i, l := range s.Launches {
		k, ok := idx[l.Name]
		if !ok {
			k = len(s.Kernels)
			idx[l.Name] = k
			s.Kernels = append(s.Kernels, stepKernel{Name: l.Name})
			sums[l.Name], counts[l.Name] = &[4]float64{}, &[4]int{}
		}
		s.Kernels[k].Launches++
		add := func(j int, v float64) {
			if !math.IsNaN(v) {
				sums[l.Name][j] += v
				counts[l.Name][j]++
			}
		}
		add(0, l.Adds)
		add(1, l.ExitLast-l.Entry)
		if i > 0 {
			pe := s.Launches[i-1].ExitLast
			add(2, l.Waited-pe)
			add(3, l.Entry-pe)
		}
	}
	for i := range s.Kernels {
		k := &s.Kernels[i]
		sm, c := sums[k.Name], counts[k.Name]
		mean := func(j int) float64 {
			if c[j] == 0 {
				return math.NaN()
			}
			return sm[j] / float64(c[j])
		}
		k.Adds, k.Span, k.WaitAfter, k.EntryAfter = mean(0), mean(1), mean(2), mean(3)
	}
	return s
}

// jsonable is s for encoding/json, which refuses NaN: times not recorded
// become null.
func (s stepTimeline) jsonable() map[string]any {
	num := func(v float64) any {
		if math.IsNaN(v) {
			return nil
		}
		return math.Round(v*1000) / 1000
	}
	var ls []map[string]any
	for _, l := range s.Launches {
		ls = append(ls, map[string]any{"name": l.Name, "grid": l.Grid, "entry": num(l.Entry), "entry_last": num(l.EntryLast),
			"waited": num(l.Waited), "waited_last": num(l.WaitedEnd), "exit": num(l.Exit), "exit_last": num(l.ExitLast), "adds": num(l.Adds)})
	}
	var ks []map[string]any
	for _, k := range s.Kernels {
		ks = append(ks, map[string]any{"name": k.Name, "launches": k.Launches, "adds": num(k.Adds), "span": num(k.Span),
			"wait_after": num(k.WaitAfter), "entry_after": num(k.EntryAfter)})
	}
	return map[string]any{"launches": ls, "kernels": ks, "span": num(s.Span), "collided": s.Collided, "unmatched": s.Unmatched}
}

// pointStepTables sets every loaded module's step_tl to table (0: no
// table) and returns how many modules have one (those compiled with
// STEP_TIMING=1).
func pointStepTables(b *Backend, table driver.DevPtr) int {
	b.flush()
	b.pin()
	defer b.unpin()
	v := binary.LittleEndian.AppendUint64(nil, uint64(table))
	n := 0
	for _, m := range b.mods {
		addr, size, err := b.drv.ModuleGetGlobal(m, "step_tl")
		if err != nil || size != 8 {
			continue
		}
		if err := b.upload(addr, v); err != nil {
			panic(err)
		}
		n++
	}
	return n
}

// stepTablePattern is an empty table: least values all ones, greatest zero.
func stepTablePattern() []byte {
	p := make([]byte, stepSlots*8*8)
	for i := 0; i < stepSlots*8; i += 2 {
		binary.LittleEndian.PutUint64(p[8*i:], math.MaxUint64)
	}
	return p
}

// benchStepTiming (INFERNIX_BENCH_STEP_TIMING=1, every module compiled with
// STEP_TIMING=1) times every launch of a graph-replayed decode step at
// context ctx (step runs one decode forward of the token at that
// position), prints what each kernel adds to the step and one layer's
// launches, and keeps the whole table in res.
func benchStepTiming(b *Backend, res map[string]any, label string, ctx int, step func(pos int)) {
	buf, err := b.malloc(stepSlots*8*8, "step timeline")
	if err != nil {
		panic(err)
	}
	defer b.free(buf)
	pattern := stepTablePattern()
	if pointStepTables(b, buf) == 0 {
		panic("step timing: no module has step_tl (compiled with STEP_TIMING=1?)")
	}
	// Later launches record nowhere.
	defer pointStepTables(b, 0)
	b.pin()
	if err := b.upload(buf, pattern); err != nil {
		panic(err)
	}
	b.unpin()
	for i := 0; i < 4; i++ { // eager, capture, replay
		step(ctx + i)
	}
	b.sync()
	b.pin()
	if err := b.upload(buf, pattern); err != nil {
		panic(err)
	}
	b.unpin()
	// The timed step's launches by name, in order, whether they run
	// eagerly, are captured or replay a graph (submit, exec).
	var names []string
	b.stepNames, b.stepAfterLt = &names, false
	step(ctx + 4)
	b.flush()
	b.sync()
	b.stepNames = nil
	host := make([]float32, stepSlots*8*2)
	b.ReadRows(&Tensor{ptr: buf, rows: 1, cols: len(host), dt: backend.F32}, host)
	if b.err != nil {
		panic(b.err)
	}
	tab := make([]uint64, stepSlots*8)
	for i := range tab {
		tab[i] = hostU64(host, i)
	}
	s := summariseStep(tab, names)
	res["step_timing_"+label] = s.jsonable()
	fmt.Printf("step timing %-16s  %d launches (%d names recorded, %d slots shared)  span %.1f µs\n",
		label, len(s.Launches), len(names), s.Collided, s.Span)
	for _, k := range s.Kernels {
		fmt.Printf("step timing %-16s  %-28s ×%-3d adds %7.2f µs  span %7.2f  wait after prev end %6.2f  entry after %6.2f\n",
			label, k.Name, k.Launches, k.Adds, k.Span, k.WaitAfter, k.EntryAfter)
	}
	// One layer in the middle: the launches from the middle one on.
	mid := len(s.Launches) / 2
	var line strings.Builder
	for _, l := range s.Launches[mid:min(len(s.Launches), mid+8)] {
		fmt.Fprintf(&line, " | %s entry %.2f–%.2f wait %.2f–%.2f exit %.2f–%.2f (+%.2f)", l.Name, l.Entry, l.EntryLast, l.Waited, l.WaitedEnd, l.Exit, l.ExitLast, l.Adds)
	}
	fmt.Printf("step timing %-16s  from launch %d:%s\n", label, mid, line.String())
}

func TestStepTimelineSummary(t *testing.T) {
	tab := make([]uint64, stepSlots*8)
	pat := stepTablePattern()
	for i := range tab {
		tab[i] = binary.LittleEndian.Uint64(pat[8*i:])
	}
	// Grid ids 4100, 4101, 4102 (slots 4, 5, 6), times in ns from 1e9:
	// a (entry 0–100, wait 500–600, exit 2000–3000); b (no STEP_TIMER:
	// wait 2500–2600, exit unknown); a again (entry 2800–2900, wait
	// 3100–3300, exit 4000–5500).
	put := func(g uint64, v [6]uint64, has [3]bool) {
		s := tab[(g%stepSlots)*8:]
		s[0], s[1] = g, g
		for k := 0; k < 3; k++ {
			if has[k] {
				s[2+2*k], s[3+2*k] = 1e9+v[2*k], 1e9+v[2*k+1]
			}
		}
	}
	put(4100, [6]uint64{0, 100, 500, 600, 2000, 3000}, [3]bool{true, true, true})
	put(4101, [6]uint64{0, 0, 2500, 2600, 0, 0}, [3]bool{false, true, false})
	put(4102, [6]uint64{2800, 2900, 3100, 3300, 4000, 5500}, [3]bool{true, true, true})
	s := summariseStep(tab, []string{"a", "b", "a"})
	if s.Unmatched || s.Collided != 0 || len(s.Launches) != 3 || s.Span != 5.5 {
		t.Fatalf("summary %+v", s)
	}
	l := s.Launches
	if l[0].Name != "a" || l[1].Name != "b" || l[0].Entry != 0 || l[0].ExitLast != 3 || l[0].Waited != 0.5 || l[1].WaitedEnd != 2.6 {
		t.Fatalf("launches %+v", l)
	}
	if !math.IsNaN(l[1].Entry) || !math.IsNaN(l[1].ExitLast) || !math.IsNaN(l[1].Adds) {
		t.Errorf("launch b has no entry or exit: %+v", l[1])
	}
	// The third adds 5.5 − 3 (the last known end), entered 0.2 µs before
	// the previous launch's (unknown) end: no EntryAfter from b.
	if l[2].Adds != 2.5 {
		t.Errorf("adds %v, want 2.5", l[2].Adds)
	}
	if len(s.Kernels) != 2 || s.Kernels[0].Name != "a" || s.Kernels[0].Launches != 2 || s.Kernels[0].Span != (3+2.7)/2 {
		t.Fatalf("kernels %+v", s.Kernels)
	}
	// a's first launch has no previous; its second follows b (no end):
	// neither gives a wait-after.
	if !math.IsNaN(s.Kernels[0].WaitAfter) || s.Kernels[1].WaitAfter != 2.5-3 {
		t.Errorf("wait after: %+v", s.Kernels)
	}
	if _, err := json.Marshal(s.jsonable()); err != nil {
		t.Errorf("the timeline does not encode: %v", err)
	}
	// Two launches in one slot, and names that do not match.
	tab[6*8] = 4102 - stepSlots
	s = summariseStep(tab, []string{"a"})
	if s.Collided != 1 || !s.Unmatched || s.Launches[0].Name != "launch0" {
		t.Errorf("collision: %+v", s)
	}
}
