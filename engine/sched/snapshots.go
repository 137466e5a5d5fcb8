package sched

import (
	"container/list"

	"github.com/infernix/infernix/engine/prefix"
)

// Hybrid models (Gated DeltaNet layers) resume from a cached prefix only with
// the recurrent state at its end: KV blocks hold the attention layers, a
// snapshot holds the rest. Snapshots are taken where they pay — every
// SnapshotInterval blocks and at the last full block of each prompt (where the
// next turn of a conversation resumes) — kept in host memory up to a byte
// bound, least recently used first out. A lookup resumes from the deepest
// block that has both KV and a snapshot.

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
// seed). Save may write in the background; Load returns nil on a miss.
type SnapshotDisk interface {
	SaveSnapshot(key prefix.Key, blob []byte)
	LoadSnapshot(key prefix.Key) []byte
}

type snapStore struct {
	m     stateSnapshots
	disk  SnapshotDisk // nil: memory only
	byKey map[prefix.Key]*list.Element
	lru   *list.List // front: most recent
	bytes int
}

type snapEntry struct {
	key  prefix.Key
	blob []byte
}

func newSnapStore(m stateSnapshots) *snapStore {
	return &snapStore{m: m, byKey: map[prefix.Key]*list.Element{}, lru: list.New()}
}

func (st *snapStore) put(k prefix.Key, blob []byte) {
	if e, ok := st.byKey[k]; ok {
		st.lru.MoveToFront(e)
		return
	}
	st.byKey[k] = st.lru.PushFront(&snapEntry{k, blob})
	st.bytes += len(blob)
	if st.disk != nil {
		st.disk.SaveSnapshot(k, blob)
	}
	for st.bytes > snapshotBudget && st.lru.Len() > 1 {
		old := st.lru.Remove(st.lru.Back()).(*snapEntry)
		delete(st.byKey, old.key)
		st.bytes -= len(old.blob)
	}
}

func (st *snapStore) get(k prefix.Key) []byte {
	e, ok := st.byKey[k]
	if !ok {
		if st.disk == nil {
			return nil
		}
		blob := st.disk.LoadSnapshot(k)
		if blob != nil {
			d := st.disk
			st.disk = nil // already on disk: keep it in memory only
			st.put(k, blob)
			st.disk = d
		}
		return blob
	}
	st.lru.MoveToFront(e)
	return e.Value.(*snapEntry).blob
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
	s.snaps.put(l.chainKey, blob)
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
