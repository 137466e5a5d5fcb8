package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

type recKind uint8

const (
	recLaunch recKind = iota + 1
	recHtoD           // args: device dst, arena offset, bytes
	recDtoH           // args: ReadRows buffer offset, device src, bytes
	recGemm           // args: A, B, D
	recMemset         // args: device dst, 32-bit value, words
	recDtoD           // args: device dst, device src, bytes
)

// rec is one unit of device work. Operators turn into lists of records;
// executing a record enqueues it on the stream. Records are compared by
// value to decide whether a forward matches a captured graph, so every
// field that affects the work is in the record and nothing else is.
type rec struct {
	kind  recKind
	nargs uint8
	pdl   bool  // launch with programmatic dependent launch
	clz   uint8 // > 1: launched in clusters of clz blocks along z (launchCluster)
	k     *kernel
	gemm  *driver.Gemm
	grid  [3]uint32
	block [2]uint32
	smem  uint32
	args  [maxArgs]uint64
}

// launch records a kernel launch (block = bx × by threads).
func (b *Backend) launch(k *kernel, gx, gy, gz, bx, by, smem uint32, args ...uint64) {
	if b.err != nil {
		return
	}
	if gx == 0 || gy == 0 || gz == 0 {
		return // nothing to do (an empty batch)
	}
	b.record(rec{kind: recLaunch, k: k, grid: [3]uint32{gx, gy, gz}, block: [2]uint32{bx, by}, smem: smem, pdl: b.pdl && k.pdl}, args)
}

// launchCluster records a launch in thread-block clusters of cz blocks
// along z (cz divides gz; the caller checked that the device can hold
// such clusters: clusterFits).
func (b *Backend) launchCluster(k *kernel, gx, gy, gz, bx, by, smem, cz uint32, args ...uint64) {
	if b.err != nil || gx == 0 || gy == 0 || gz == 0 {
		return
	}
	b.clusterRuns++
	b.record(rec{kind: recLaunch, k: k, grid: [3]uint32{gx, gy, gz}, block: [2]uint32{bx, by}, smem: smem, pdl: b.pdl && k.pdl, clz: uint8(cz)}, args)
}

// record submits launch r with its arguments.
func (b *Backend) record(r rec, args []uint64) {
	if len(args) > maxArgs {
		panic("cuda: too many kernel arguments")
	}
	r.nargs = uint8(copy(r.args[:], args))
	b.launches++
	b.submit(&r)
}

func (b *Backend) submitCopyHtoD(dst driver.DevPtr, off, n int) {
	if n == 0 || b.err != nil {
		return
	}
	r := rec{kind: recHtoD, nargs: 3}
	r.args[0], r.args[1], r.args[2] = uint64(dst), uint64(off), uint64(n)
	b.submit(&r)
}

// exec enqueues one record. The caller holds the OS thread.
func (b *Backend) exec(r *rec) error {
	if !b.bind() {
		return b.err
	}
	switch r.kind {
	case recLaunch:
		b.stepName(r)
		copy(b.argv[:], r.args[:r.nargs])
		// Kernels taking one struct parameter read it from argv's
		// contiguous slots through argp[0].
		if r.clz > 1 {
			// No fallback: the kernel reads its cluster's shared memory.
			if err := b.drv.LaunchCluster(r.k.fn, r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1], 1, r.smem, b.stream,
				unsafe.Pointer(&b.argp[0]), uint32(r.clz), r.pdl && !b.pdlRefused); err != nil {
				return fmt.Errorf("%s (grid %v, block %v, clusters of %d): %w", r.k.name, r.grid, r.block, r.clz, err)
			}
			return nil
		}
		if r.pdl && !b.pdlRefused {
			err := b.drv.LaunchPDL(r.k.fn, r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1], 1, r.smem, b.stream,
				unsafe.Pointer(&b.argp[0]))
			if err == nil {
				return nil
			}
			// Never let the optimisation cost the launch: plain launches
			// from now on (records keep their flag; exec ignores it).
			b.logf("cuda: programmatic dependent launch of %s refused (%v); launching without it from now on", r.k.name, err)
			b.pdlRefused, b.pdl = true, false
		}
		if err := b.drv.Launch(r.k.fn, r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1], 1, r.smem, b.stream,
			unsafe.Pointer(&b.argp[0])); err != nil {
			return fmt.Errorf("%s (grid %v, block %v): %w", r.k.name, r.grid, r.block, err)
		}
	case recHtoD:
		return b.drv.HtoDAsync(driver.DevPtr(r.args[0]), unsafe.Add(b.meta.host.p, int(r.args[1])), r.args[2], b.stream)
	case recDtoH:
		return b.drv.DtoHAsync(unsafe.Add(b.out.p, int(r.args[0])), driver.DevPtr(r.args[1]), r.args[2], b.stream)
	case recGemm:
		b.stepName(r)
		return r.gemm.Run(driver.DevPtr(r.args[0]), driver.DevPtr(r.args[1]), driver.DevPtr(r.args[2]), b.ws.p, b.ws.size, b.stream)
	case recMemset:
		return b.drv.MemsetD32Async(driver.DevPtr(r.args[0]), uint32(r.args[1]), r.args[2], b.stream)
	case recDtoD:
		return b.drv.DtoDAsync(driver.DevPtr(r.args[0]), driver.DevPtr(r.args[1]), r.args[2], b.stream)
	}
	return nil
}

// stepName notes r for STEP_TIMING's bench (stepNames): a launch's kernel
// name, prefixed "[lt] " where cuBLASLt products ran since the launch
// before it; they record no marks, so their time shows in this launch's.
func (b *Backend) stepName(r *rec) {
	if b.stepNames == nil {
		return
	}
	switch r.kind {
	case recGemm:
		b.stepAfterLt = true
	case recLaunch:
		n := r.k.name
		if b.stepAfterLt {
			n, b.stepAfterLt = "[lt] "+n, false
		}
		*b.stepNames = append(*b.stepNames, n)
	}
}

// submit runs a record eagerly, adds it to the graph being captured, or
// checks it against the graphs being replayed.
func (b *Backend) submit(r *rec) {
	if b.err != nil {
		return
	}
	b.writes++
	// Held operators run first, except before a metadata upload: it
	// writes a fresh arena region that nothing held reads, and letting it
	// pass lets RoPE and Attention stage their metadata while q/k
	// operators are held for fusion.
	if b.pend.kind != pendNone && !b.pend.flushing && r.kind != recHtoD {
		b.flush()
	}
	g := &b.g
	switch g.mode {
	case modeReplay:
		if g.match(r) {
			b.stepName(r)
			b.earlyLaunch()
			return
		}
		g.noteLeave(g.mismatch(r))
		b.leaveGraph()
	case modeCapture:
		g.cur = append(g.cur, *r)
		if !b.inlineCopies {
			return // enqueued by endStep, the metadata copies first (captureTrace)
		}
		runtime.LockOSThread()
		err := b.exec(r)
		runtime.UnlockOSThread()
		if err != nil {
			b.leaveGraph() // re-runs the records eagerly, this one included
		}
		return
	}
	runtime.LockOSThread()
	err := b.exec(r)
	if err != nil && r.kind != recLaunch && r.kind != recGemm {
		// A refused copy: rebind the context and try once more (see
		// retryCopy).
		b.logf("cuda: %v (thread %d, bound %d, current context %#x, ours %#x); retrying after rebinding",
			err, unix.Gettid(), b.tid, uint64(b.drv.CurrentCtx()), uint64(b.ctx))
		b.copyRetries++
		if b.drv.SetCurrent(b.ctx) == nil {
			b.tid = unix.Gettid()
			err = b.exec(r)
		}
	}
	b.fail(err)
	runtime.UnlockOSThread()
}

type graphMode uint8

const (
	modeEager graphMode = iota
	modeCapture
	modeReplay
)

const maxCandidates = 4

// maxFruitlessCaptures stops capturing forwards of a T whose last captures
// were never replayed (their traces keep changing), until one is: a
// replay shows that capturing that T pays again (another model on the same
// backend, a new layout).
const maxFruitlessCaptures = 16

// graph is a captured forward: its executable and the records it holds.
// A long forward may be captured in two parts (splitAt): exec holds the
// records before split and rest those from split on, so that a replay can
// launch exec as soon as the host's walk has matched its records and the
// device works while the host walks the rest (earlyLaunch).
type graph struct {
	exec  driver.GraphExec
	rest  driver.GraphExec // 0: exec holds the whole trace
	split int              // records in exec where rest != 0
	trace []rec
	used  uint64 // last use, for eviction
}

// destroy releases the graph's executables.
func (c *graph) destroy(drv *driver.Driver) {
	drv.GraphExecDestroy(c.exec) //nolint:errcheck // releasing
	if c.rest != 0 {
		drv.GraphExecDestroy(c.rest) //nolint:errcheck // releasing
	}
}

// launch enqueues the graph's parts from record from on (0 or split).
func (c *graph) launch(b *Backend, from int) error {
	if from == 0 {
		if err := b.drv.GraphLaunch(c.exec, b.stream); err != nil {
			return err
		}
	}
	if c.rest != 0 {
		return b.drv.GraphLaunch(c.rest, b.stream)
	}
	return nil
}

// splitAt is where a trace is captured in two parts: after its eighth
// kernel launch (an embedding and about a decoder layer: device work that
// outlasts the host's walk of the rest at ~0.2 µs a record), or 0 (one
// part) for a trace of fewer than 12 launches, whose walk is short anyway.
// It depends only on the records up to the split, so candidates that
// match the same records split alike (earlyLaunch).
func splitAt(trace []rec) int {
	const first, least = 8, 12
	launches, split := 0, 0
	for i := range trace {
		if trace[i].kind == recLaunch {
			if launches++; launches == first {
				split = i + 1
			}
		}
	}
	if launches < least {
		return 0
	}
	return split
}

// graphState follows the forward in progress.
type graphState struct {
	b       *Backend
	enabled bool
	maxT    int

	mode     graphMode
	inStep   bool // between Embed and ReadRows
	T        int  // tokens of the forward in progress
	clean    bool // began with an empty arena and allocated nothing: offsets are reproducible
	fellBack bool // left replay because no candidate matched
	cur      []rec
	alive    [maxCandidates]bool
	cands    []*graph // candidates of this T being matched (replay)
	ref      int      // a candidate that matched every record so far
	pos      int      // records matched so far
	launched int      // records of this replay already launched (earlyLaunch)
	split    bool     // capture long traces in two parts (INFERNIX_CUDA_GRAPH_SPLIT=0 turns it off; splitAt)

	graphs   map[int][]*graph
	want     map[int]bool // capture the next forward of T
	captures map[int]int  // captures of T since a graph of T was last replayed
	banned   map[int]bool
	clock    uint64

	// Statistics (tests, benchmarks).
	Replays, Captures, Fallbacks int
	EarlyLaunches                int // replays whose first part launched during the walk
	// The last graph launched and when (the bench's host-walk and
	// device-only figures).
	last       *graph
	launchedAt time.Time
	// Leaves counts why forwards left replay or capture, or could not
	// enter it (noteLeave; tests read it when no step replayed).
	Leaves map[string]int
}

// noteLeave counts one reason a forward left (or skipped) graph mode. The
// reasons are call sites and record kinds, a bounded set.
func (g *graphState) noteLeave(why string) {
	if g.Leaves == nil {
		g.Leaves = map[string]int{}
	}
	if len(g.Leaves) < 64 {
		g.Leaves[why]++
	}
}

// mismatch describes how r differs from the live candidates' record at the
// replay's position.
func (g *graphState) mismatch(r *rec) string {
	name := func(x *rec) string {
		if x.k != nil {
			return x.k.name
		}
		return fmt.Sprintf("record kind %d", x.kind)
	}
	for _, c := range g.cands {
		if g.pos >= len(c.trace) {
			return fmt.Sprintf("replay: %s past a graph's %d records", name(r), len(c.trace))
		}
		o := &c.trace[g.pos]
		switch {
		case o.kind != r.kind || o.k != r.k || o.gemm != r.gemm:
			return fmt.Sprintf("replay: %s where a graph has %s", name(r), name(o))
		case o.grid != r.grid || o.block != r.block || o.smem != r.smem || o.pdl != r.pdl || o.nargs != r.nargs:
			return fmt.Sprintf("replay: %s launched in another shape", name(r))
		}
		for i := 0; i < int(r.nargs); i++ {
			if o.args[i] != r.args[i] {
				return fmt.Sprintf("replay: %s argument %d differs", name(r), i)
			}
		}
	}
	return "replay: no live candidate"
}

func (g *graphState) init(b *Backend, opt Options) {
	g.b = b
	g.enabled = !opt.NoGraphs && b.drv.HasGraphs() && os.Getenv("INFERNIX_CUDA_GRAPHS") != "0"
	// Default since run 38 (H100: 178.6 against 177.1 tok/s at 512, 136.8
	// against 135.8 at 32K; tests/device/NOTES.md).
	g.split = os.Getenv("INFERNIX_CUDA_GRAPH_SPLIT") != "0"
	g.maxT = opt.MaxGraphTokens
	if g.maxT <= 0 {
		g.maxT = 16
	}
	g.graphs = map[int][]*graph{}
	g.want = map[int]bool{}
	g.captures = map[int]int{}
	g.banned = map[int]bool{}
}

// match advances the replay by one record; false when no candidate matches.
func (g *graphState) match(r *rec) bool {
	hit := -1
	for i, c := range g.cands {
		if !g.alive[i] {
			continue
		}
		if g.pos < len(c.trace) && c.trace[g.pos].same(r) {
			if hit < 0 {
				hit = i
			}
		} else {
			g.alive[i] = false
		}
	}
	if hit < 0 {
		return false
	}
	g.ref = hit
	g.pos++
	return true
}

// earlyLaunch launches the first part of the replay's graph once the walk
// has matched its records, if every live candidate splits there (they then
// share those records, and the one that matches to the end launches only
// its rest). The arena regions those records staged are written by now,
// and the walk stages the rest in fresh regions that the first part's
// copy does not read.
func (b *Backend) earlyLaunch() {
	g := &b.g
	if g.launched > 0 || len(g.cands) == 0 {
		return
	}
	ref := g.cands[g.ref]
	if ref.rest == 0 || ref.split != g.pos {
		return
	}
	for i, c := range g.cands {
		if g.alive[i] && (c.rest == 0 || c.split != g.pos) {
			return
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if !b.bind() {
		return
	}
	g.launched = g.pos
	g.EarlyLaunches++
	b.fail(b.drv.GraphLaunch(ref.exec, b.stream))
}

// beginStep starts a forward of T tokens (called by Embed before it stages
// anything).
func (b *Backend) beginStep(T int) {
	g := &b.g
	if g.mode != modeEager {
		b.leaveGraph()
	}
	g.inStep, g.T, g.clean, g.fellBack, g.pos, g.ref, g.launched = true, T, b.meta.off == 0, false, 0, 0, 0
	g.cands = g.cands[:0]
	if !g.enabled || T > g.maxT || g.banned[T] || !g.clean || b.err != nil {
		switch {
		case g.enabled && T <= g.maxT && g.banned[T]:
			g.noteLeave(fmt.Sprintf("T=%d banned after a failed capture", T))
		case g.enabled && T <= g.maxT && !g.clean:
			g.noteLeave("metadata arena not empty at the step's start")
		}
		return
	}
	if g.want[T] && g.captures[T] >= maxFruitlessCaptures {
		g.noteLeave(fmt.Sprintf("T=%d: %d captures never replayed", T, g.captures[T]))
	}
	if g.want[T] && g.captures[T] < maxFruitlessCaptures {
		// A forward of this T ran eagerly to the end (so every lazy
		// allocation and upload is done) and no graph matched it:
		// capture this one.
		g.want[T] = false
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if !b.bind() {
			return
		}
		if err := b.drv.BeginCapture(b.stream); err != nil {
			g.banned[T] = true
			b.logf("cuda: graph capture unavailable: %v", err)
			return
		}
		g.mode = modeCapture
		g.cur = g.cur[:0]
		return
	}
	if cs := g.graphs[T]; len(cs) > 0 {
		g.mode = modeReplay
		g.cands = append(g.cands, cs...)
		for i := range g.alive {
			g.alive[i] = i < len(cs)
		}
	}
}

// needEager is called before anything that cannot be part of a graph
// (allocation, a synchronisation, a host-dependent decision).
func (b *Backend) needEager() {
	b.flush()
	if b.g.mode != modeEager {
		if _, file, line, ok := runtime.Caller(1); ok {
			b.g.noteLeave(fmt.Sprintf("eager work at %s:%d", filepath.Base(file), line))
		}
		b.leaveGraph()
	}
	b.g.clean = false
}

// leaveGraph abandons replay or capture: the records of this forward so far
// run eagerly, and the forward continues eagerly.
func (b *Backend) leaveGraph() {
	g := &b.g
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var todo []rec
	switch g.mode {
	case modeReplay:
		if len(g.cands) > 0 {
			todo = g.cands[g.ref].trace[g.launched:g.pos] // the first part may be running
		}
		g.fellBack = true
	case modeCapture:
		if b.bind() {
			if gr, _ := b.drv.EndCapture(b.stream); gr != 0 {
				b.drv.GraphDestroy(gr) //nolint:errcheck // discarding
			}
		}
		todo = g.cur
	default:
		return
	}
	g.Fallbacks++
	g.mode = modeEager
	g.cands = g.cands[:0]
	for i := range todo {
		if err := b.exec(&todo[i]); err != nil {
			b.fail(err)
			return
		}
	}
}

// endStep is ReadRows' part: launch or finish the graph, or note that the
// forward ran eagerly. The caller holds the thread; the stream is
// synchronised after.
func (b *Backend) endStep() {
	g := &b.g
	defer func() { g.inStep, g.mode = false, modeEager }()
	switch g.mode {
	case modeReplay:
		var hit *graph
		for i, c := range g.cands {
			if g.alive[i] && g.pos == len(c.trace) {
				hit = c
				break
			}
		}
		if hit == nil {
			g.noteLeave("replay: the forward ended before a graph's last record")
			b.leaveGraph()
			g.want[g.T] = g.clean
			return
		}
		g.clock++
		hit.used = g.clock
		g.captures[g.T] = 0
		g.Replays++
		g.last, g.launchedAt = hit, time.Now()
		b.fail(hit.launch(b, g.launched))
	case modeCapture:
		split := 0
		if !b.inlineCopies && g.split {
			split = splitAt(g.cur)
		}
		ng := &graph{split: split}
		var err error
		if split > 0 {
			// The capture begun by beginStep takes the first part.
			if ng.exec, err = b.capturePart(g.cur[:split], false); err == nil {
				if ng.rest, err = b.capturePart(g.cur[split:], true); err != nil {
					b.drv.GraphExecDestroy(ng.exec) //nolint:errcheck // discarding
				}
			}
		} else {
			ng.exec, err = b.capturePart(g.cur, false)
		}
		if err != nil {
			b.logf("cuda: capturing a graph of %d records: %v", len(g.cur), err)
			b.leaveGraphAfterEnd()
			return
		}
		g.clock++
		ng.trace, ng.used = append([]rec(nil), g.cur...), g.clock
		kept := g.add(g.T, ng)
		if kept != ng {
			// A forward that matched no graph asked for this capture but a
			// known variant came first (e.g. steps alternating between
			// Forward and ForwardSample): capture the next one too.
			g.want[g.T] = true
		}
		g.captures[g.T]++
		g.Captures++
		b.fail(kept.launch(b, 0))
	default:
		if g.inStep && g.clean && g.enabled && g.T <= g.maxT && (len(g.graphs[g.T]) == 0 || g.fellBack) {
			g.want[g.T] = true
		}
	}
}

// captureTrace enqueues a forward's records into the capture: one copy of
// the metadata arena's staged range first, then the other records in
// order. Why: a copy node between two kernels breaks their PDL chain; the
// step's timeline (run 20) had layer 0's attention start ~11 µs after the
// q|k|v product, behind its metadata's copies, against ~1 µs for every
// other launch. Every region a forward stages is fresh (the arena is
// bump-allocated and reset only between forwards), so no launch of the
// forward reads or writes one before its own copy: copying all of them
// first changes no result. Copies to anything but the arena keep their
// place.
func (b *Backend) captureTrace(trace []rec) error {
	lo, hi := -1, 0
	for i := range trace {
		r := &trace[i]
		if r.kind != recHtoD {
			continue
		}
		off, n := int(r.args[1]), int(r.args[2])
		if driver.DevPtr(r.args[0]) != b.meta.dev+driver.DevPtr(off) {
			lo = -2 // not the arena's mirror: every copy keeps its place
			break
		}
		if n > 0 && (lo < 0 || off < lo) {
			lo = off
		}
		hi = max(hi, off+n)
	}
	if lo >= 0 {
		hoisted := rec{kind: recHtoD, nargs: 3}
		hoisted.args[0], hoisted.args[1], hoisted.args[2] = uint64(b.meta.dev+driver.DevPtr(lo)), uint64(lo), uint64(hi-lo)
		if err := b.exec(&hoisted); err != nil {
			return err
		}
	}
	for i := range trace {
		if lo >= 0 && trace[i].kind == recHtoD {
			continue
		}
		if err := b.exec(&trace[i]); err != nil {
			return err
		}
	}
	return nil
}

// capturePart records trace into the stream's capture (begun by beginStep,
// or here when begin is set), ends it and instantiates the graph. On
// failure the capture is ended and nothing is kept.
func (b *Backend) capturePart(trace []rec, begin bool) (driver.GraphExec, error) {
	if begin {
		if err := b.drv.BeginCapture(b.stream); err != nil {
			return 0, err
		}
	}
	if !b.inlineCopies { // else submit enqueued them as they came
		if err := b.captureTrace(trace); err != nil {
			if gr, _ := b.drv.EndCapture(b.stream); gr != 0 {
				b.drv.GraphDestroy(gr) //nolint:errcheck // discarding
			}
			return 0, err
		}
	}
	gr, err := b.drv.EndCapture(b.stream)
	if err != nil || gr == 0 {
		return 0, fmt.Errorf("ending a capture of %d records: %v", len(trace), err)
	}
	ex, err := b.drv.GraphInstantiate(gr)
	b.drv.GraphDestroy(gr) //nolint:errcheck // the executable keeps its own copy
	if err != nil {
		return 0, fmt.Errorf("instantiating a graph of %d records: %w", len(trace), err)
	}
	return ex, nil
}

// leaveGraphAfterEnd runs the captured records eagerly after a capture that
// already ended but failed or could not be instantiated; T is not captured
// again.
func (b *Backend) leaveGraphAfterEnd() {
	g := &b.g
	g.banned[g.T] = true
	g.Fallbacks++
	g.mode = modeEager
	for i := range g.cur {
		if err := b.exec(&g.cur[i]); err != nil {
			b.fail(err)
			return
		}
	}
}

// add keeps a new candidate for T, dropping a duplicate (the existing graph
// is returned instead) or the least recently used beyond maxCandidates.
func (g *graphState) add(T int, ng *graph) *graph {
	g.b.pin()
	defer g.b.unpin()
	cs := g.graphs[T]
	for _, c := range cs {
		if sameTrace(c.trace, ng.trace) {
			ng.destroy(g.b.drv) // a duplicate
			c.used = ng.used
			return c
		}
	}
	if len(cs) >= maxCandidates {
		old := 0
		for i, c := range cs {
			if c.used < cs[old].used {
				old = i
			}
		}
		cs[old].destroy(g.b.drv) // evicted
		cs = append(cs[:old], cs[old+1:]...)
	}
	g.graphs[T] = append(cs, ng)
	return ng
}

func sameTrace(a, b []rec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].same(&b[i]) {
			return false
		}
	}
	return true
}

// same compares two records as == would, reading only the argument slots
// in use (most launches take well under maxArgs). Slots past nargs are
// always zero.
func (r *rec) same(o *rec) bool {
	return r.kind == o.kind && r.nargs == o.nargs && r.pdl == o.pdl && r.k == o.k && r.gemm == o.gemm &&
		r.grid == o.grid && r.block == o.block && r.smem == o.smem && slices.Equal(r.args[:r.nargs], o.args[:o.nargs])
}

// dropAll destroys every graph (a buffer they reference moved).
func (g *graphState) dropAll() {
	if g.b == nil {
		return
	}
	g.b.pin()
	defer g.b.unpin()
	for T, cs := range g.graphs {
		for _, c := range cs {
			c.destroy(g.b.drv)
		}
		delete(g.graphs, T)
		g.last = nil
	}
	if g.mode == modeReplay {
		// Cannot happen: callers leave graph mode before moving buffers.
		panic("cuda: graphs dropped during replay")
	}
}

func (g *graphState) closeAll() {
	if g.mode == modeCapture {
		if gr, _ := g.b.drv.EndCapture(g.b.stream); gr != 0 {
			g.b.drv.GraphDestroy(gr) //nolint:errcheck // closing
		}
		g.mode = modeEager
	}
	g.mode = modeEager
	g.dropAll()
}

// GraphStats reports graph replays, captures and fallbacks to eager
// execution so far (tests and benchmarks).
func (b *Backend) GraphStats() (replays, captures, fallbacks int) {
	return b.g.Replays, b.g.Captures, b.g.Fallbacks
}
