// Package sched runs requests on a model: lanes, continuous batching (requests
// join and leave between steps), chunked prefill interleaved with decoding,
// a bounded queue, cancellation, and preemption with later recompute when the
// KV cache runs out.
//
// Invariants:
//   - All model work happens on one goroutine (the loop), locked to its OS
//     thread, as device backends require.
//   - A lane's blocks hold exactly its computed tokens. Full blocks may be
//     shared through the prefix cache (engine/prefix): shared blocks are
//     read-only, and a lane writes only its own blocks past them. A preempted
//     lane gives all of its references back and, when readmitted, resumes
//     from the cache's longest prefix of its tokens (or from scratch).
//   - Every accepted request gets exactly one final event (Done=true).
package sched

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/kv"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/prefix"
	"github.com/infernix/infernix/engine/sample"
)

// ErrQueueFull is returned by Submit when the waiting queue is at its bound.
var ErrQueueFull = errors.New("server busy: request queue is full")

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("scheduler is shut down")

// Config bounds the scheduler.
type Config struct {
	MaxLanes     int // sequences decoded together
	MaxQueue     int // requests waiting for a lane
	PrefillChunk int // most prompt tokens computed per step
	MaxContext   int // longest sequence (prompt + generated)
	// SnapshotInterval is how many blocks apart hybrid models' recurrent
	// state is snapshotted for prefix reuse, besides each prompt's last full
	// block (0 = 16).
	SnapshotInterval int
	// SnapshotDisk keeps those snapshots across restarts (nil: memory only).
	SnapshotDisk SnapshotDisk
	// SaveInterval is how often blocks and snapshots made since the last
	// save are handed to PrefixDisk and SnapshotDisk, which write them in the
	// background (--prefix-cache-save-mins); 0 saves each as soon as it is
	// made. Evicted and shutdown-time entries are saved regardless (saver.go).
	SaveInterval time.Duration
	// Runner, when set, runs the loop (a device backend's owning thread);
	// otherwise the loop gets its own locked goroutine.
	Runner func(func())
	// NoPrefixReuse turns the prefix cache off: every prompt is computed in full.
	NoPrefixReuse bool
	// PrefixSeed are the extra key bytes of every cached block (the model
	// fingerprint, adapter): blocks computed under another seed never match.
	PrefixSeed []byte
	// PrefixDisk, when set, persists cached blocks and extends lookups from
	// it (the model must expose a KV pool that copies blocks; see
	// backend.KVCacheOwner).
	PrefixDisk prefix.Disk
	// PrefixHost, when set, receives blocks evicted from the device pool
	// and is searched before PrefixDisk (same KV pool requirement).
	PrefixHost *prefix.HostPool
	// SpecTokens > 0 turns on speculative decoding by prompt lookup: a
	// decode lane proposes up to this many tokens from an earlier
	// occurrence of its last tokens, kept only where sampling picks them
	// (spec.go; outputs are unchanged).
	SpecTokens int
}

// Request is one generation.
type Request struct {
	Prompt     []int32
	MaxTokens  int // new tokens; 0 = only prompt processing (scoring)
	Sampling   sample.Params
	StopTokens []int32
	// Logprobs > 0 returns the chosen token's log-prob and that many
	// alternatives for each generated token; 0 only the chosen log-prob; < 0 none.
	Logprobs int
	// PromptLogprobs returns, for each prompt position i ≥ 1, the log-prob of
	// prompt token i and PromptTop alternatives.
	PromptLogprobs bool
	PromptTop      int
	// Thinking budget: when the output is inside a think block (InThink at
	// the start, or after ThinkOpen is generated) for ThinkBudget tokens, the
	// ForceClose tokens are inserted and the answer follows. < 0: no budget.
	ThinkBudget int
	InThink     bool
	ThinkOpen   int32
	ThinkClose  int32
	ForceClose  []int32
	// CacheSalt isolates prefix-cache entries: requests reuse only blocks
	// computed under the same salt (e.g. per tenant).
	CacheSalt string
	// SharedPrefix is how many leading prompt tokens are the system prompt
	// and tool definitions (0 = unknown), what other conversations are
	// likely to share. Hybrid models keep a state snapshot at the last full
	// block at or before it, so that the next conversation resumes there
	// (snapshots.go); other models ignore it.
	SharedPrefix int
	// Constraint, when set, limits the tokens generated outside think
	// blocks (constraint.go). It is the request's own: not shared.
	// MayOpenThink says that the reply may start with ThinkOpen (the
	// prompt leaves the think block to the model, as Qwen3's template does
	// with thinking on); the constraint then allows it as the first token.
	Constraint   Constraint
	MayOpenThink bool
}

// Event is a step of a request's output, in order; the last has Done set.
type Event struct {
	Token   int32
	Logprob float32
	Top     []sample.TokenLogProb
	Forced  bool // inserted by the thinking budget, not sampled

	// Prompt scoring results (once, before generated tokens).
	PromptLogprobs []PromptLogprob

	Done   bool
	Finish string // stop, length, cancelled, error
	Err    error
	Stats  Stats
}

// PromptLogprob scores one prompt token.
type PromptLogprob struct {
	Token   int32
	Logprob float32
	Top     []sample.TokenLogProb
}

// Stats are a request's counts and timings, filled in the final event.
type Stats struct {
	PromptTokens, GeneratedTokens, CachedTokens int
	Queue, Prefill, TTFT, Decode, Total         time.Duration
	Preemptions                                 int
}

// Counters are the scheduler's gauges for /metrics.
type Counters struct {
	Queued, Busy, MaxLanes int
	KVUsed, KVTotal        int // KVUsed excludes idle cached blocks (reclaimable)
	KVCached               int // blocks indexed by the prefix cache, in use or idle
	// Prefix cache: lookups, lookups that reused ≥ 1 block, tokens reused.
	PrefixQueries, PrefixHits, PrefixHitTokens uint64
	// Hybrid models' recurrent-state snapshots held in host memory.
	Snapshots     int
	SnapshotBytes int64
	// Speculative decoding (Config.SpecTokens): tokens sampled on
	// speculating lanes, and of them those a draft had already computed.
	SpecTokens, SpecDraftsKept int64
}

type lane struct {
	req      *Request
	ctx      context.Context
	events   chan Event
	tokens   []int32 // prompt + generated
	nPrompt  int
	computed int
	blocks   []int32
	sampler  *sample.Sampler
	gen      int
	inThink  bool
	thinkN   int
	budget   int
	forced   []int32
	stop     map[int32]bool
	mask     []uint64 // Request.Constraint's mask for the draw after token maskFor-1
	maskFor  int
	admitted int64 // admission order: the youngest is preempted first
	slot     int32 // recurrent-state slot of hybrid models (-1: none)
	running  bool
	promptLP []PromptLogprob

	submitted, started, firstTok time.Time
	prefillDone                  time.Time
	preempted                    int

	// Prefix cache state: the root key; the key of the last keyed full block
	// and how many leading blocks are keyed; the blocks this lane pinned; the
	// prompt tokens reused at first admission (Stats.CachedTokens).
	seed     prefix.Key
	chainKey prefix.Key
	chainN   int
	pinned   []int32
	cached   int
	// sharedAt is the block ending the request's system/tools block
	// (Request.SharedPrefix; 0: unknown), where hybrid models keep a shared
	// snapshot.
	sharedAt int
}

// Scheduler owns a model and its KV allocator.
type Scheduler struct {
	m     model.Model
	alloc *kv.Allocator
	pc    *prefix.Cache // nil when reuse is off or the model cannot resume from KV alone
	snaps *snapStore    // recurrent-state snapshots of hybrid models (nil otherwise)
	disk  prefix.Disk   // nil: not persisted
	tiers []prefix.Disk // host pool, then disk: searched past the device cache
	kvc   backend.KVBlockCopier
	kvbuf []byte
	save  saver // persistence rounds (saver.go)
	cfg   Config
	vocab int

	mu      sync.Mutex
	waiting []*lane
	wake    chan struct{}
	calls   chan func()
	running []*lane
	busy    int
	seq     int64
	closed  bool
	abort   bool
	done    chan struct{}

	logits []float32
	batch  model.Batch
	outIdx []*lane
	plan   []*lane
	planN  []int
	snap   []*lane
	// freeSlots are the model's unused recurrent-state slots (nil for
	// attention-only models).
	freeSlots []int32

	// Sampling: ds is the model's device sampling (nil: none, or off),
	// used for a step when it serves every output row (planSampling);
	// sreq and sres are that step's requests and results, hres the host
	// path's request and result (Top storage is reused).
	ds    model.Sampling
	dsLim backend.SampleLimits
	sreq  []backend.SampleRequest
	sres  []backend.SampleResult
	hreq  [1]backend.SampleRequest
	hres  [1]backend.SampleResult

	// Speculative decoding (spec.go): each planned lane's drafts this step,
	// and the counters.
	planDraft          [][]int32
	specRows, specKept atomic.Int64
}

// maxOutputs bounds the logits rows of one step (prompt scoring uses chunks of
// at most this many tokens).
const maxOutputs = 64

// New starts the scheduler loop on its own locked goroutine.
func New(m model.Model, cfg Config) *Scheduler {
	if cfg.MaxLanes <= 0 {
		cfg.MaxLanes = 4
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 64
	}
	if cfg.PrefillChunk <= 0 {
		cfg.PrefillChunk = 256
	}
	if mb := m.MaxBatchTokens() - cfg.MaxLanes; cfg.PrefillChunk > mb {
		cfg.PrefillChunk = max(mb, 1)
	}
	if cfg.SnapshotInterval <= 0 {
		cfg.SnapshotInterval = defaultSnapshotInterval
	}
	if cfg.MaxLanes > maxOutputs {
		cfg.MaxLanes = maxOutputs
	}
	if cfg.MaxContext <= 0 || cfg.MaxContext > m.KVBlocks()*64 {
		cfg.MaxContext = min(m.KVBlocks()*64, m.Config().MaxPositionEmbeddings)
	}
	s := &Scheduler{m: m, alloc: kv.New(m.KVBlocks()), cfg: cfg, vocab: m.Config().VocabSize, wake: make(chan struct{}, 1), calls: make(chan func()), done: make(chan struct{})}
	s.save = saver{every: max(cfg.SaveInterval, 0), next: time.Now().Add(max(cfg.SaveInterval, 0)), dirty: map[prefix.Key]struct{}{}}
	if st, ok := m.(stateful); ok {
		n := st.StateSlots()
		s.cfg.MaxLanes = min(s.cfg.MaxLanes, n)
		for i := n - 1; i >= 0; i-- {
			s.freeSlots = append(s.freeSlots, int32(i))
		}
	}
	s.logits = make([]float32, maxOutputs*s.vocab)
	if ds, ok := m.(model.Sampling); ok {
		if lim := ds.SampleLimits(); lim.Rows > 0 {
			s.ds, s.dsLim = ds, lim
			s.sres = make([]backend.SampleResult, maxOutputs)
		}
	}
	snapper, hasSnapshots := m.(stateSnapshots)
	if !cfg.NoPrefixReuse && (prefix.Reusable(m) || hasSnapshots) {
		s.pc = prefix.New(s.alloc)
		if hasSnapshots && !prefix.Reusable(m) {
			s.snaps = newSnapStore(snapper, &s.save)
			s.snaps.disk = cfg.SnapshotDisk
		}
		s.setupTiers(m, cfg.PrefixHost, cfg.PrefixDisk)
	}
	if cfg.Runner != nil {
		go cfg.Runner(s.loop)
	} else {
		go s.loop()
	}
	return s
}

// KeepsSnapshots reports whether the scheduler keeps recurrent-state
// snapshots for prefix reuse (hybrid models, reuse on): only then does
// Request.SharedPrefix matter, so callers may skip computing it otherwise.
func (s *Scheduler) KeepsSnapshots() bool { return s.snaps != nil }

// Config returns the effective configuration.
func (s *Scheduler) Config() Config { return s.cfg }

// Counters reports queue depth, busy lanes and KV usage.
func (s *Scheduler) Counters() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := s.alloc.Total()
	c := Counters{Queued: len(s.waiting), Busy: s.busy, MaxLanes: s.cfg.MaxLanes, KVUsed: total - s.alloc.FreeCount(), KVTotal: total}
	if s.pc != nil {
		ps := s.pc.Stats()
		c.KVUsed = max(c.KVUsed-ps.Idle, 0)
		c.KVCached, c.PrefixQueries, c.PrefixHits, c.PrefixHitTokens = ps.Blocks, ps.Queries, ps.Hits, ps.HitTokens
	}
	if s.snaps != nil {
		c.Snapshots, c.SnapshotBytes = int(s.snaps.count.Load()), s.snaps.total.Load()
	}
	c.SpecTokens, c.SpecDraftsKept = s.specRows.Load(), s.specKept.Load()
	return c
}

// Validate checks a request against the context length.
func (s *Scheduler) Validate(r *Request) error {
	if len(r.Prompt) == 0 {
		return fmt.Errorf("the prompt is empty")
	}
	if r.MaxTokens < 0 {
		return fmt.Errorf("max tokens %d is negative", r.MaxTokens)
	}
	if len(r.Prompt)+r.MaxTokens > s.cfg.MaxContext {
		return &ContextError{Prompt: len(r.Prompt), MaxTokens: r.MaxTokens, Context: s.cfg.MaxContext}
	}
	for _, t := range r.Prompt {
		if t < 0 || int(t) >= s.vocab {
			return fmt.Errorf("token id %d is outside the vocabulary (size %d)", t, s.vocab)
		}
	}
	return nil
}

// ContextError says the request does not fit the context window.
type ContextError struct{ Prompt, MaxTokens, Context int }

func (e *ContextError) Error() string {
	return fmt.Sprintf("this model's context is %d tokens, but the request needs %d prompt tokens + %d max tokens = %d", e.Context, e.Prompt, e.MaxTokens, e.Prompt+e.MaxTokens)
}

// Submit queues a request. Events arrive on the returned channel until one
// with Done; cancelling ctx ends the request within one step.
func (s *Scheduler) Submit(ctx context.Context, r *Request) (<-chan Event, error) {
	if err := s.Validate(r); err != nil {
		return nil, err
	}
	l := &lane{req: r, ctx: ctx, events: make(chan Event, 256), submitted: time.Now(), budget: -1, slot: -1}
	l.tokens = append(make([]int32, 0, len(r.Prompt)+min(r.MaxTokens, 4096)+1), r.Prompt...)
	l.nPrompt = len(r.Prompt)
	l.seed = prefix.Seed(s.cfg.PrefixSeed, []byte(r.CacheSalt))
	l.cached = -1
	l.sharedAt = min(max(r.SharedPrefix, 0), l.nPrompt) / prefix.BlockSize
	l.sampler = sample.New(r.Sampling, s.vocab, r.Prompt)
	l.stop = make(map[int32]bool, len(r.StopTokens))
	for _, t := range r.StopTokens {
		l.stop[t] = true
	}
	l.inThink = r.InThink
	if r.ThinkBudget >= 0 {
		// Leave the answer at least a quarter of max_tokens.
		l.budget = min(r.ThinkBudget, max(r.MaxTokens-r.MaxTokens/4-len(r.ForceClose), 0))
		if l.inThink && l.budget == 0 {
			l.forced = append(l.forced, r.ForceClose...)
			l.budget = -1
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if len(s.waiting) >= s.cfg.MaxQueue {
		s.mu.Unlock()
		return nil, ErrQueueFull
	}
	s.waiting = append(s.waiting, l)
	s.mu.Unlock()
	s.signal()
	return l.events, nil
}

// Close stops accepting requests; running ones finish.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

// Run runs f on the scheduler's loop goroutine between steps and waits for
// it. Direct model calls (benchmarks, tools) must go through Run: a device
// backend's thread is held by the loop, so a call from elsewhere would wait
// forever. It fails once the loop has exited.
func (s *Scheduler) Run(f func()) error {
	done := make(chan struct{})
	select {
	case s.calls <- func() { defer close(done); f() }:
	case <-s.done:
		return ErrClosed
	}
	<-done
	return nil
}

// Shutdown stops accepting requests, cancels those queued or running, and
// returns once the loop has exited and no model call is in flight (so the
// caller may release the weights).
func (s *Scheduler) Shutdown() {
	s.mu.Lock()
	s.closed = true
	s.abort = true
	s.mu.Unlock()
	s.signal()
	<-s.done
}

func (s *Scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// stateful models (hybrid Gated DeltaNet) keep per-sequence recurrent state
// in slots: a lane holds one from admission until it finishes or is
// preempted (a preempted lane restarts at position 0, which resets it).
type stateful interface {
	StateSlots() int
}

type slotReleaser interface {
	ReleaseSlot(slot int)
}
