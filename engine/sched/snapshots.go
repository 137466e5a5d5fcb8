package sched

import (
	"sync/atomic"

	"github.com/infernix/infernix/engine/prefix"
)

// Hybrid models (Gated DeltaNet layers) resume from a cached prefix only with
// the recurrent state at its end: KV blocks hold the attention layers, a
// snapshot holds the rest. A lookup resumes from the deepest block that has
// both KV and a snapshot. Snapshots are taken at block boundaries where they
// pay, and each records why (snapKind):
//   - turn: the last full block of a prompt, where the conversation's next
//     turn resumes;
//   - interval: every SnapshotInterval blocks of a long prompt, so that a
//     lane preempted mid-prompt, or a request that shares the beginning of a
//     long prompt, resumes near where it diverges;
//   - shared: the end of what several conversations share (their system
//     prompt and tools). The server says where that is when it knows
//     (Request.SharedPrefix, from the chat template): the last full block
//     at or before it is kept as shared from the first conversation on,
//     marked when a lane resumes at or past it, taken as a lane computes
//     past it. Without that hint (raw completions, or a template that renders
//     the system block differently once other messages follow) the
//     scheduler finds a branch point of the prefix tree instead: a lane
//     whose lookup stops before its prompt's last full block, at a block
//     that other indexed blocks already continue from (prefix.Cache.Children),
//     diverges there from another conversation. When the lane did not resume
//     from a turn boundary (it is not continuing a conversation of its own:
//     a thinking model's re-rendered answer would make every turn look like
//     a branch), the snapshot at that point is marked shared, or taken there
//     as the lane computes past it.
//
// Release: a conversation passes its older snapshots and never comes back to
// them. When a lane restores the snapshot at block k, every other snapshot on
// its chain before k (at blocks 1 … k−1) that is not shared is released: the
// interval snapshots it passed and the turn boundaries behind the one it
// resumes from. So a conversation holds its latest turn boundary, the one
// before it (until the next turn resumes: an edited last message resumes
// there) and the interval snapshots of its last turn; what several
// conversations share stays. A released snapshot leaves host memory and, if
// not saved yet, is not saved; a copy already on disk stays readable until
// the disk's own eviction takes it (it is not read again, so its score only
// decays).
//
// Independently, snapshots live in host memory up to a byte bound; when over
// it the lowest prefix.Score (recency and reuse; a tick per snapshot taken or
// used, half-life half the snapshots that fit) goes first.

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
	// branchAt is the block where a running lane takes a shared snapshot as
	// it computes past it (entries of lanes no longer running are swept at
	// the next admission).
	branchAt map[*lane]int
	// Gauges and counters for SnapshotStats (read from other goroutines).
	count, total                     atomic.Int64
	taken, hits, released, evictions atomic.Uint64
}

// snapKind says why a snapshot was taken (a bit set: one block may be
// several kinds). Snapshots read back from the disk have none until a lane
// marks them.
type snapKind uint8

const (
	snapTurn     snapKind = 1 << iota // a prompt's last full block
	snapInterval                      // every SnapshotInterval blocks
	snapShared                        // a branch point: never released, only evicted
)

type snapEntry struct {
	key   prefix.Key
	blob  []byte
	score prefix.Score
	index int
	kind  snapKind
	dirty bool // not yet handed to the disk
}

func (e *snapEntry) HeapScore() prefix.Score { return e.score }
func (e *snapEntry) SetHeapIndex(i int)      { e.index = i }

func newSnapStore(m stateSnapshots, sv *saver) *snapStore {
	return &snapStore{m: m, save: sv, byKey: map[prefix.Key]*snapEntry{}, budget: snapshotBudget, branchAt: map[*lane]int{}}
}

// SnapshotStats are a hybrid model's state snapshots for /metrics: those in
// host memory and their bytes; since start, those taken, lanes that resumed
// from one, and those released (passed by their conversation) or evicted
// (over the memory bound).
type SnapshotStats struct {
	Snapshots                        int
	Bytes                            int64
	Taken, Hits, Released, Evictions uint64
}

// SnapshotStats reports the snapshot counters (zero for models that do not
// need snapshots). Safe from any goroutine.
func (s *Scheduler) SnapshotStats() SnapshotStats {
	st := s.snaps
	if st == nil {
		return SnapshotStats{}
	}
	return SnapshotStats{Snapshots: int(st.count.Load()), Bytes: st.total.Load(), Taken: st.taken.Load(),
		Hits: st.hits.Load(), Released: st.released.Load(), Evictions: st.evictions.Load()}
}

// put keeps blob under k, of kind; a new snapshot that is not from the disk
// is marked for the next save round.
func (st *snapStore) put(k prefix.Key, blob []byte, kind snapKind, fromDisk bool) {
	st.clock++
	if e, ok := st.byKey[k]; ok {
		e.kind |= kind
		st.use(e)
		return
	}
	if st.half == 0 {
		st.half = float64(max(st.budget/max(len(blob), 1)/2, 8))
	}
	e := &snapEntry{key: k, blob: blob, kind: kind, score: prefix.FirstUse(st.clock, st.half)}
	st.byKey[k] = e
	st.heap.Push(e)
	st.bytes += len(blob)
	if st.disk != nil && !fromDisk {
		e.dirty = true
		st.save.snaps = append(st.save.snaps, k)
	}
	for st.bytes > st.budget && st.heap.Len() > 1 {
		old := st.heap.Min()
		st.remove(old)
		st.evictions.Add(1)
		if old.dirty {
			st.disk.SaveSnapshot(old.key, old.blob) // dropped before its round: save now
		}
	}
	st.gauges()
}

// remove forgets e (the save round skips it: saver.saveSome).
func (st *snapStore) remove(e *snapEntry) {
	st.heap.Remove(e.index)
	delete(st.byKey, e.key)
	st.bytes -= len(e.blob)
}

// release drops a snapshot its conversation has passed; one not saved yet
// is not saved.
func (st *snapStore) release(e *snapEntry) {
	st.remove(e)
	e.dirty = false
	st.released.Add(1)
	st.gauges()
}

func (st *snapStore) gauges() {
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
			st.put(k, blob, 0, true)
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
	st := s.snaps
	blocks := l.computed / prefix.BlockSize
	var kind snapKind
	if blocks%s.cfg.SnapshotInterval == 0 {
		kind |= snapInterval
	}
	if blocks == (l.nPrompt-1)/prefix.BlockSize {
		kind |= snapTurn
	}
	if at, ok := st.branchAt[l]; ok && at == blocks {
		kind |= snapShared
		delete(st.branchAt, l)
	}
	if blocks == l.sharedAt {
		kind |= snapShared
	}
	if kind == 0 {
		return
	}
	if e, ok := st.byKey[l.chainKey]; ok {
		e.kind |= kind
		return
	}
	blob, err := st.m.Snapshot(int(l.slot), l.computed)
	if err != nil {
		return // a missing snapshot only costs recompute
	}
	st.taken.Add(1)
	st.put(l.chainKey, blob, kind, false)
}

// resumeFromSnapshot trims a hybrid lane's reused prefix (n blocks acquired
// from the cache, of at most maxBlocks) to the deepest block that has a
// snapshot, restores that state into the lane's slot, and returns the blocks
// kept. It then applies the rules above: the request's system/tools
// boundary and a branch point at n are marked or scheduled as shared, and
// the snapshots the lane's conversation passed are released.
func (s *Scheduler) resumeFromSnapshot(l *lane, n, maxBlocks int) int {
	st := s.snaps
	keys := make([]prefix.Key, n+1)
	keys[0] = l.seed
	for i := 0; i < n; i++ {
		keys[i+1] = prefix.BlockKey(keys[i], l.tokens[i*prefix.BlockSize:(i+1)*prefix.BlockSize])
	}
	k := n
	for ; k > 0; k-- {
		blob := st.get(keys[k])
		if blob == nil {
			continue
		}
		if pos, err := st.m.Restore(int(l.slot), blob); err == nil && pos == k*prefix.BlockSize {
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
	for o := range st.branchAt {
		if !o.running || o == l {
			delete(st.branchAt, o)
		}
	}
	var from *snapEntry
	if k > 0 {
		st.hits.Add(1)
		from = st.byKey[keys[k]]
	}
	if at := l.sharedAt; at > 0 && at <= n {
		if e := st.byKey[keys[at]]; e != nil {
			e.kind |= snapShared // the request's own system/tools boundary
		}
	}
	continuing := from != nil && from.kind&snapTurn != 0
	if n > 0 && n < maxBlocks && !continuing && s.pc.Children(keys[n]) > 0 {
		if k == n {
			if from != nil {
				from.kind |= snapShared
			}
		} else {
			st.branchAt[l] = n
		}
	}
	for d := 1; d < k; d++ {
		if e := st.byKey[keys[d]]; e != nil && e.kind&snapShared == 0 {
			st.release(e)
		}
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
	if at, ok := s.snaps.branchAt[l]; ok && at*bs > l.computed && at*bs < next {
		next = at * bs
	}
	if at := l.sharedAt * bs; at > l.computed && at < next {
		next = at
	}
	if l.computed+n > next {
		return next - l.computed
	}
	return n
}
