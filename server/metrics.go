package server

import (
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infernix/infernix/engine/prefix"
	"github.com/infernix/infernix/engine/sched"
)

// metrics holds the server's counters and histograms. Per-token updates
// (inter-token latency, generated tokens) are lock-free atomics; per-request
// updates may take the mutex.
type metrics struct {
	mu       sync.Mutex
	requests map[reqKey]uint64

	promptTokens, generatedTokens atomic.Uint64
	prefixQueries, prefixHits     atomic.Uint64
	prefixHitTokens               atomic.Uint64
	preemptions                   atomic.Uint64

	ttft, itl, queue, total *histogram
	started                 time.Time
}

type reqKey struct {
	endpoint string
	status   int
}

func newMetrics() *metrics {
	lat := []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	long := []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	return &metrics{
		requests: map[reqKey]uint64{},
		ttft:     newHistogram("infernix_time_to_first_token_seconds", "Time from request arrival to the first generated token.", lat),
		itl:      newHistogram("infernix_inter_token_latency_seconds", "Time between consecutive generated tokens of a request.", lat),
		queue:    newHistogram("infernix_queue_time_seconds", "Time a request waited for a lane.", long),
		total:    newHistogram("infernix_request_duration_seconds", "Time from request arrival to its last token.", long),
		started:  time.Now(),
	}
}

func (m *metrics) countRequest(endpoint string, status int) {
	m.mu.Lock()
	m.requests[reqKey{endpoint, status}]++
	m.mu.Unlock()
}

// finished records a generation's totals.
func (m *metrics) finished(st *sched.Stats) {
	m.promptTokens.Add(uint64(st.PromptTokens))
	m.prefixQueries.Add(1)
	if st.CachedTokens > 0 {
		m.prefixHits.Add(1)
		m.prefixHitTokens.Add(uint64(st.CachedTokens))
	}
	m.preemptions.Add(uint64(st.Preemptions))
	if st.Queue > 0 || st.Total > 0 {
		m.queue.observe(st.Queue.Seconds())
		m.total.observe(st.Total.Seconds())
	}
}

// histogram is a Prometheus histogram with fixed buckets; observe is
// allocation-free and safe for concurrent use.
type histogram struct {
	name, help string
	bounds     []float64
	counts     []atomic.Uint64 // per bucket (not cumulative); the last is +Inf
	sumBits    atomic.Uint64
	count      atomic.Uint64
}

func newHistogram(name, help string, bounds []float64) *histogram {
	return &histogram{name: name, help: help, bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v) // first bound >= v: Prometheus buckets are le
	h.counts[i].Add(1)
	h.count.Add(1)
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// snapshot returns cumulative bucket counts, the sum and the count.
func (h *histogram) snapshot() (cum []uint64, sum float64, count uint64) {
	cum = make([]uint64, len(h.counts))
	var acc uint64
	for i := range h.counts {
		acc += h.counts[i].Load()
		cum[i] = acc
	}
	return cum, math.Float64frombits(h.sumBits.Load()), acc
}

// gauge is one line of scrape-time state.
type gauge struct {
	name, help string
	value      float64
}

func (s *Server) gauges() []gauge {
	c := s.eng.Sched.Counters()
	kv := 0.0
	if c.KVTotal > 0 {
		kv = float64(c.KVUsed) / float64(c.KVTotal)
	}
	g := []gauge{
		{"infernix_queue_depth", "Requests waiting for a lane.", float64(c.Queued)},
		{"infernix_lanes_busy", "Lanes running a request.", float64(c.Busy)},
		{"infernix_lanes_max", "Lanes available (--max-lanes).", float64(c.MaxLanes)},
		{"infernix_kv_blocks_used", "KV cache blocks in use.", float64(c.KVUsed)},
		{"infernix_kv_blocks_total", "KV cache blocks in the pool.", float64(c.KVTotal)},
		{"infernix_kv_usage_ratio", "Fraction of the KV cache in use.", kv},
		{"infernix_uptime_seconds", "Seconds since the server started.", time.Since(s.met.started).Seconds()},
		{"infernix_prefix_cache_blocks", "KV blocks indexed by the prefix cache, in use or idle.", float64(c.KVCached)},
	}
	ss := s.eng.Sched.SnapshotStats()
	ds := s.diskStats()
	return append(g,
		gauge{"infernix_prefix_cache_snapshots", "Hybrid models' recurrent-state snapshots held in host memory.", float64(ss.Snapshots)},
		gauge{"infernix_prefix_cache_snapshot_bytes", "Bytes of the snapshots held in host memory.", float64(ss.Bytes)},
		gauge{"infernix_prefix_cache_disk_blocks", "Prefix-cache KV blocks stored in the data directory.", float64(ds.Blocks)},
		gauge{"infernix_prefix_cache_disk_snapshots", "Recurrent-state snapshots stored in the data directory.", float64(ds.Snapshots)},
		gauge{"infernix_prefix_cache_disk_bytes", "Bytes of the prefix cache in the data directory (blocks and snapshots).", float64(ds.Bytes)},
	)
}

// diskStats are the persistent prefix-cache tier's counters (zero without
// a data directory).
func (s *Server) diskStats() prefix.DiskStats {
	if r, ok := s.eng.PrefixTier.(prefix.DiskStatsReporter); ok {
		return r.DiskStats()
	}
	return prefix.DiskStats{}
}

type counter struct {
	name, help string
	value      uint64
}

func (m *metrics) counters() []counter {
	return []counter{
		{"infernix_prompt_tokens_total", "Prompt tokens processed.", m.promptTokens.Load()},
		{"infernix_generated_tokens_total", "Tokens generated.", m.generatedTokens.Load()},
		{"infernix_prefix_cache_queries_total", "Requests whose prompt was looked up in the prefix cache.", m.prefixQueries.Load()},
		{"infernix_prefix_cache_hits_total", "Requests that reused a cached prefix.", m.prefixHits.Load()},
		{"infernix_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache.", m.prefixHitTokens.Load()},
		{"infernix_preemptions_total", "Times a running request was preempted for KV space.", m.preemptions.Load()},
	}
}

// engineCounters are the counters the engine keeps: speculative decoding,
// hybrid models' snapshots and the data directory's prefix-cache tier.
func (s *Server) engineCounters() []counter {
	ss := s.eng.Sched.SnapshotStats()
	ds := s.diskStats()
	sc := s.eng.Sched.Counters()
	return []counter{
		{"infernix_spec_tokens_total", "Tokens sampled on lanes decoding speculatively (--spec-tokens).", uint64(sc.SpecTokens)},
		{"infernix_spec_drafts_kept_total", "Of those, tokens a prompt-lookup draft had already computed.", uint64(sc.SpecDraftsKept)},
		{"infernix_prefix_cache_snapshots_taken_total", "Recurrent-state snapshots taken (hybrid models).", ss.Taken},
		{"infernix_prefix_cache_snapshot_hits_total", "Admissions that resumed from a recurrent-state snapshot.", ss.Hits},
		{"infernix_prefix_cache_snapshots_released_total", "Snapshots released because their conversation had passed them.", ss.Released},
		{"infernix_prefix_cache_snapshots_evicted_total", "Snapshots evicted from host memory to stay within its bound.", ss.Evictions},
		{"infernix_prefix_cache_disk_saved_total", "Prefix-cache blocks and snapshots written to the data directory.", ds.Saved},
		{"infernix_prefix_cache_disk_loaded_total", "Prefix-cache blocks and snapshots read from the data directory.", ds.Loaded},
		{"infernix_prefix_cache_disk_dropped_total", "Blocks and snapshots not written: the write queue was full or the disk is full.", ds.Dropped},
		{"infernix_prefix_cache_disk_evicted_total", "Blocks and snapshots deleted from the data directory to stay within --prefix-cache-disk-mib.", ds.Evicted},
	}
}

func (m *metrics) requestCounts() []struct {
	reqKey
	n uint64
} {
	m.mu.Lock()
	out := make([]struct {
		reqKey
		n uint64
	}, 0, len(m.requests))
	for k, n := range m.requests {
		out = append(out, struct {
			reqKey
			n uint64
		}{k, n})
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].endpoint != out[j].endpoint {
			return out[i].endpoint < out[j].endpoint
		}
		return out[i].status < out[j].status
	})
	return out
}

// appendPrometheus writes the text exposition format (version 0.0.4).
func (s *Server) appendPrometheus(b []byte) []byte {
	m := s.met
	b = append(b, "# HELP infernix_requests_total Requests by endpoint and HTTP status.\n# TYPE infernix_requests_total counter\n"...)
	for _, r := range m.requestCounts() {
		b = append(b, `infernix_requests_total{endpoint="`...)
		b = appendLabel(b, r.endpoint)
		b = append(b, `",status="`...)
		b = strconv.AppendInt(b, int64(r.status), 10)
		b = append(b, `"} `...)
		b = strconv.AppendUint(b, r.n, 10)
		b = append(b, '\n')
	}
	for _, c := range append(m.counters(), s.engineCounters()...) {
		b = appendHeader(b, c.name, c.help, "counter")
		b = append(b, c.name...)
		b = append(b, ' ')
		b = strconv.AppendUint(b, c.value, 10)
		b = append(b, '\n')
	}
	for _, h := range []*histogram{m.ttft, m.itl, m.queue, m.total} {
		b = appendHeader(b, h.name, h.help, "histogram")
		cum, sum, count := h.snapshot()
		for i, c := range cum {
			b = append(b, h.name...)
			b = append(b, `_bucket{le="`...)
			if i < len(h.bounds) {
				b = strconv.AppendFloat(b, h.bounds[i], 'g', -1, 64)
			} else {
				b = append(b, "+Inf"...)
			}
			b = append(b, `"} `...)
			b = strconv.AppendUint(b, c, 10)
			b = append(b, '\n')
		}
		b = append(b, h.name...)
		b = append(b, "_sum "...)
		b = strconv.AppendFloat(b, sum, 'g', -1, 64)
		b = append(b, '\n')
		b = append(b, h.name...)
		b = append(b, "_count "...)
		b = strconv.AppendUint(b, count, 10)
		b = append(b, '\n')
	}
	for _, g := range s.gauges() {
		b = appendHeader(b, g.name, g.help, "gauge")
		b = append(b, g.name...)
		b = append(b, ' ')
		b = strconv.AppendFloat(b, g.value, 'g', -1, 64)
		b = append(b, '\n')
	}
	return b
}

func appendHeader(b []byte, name, help, typ string) []byte {
	b = append(b, "# HELP "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, help...)
	b = append(b, "\n# TYPE "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, typ...)
	return append(b, '\n')
}

// appendLabel escapes a label value (backslash, quote, newline).
func appendLabel(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\', '"':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendMetricsJSON writes the same values as JSON:
// {"requests":[{"endpoint","status","count"}], "<counter>": n, …,
// "<histogram>": {"buckets":[{"le","count"}],"sum","count"}, "<gauge>": v}.
// Names are the Prometheus names.
func (s *Server) appendMetricsJSON(b []byte) []byte {
	m := s.met
	b = append(b, `{"requests":[`...)
	for i, r := range m.requestCounts() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"endpoint":`...)
		b = appendString(b, r.endpoint)
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(r.status), 10)
		b = append(b, `,"count":`...)
		b = strconv.AppendUint(b, r.n, 10)
		b = append(b, '}')
	}
	b = append(b, ']')
	for _, c := range append(m.counters(), s.engineCounters()...) {
		b = append(b, ',')
		b = appendString(b, c.name)
		b = append(b, ':')
		b = strconv.AppendUint(b, c.value, 10)
	}
	for _, h := range []*histogram{m.ttft, m.itl, m.queue, m.total} {
		cum, sum, count := h.snapshot()
		b = append(b, ',')
		b = appendString(b, h.name)
		b = append(b, `:{"buckets":[`...)
		for i, c := range cum {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"le":`...)
			if i < len(h.bounds) {
				b = strconv.AppendFloat(b, h.bounds[i], 'g', -1, 64)
			} else {
				b = append(b, `"+Inf"`...)
			}
			b = append(b, `,"count":`...)
			b = strconv.AppendUint(b, c, 10)
			b = append(b, '}')
		}
		b = append(b, `],"sum":`...)
		b = appendFloat(b, sum, 64)
		b = append(b, `,"count":`...)
		b = strconv.AppendUint(b, count, 10)
		b = append(b, '}')
	}
	for _, g := range s.gauges() {
		b = append(b, ',')
		b = appendString(b, g.name)
		b = append(b, ':')
		b = appendFloat(b, g.value, 64)
	}
	return append(b, '}')
}
