package sched

import (
	"sync/atomic"

	"github.com/infernix/infernix/engine/prefix"
)

// Hybrid models (Gated DeltaNet layers) resume from a cached prefix only with
// the recurrent state at its end: KV blocks hold the attention layers, a
// snapshot holds the rest. Snapshots are taken where they pay — every
// SnapshotInterval blocks and at the last full block of each prompt (where the
// next turn of a conversation resumes) — and kept in host memory up to a byte
// bound; when over it the lowest prefix.Score (recency and reuse; a tick per
// snapshot taken or used, half-life half the snapshots that fit) goes first.
// A lookup resumes from the deepest block that has both KV and a snapshot.

// defaultSnapshotInterval is the interval of periodic snapshots in blocks
// (1024 tokens) when Config.SnapshotInterval is 0.
const defaultSnapshotInterval = 16

// snapshotBudget bounds the snapshots' host memory.
const snapshotBudget = 512 << 20

// stateSnapshots is what a hybrid model provides (engine/state.Stateful).
type stateSnapshots interface {
	StateSlots() int
	Snapshot(slot, pos int) ([]byte, error)
	Restore(slot int, snap []byte) (int, error)
}

// SnapshotDisk keeps hybrid models' state snapshots across restarts (the data
// directory; keys already carry the model fingerprint through the chain's
// seed). SaveSnapshot queues the blob for a background writer (the blob is
// not modified afterwards) and drops it when Accepting is false; Load
// returns nil on a miss. store.PrefixStore implements it.
type SnapshotDisk interface {
	SaveSnapshot(key prefix.Key, blob []byte)
	LoadSnapshot(key prefix.Key) []byte
	Accepting() bool
}

type snapStore struct {
	m      stateSnapshots
	disk   SnapshotDisk // nil: memory only
	save   *saver
	byKey  map[prefix.Key]*snapEntry
	heap   prefix.ScoreHeap[*snapEntry]
	clock  float64
	half   float64 // set by the first put, from the blob size
	bytes  int
	budget int
	// Gauges for Counters (read from other goroutines).
	count, total atomic.Int64
}

type snapEntry struct {
	key   prefix.Key
	blob  []byte
	score prefix.Score
	index int
	dirty bool // not yet handed to the disk
}

func (e *snapEntry) HeapScore() prefix.Score { return e.score }
func (e *snapEntry) SetHeapIndex(i int)      { e.index = i }

func newSnapStore(m stateSnapshots, sv *saver) *snapStore {
	return &snapStore{m: m, save: sv, byKey: map[prefix.Key]*snapEntry{}, budget: snapshotBudget}
}

// put keeps blob under k; a new snapshot that is not from the disk is marked
// for the next save round.
func (st *snapStore) put(k prefix.Key, blob []byte, fromDisk bool) {
	st.clock++
	if e, ok := st.byKey[k]; ok {
		st.use(e)
		return
	}
	if st.half == 0 {
		st.half = float64(max(st.budget/max(len(blob), 1)/2, 8))
	}
	e := &snapEntry{key: k, blob: blob, score: prefix.FirstUse(st.clock, st.half)}
	st.byKey[k] = e
	st.heap.Push(e)
	st.bytes += len(blob)
	if st.disk != nil && !fromDisk {
		e.dirty = true
		st.save.snaps = append(st.save.snaps, k)
	}
	for st.bytes > st.budget && st.heap.Len() > 1 {
		old := st.heap.Min()
		st.heap.Remove(old.index)
		delete(st.byKey, old.key)
		st.bytes -= len(old.blob)
		if old.dirty {
			st.disk.SaveSnapshot(old.key, old.blob) // dropped before its round: save now
		}
	}
	st.count.Store(int64(len(st.byKey)))
	st.total.Store(int64(st.bytes))
}

func (st *snapStore) use(e *snapEntry) {
	e.score = e.score.Use(st.clock, st.half)
	st.heap.Fix(e.index)
}

func (st *snapStore) get(k prefix.Key) []byte {
	e, ok := st.byKey[k]
	if !ok {
		if st.disk == nil {
			return nil
		}
		blob := st.disk.LoadSnapshot(k)
		if blob != nil {
			st.put(k, blob, true)
		}
		return blob
	}
	st.clock++
	st.use(e)
	return e.blob
}

// snapshotAfterStep saves l's recurrent state when its computed tokens just
// reached a block boundary worth keeping. chainKey is then the key of the
// block ending there (register ran first).
func (s *Scheduler) snapshotAfterStep(l *lane) {
	if s.snaps == nil || l.slot < 0 || l.computed == 0 || l.computed%prefix.BlockSize != 0 || l.chainN*prefix.BlockSize != l.computed {
		return
	}
	blocks := l.computed / prefix.BlockSize
	lastPromptBlock := (l.nPrompt - 1) / prefix.BlockSize
	if blocks%s.cfg.SnapshotInterval != 0 && blocks != lastPromptBlock {
		return
	}
	if _, ok := s.snaps.byKey[l.chainKey]; ok {
		return
	}
	blob, err := s.snaps.m.Snapshot(int(l.slot), l.computed)
	if err != nil {
		return // a missing snapshot only costs recompute
	}
	s.snaps.put(l.chainKey, blob, false)
}

// resumeFromSnapshot trims a hybrid lane's reused prefix (n blocks acquired
// from the cache) to the deepest block that has a snapshot, restores that
// state into the lane's slot, and returns the blocks kept.
func (s *Scheduler) resumeFromSnapshot(l *lane, n int) int {
	keys := make([]prefix.Key, n+1)
	keys[0] = l.seed
	for i := 0; i < n; i++ {
		keys[i+1] = prefix.BlockKey(keys[i], l.tokens[i*prefix.BlockSize:(i+1)*prefix.BlockSize])
	}
	k := n
	for ; k > 0; k-- {
		blob := s.snaps.get(keys[k])
		if blob == nil {
			continue
		}
		if pos, err := s.snaps.m.Restore(int(l.slot), blob); err == nil && pos == k*prefix.BlockSize {
			break
		}
	}
	if k < n {
		drop := l.blocks[k:n]
		s.pc.Unpin(drop)
		s.alloc.Release(drop)
		l.blocks = l.blocks[:k]
		l.pinned = l.pinned[:k]
		l.chainKey, l.chainN = keys[k], k
	}
	return k
}

// stopAtSnapshot shortens a hybrid lane's prefill chunk of n tokens so that
// it ends on the next block boundary where a snapshot is due.
func (s *Scheduler) stopAtSnapshot(l *lane, n int) int {
	const bs = prefix.BlockSize
	every := s.cfg.SnapshotInterval * bs
	next := (l.computed/every + 1) * every
	if last := (l.nPrompt - 1) / bs * bs; last > l.computed && last < next {
		next = last
	}
	if l.computed+n > next {
		return next - l.computed
	}
	return n
}
