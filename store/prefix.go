package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/infernix/infernix/engine/prefix"
)

// saveQueueBlocks and saveQueueBytes bound the entries waiting to be written
// (a large model's block or snapshot is megabytes; the last entry accepted
// may overshoot the bytes); beyond them Accepting is false and new entries
// are dropped (counted) rather than slowing the scheduler or growing memory.
const (
	saveQueueBlocks = 64
	saveQueueBytes  = 256 << 20
)

// writeBatchEntries is the most entries written in one Badger batch.
const writeBatchEntries = 16

// DiskHalfLife is the half-life of the on-disk eviction score (see
// prefix.Score): the disk tier's clock is the wall clock in seconds, so that
// scores survive restarts. An entry used k times outlives entries used once
// up to log₂ k hours later.
const DiskHalfLife = time.Hour

// diskEpoch is the zero of the disk tier's clock (seconds since it): recent
// enough that float64 scores resolve microseconds.
var diskEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// PrefixStore persists the prefix cache of one model fingerprint and block
// layout: KV blocks (it implements prefix.Disk) and hybrid models' recurrent
// state snapshots (SaveSnapshot, LoadSnapshot). The scheduler decides when to
// save (engine/sched: every --prefix-cache-save-mins and on shutdown);
// entries handed over here are written by one background writer, in batches.
// The index (keys, sizes, scores) is loaded at open; block and snapshot bytes
// are read when first used.
//
// Keys under pfx/<id>/, id a digest of the fingerprint and layout:
//
//	<16-byte key>          a block
//	s<16-byte key>         a snapshot
//	m b|s <16-byte key>    the entry's eviction score and sealed size
//
// Every value is sealed (checksummed). Blocks and snapshots together stay
// under the cap: when over it the writer deletes the lowest-scored entries
// (prefix.Score over the wall clock, half-life DiskHalfLife). Loads count as
// uses; changed scores are written with the next batch and on Flush and
// Close. An entry without a score (killed before it was written, or an older
// version's) scores as used once long ago and goes first.
type PrefixStore struct {
	s          *Store
	ns         []byte // key prefix: pfx/<id>/
	blockBytes int
	capBytes   int64
	half       float64
	now        func() float64 // seconds; tests set it

	mu      sync.Mutex
	index   map[entryKey]*diskEntry
	heap    prefix.ScoreHeap[*diskEntry]
	bytes   int64
	count   [2]int                // blocks, snapshots
	touched map[entryKey]struct{} // entries whose score changed since it was written

	qmu         sync.RWMutex // Save holds it shared while sending, Close exclusively to close queue
	queue       chan saveItem
	queuedBytes atomic.Int64
	done        chan struct{}
	closed      bool

	dropped, evicted                   atomic.Uint64
	saved, loaded, snapSaved, snapLoad atomic.Uint64
}

// kind tells blocks from snapshots in the index and the keys.
type kind byte

const (
	kindBlock    kind = 'b'
	kindSnapshot kind = 's'
)

type entryKey struct {
	key  prefix.Key
	kind kind
}

type diskEntry struct {
	ek    entryKey
	size  int64
	score prefix.Score
	index int
}

func (e *diskEntry) HeapScore() prefix.Score { return e.score }
func (e *diskEntry) SetHeapIndex(i int)      { e.index = i }

type saveItem struct {
	ek    entryKey
	data  []byte
	flush chan struct{} // a Flush marker instead of an entry
}

var _ prefix.Disk = (*PrefixStore)(nil)
var _ prefix.Flusher = (*PrefixStore)(nil)
var _ prefix.DiskStatsReporter = (*PrefixStore)(nil)

// PrefixStats are a PrefixStore's counters: entries and bytes on disk, and
// since open: blocks and snapshots saved and loaded, entries dropped (queue
// full, or not written because the disk is full) and evicted (over the cap).
type PrefixStats struct {
	Blocks, Snapshots                            int
	Bytes                                        int64
	Saved, Loaded, SnapshotsSaved, SnapshotsRead uint64
	Dropped, Evicted                             uint64
}

// Prefix opens the prefix cache stored for fingerprint with blocks of
// blockBytes bytes, keeping at most capBytes on disk (≤ 0: no cap). Entries
// of other fingerprints or layouts are never read.
func (s *Store) Prefix(fingerprint []byte, blockBytes int, capBytes int64) (*PrefixStore, error) {
	h := sha256.New()
	h.Write(fingerprint)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(blockBytes))
	h.Write(n[:])
	ns := fmt.Appendf(nil, "pfx/%s/", hex.EncodeToString(h.Sum(nil)[:12]))
	p := &PrefixStore{s: s, ns: ns, blockBytes: blockBytes, capBytes: capBytes, half: DiskHalfLife.Seconds(),
		now:   func() float64 { return time.Since(diskEpoch).Seconds() },
		index: map[entryKey]*diskEntry{}, touched: map[entryKey]struct{}{},
		queue: make(chan saveItem, max(1, min(saveQueueBlocks, saveQueueBytes/max(blockBytes, 1)))), done: make(chan struct{})}
	if err := p.loadIndex(); err != nil {
		return nil, fmt.Errorf("loading the prefix-cache index: %w", err)
	}
	p.mu.Lock()
	victims := p.overCapLocked()
	p.mu.Unlock()
	p.delete(victims)
	go p.writer()
	return p, nil
}

// loadIndex reads every key of the namespace (values only for scores).
func (p *PrefixStore) loadIndex() error {
	metas := map[entryKey]entryMeta{}
	err := p.s.db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.PrefetchValues = false
		o.Prefix = p.ns
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()[len(p.ns):]
			var ek entryKey
			switch {
			case len(k) == len(ek.key):
				ek.kind = kindBlock
			case len(k) == 1+len(ek.key) && k[0] == byte(kindSnapshot):
				ek.kind, k = kindSnapshot, k[1:]
			case len(k) == 2+len(ek.key) && k[0] == 'm':
				ek.kind = kind(k[1])
				copy(ek.key[:], k[2:])
				err := item.Value(func(v []byte) error {
					if m, ok := openMeta(item.Key(), v); ok {
						metas[ek] = m
					}
					return nil
				})
				if err != nil {
					return err
				}
				continue
			default:
				continue
			}
			copy(ek.key[:], k)
			e := &diskEntry{ek: ek, size: item.ValueSize()}
			p.index[ek] = e
		}
		return nil
	})
	if err != nil {
		return err
	}
	entries := p.index
	p.index = make(map[entryKey]*diskEntry, len(entries))
	for ek, e := range entries {
		if m, ok := metas[ek]; ok {
			e.score, e.size = m.score, m.size
		} // else: score 0, as if used once at the epoch; Badger's size
		delete(metas, ek)
		p.addLocked(e)
	}
	// Metadata left over belongs to entries deleted without it. Deleting it
	// is housekeeping: a failure (a full disk) is logged, and the entries
	// indexed are served all the same.
	if len(metas) == 0 {
		return nil
	}
	err = p.s.writeBatch(func(wb *badger.WriteBatch) error {
		for ek := range metas {
			if err := wb.Delete(p.metaKey(ek)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		p.s.writeFailed("removing orphaned prefix-cache scores", err)
	}
	return nil
}

// addLocked indexes a new entry; removeLocked forgets one.
func (p *PrefixStore) addLocked(e *diskEntry) {
	p.index[e.ek] = e
	p.heap.Push(e)
	p.bytes += e.size
	p.count[e.ek.slot()]++
}

func (p *PrefixStore) removeLocked(e *diskEntry) {
	p.heap.Remove(e.index)
	delete(p.index, e.ek)
	delete(p.touched, e.ek)
	p.bytes -= e.size
	p.count[e.ek.slot()]--
}

func (ek entryKey) slot() int {
	if ek.kind == kindBlock {
		return 0
	}
	return 1
}

func (p *PrefixStore) dbKey(ek entryKey) []byte {
	k := append([]byte(nil), p.ns...)
	if ek.kind == kindSnapshot {
		k = append(k, byte(kindSnapshot))
	}
	return append(k, ek.key[:]...)
}

func (p *PrefixStore) metaKey(ek entryKey) []byte {
	k := append(append([]byte(nil), p.ns...), 'm', byte(ek.kind))
	return append(k, ek.key[:]...)
}

// entryMeta is what an entry's m-key holds: its score and its sealed size
// (Badger reports value-log sizes only approximately).
type entryMeta struct {
	score prefix.Score
	size  int64
}

func sealMeta(key []byte, m entryMeta) []byte {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], math.Float64bits(float64(m.score)))
	binary.LittleEndian.PutUint64(b[8:], uint64(m.size))
	return seal(key, b[:])
}

func openMeta(key, v []byte) (entryMeta, bool) {
	b, err := open(key, v)
	if err != nil || len(b) != 16 {
		return entryMeta{}, false
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(b))
	size := int64(binary.LittleEndian.Uint64(b[8:]))
	if math.IsNaN(f) || math.IsInf(f, 0) || size <= 0 {
		return entryMeta{}, false
	}
	return entryMeta{prefix.Score(f), size}, true
}

// Has implements prefix.Disk.
func (p *PrefixStore) Has(k prefix.Key) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.index[entryKey{k, kindBlock}]
	return ok
}

// Load implements prefix.Disk; a load counts as a use of the block.
func (p *PrefixStore) Load(k prefix.Key, dst []byte) error {
	if len(dst) != p.blockBytes {
		return fmt.Errorf("prefix block %s: buffer of %d bytes for %d", k, len(dst), p.blockBytes)
	}
	payload, err := p.read(entryKey{k, kindBlock})
	if err != nil {
		return fmt.Errorf("prefix block %s: %w", k, err)
	}
	if len(payload) != p.blockBytes {
		ek := entryKey{k, kindBlock}
		p.drop(ek, true, seal(p.dbKey(ek), payload))
		return fmt.Errorf("prefix block %s: %w", k, errCorrupt)
	}
	copy(dst, payload)
	p.loaded.Add(1)
	return nil
}

// read returns an indexed entry's payload and counts the use; a missing or
// corrupt entry is dropped (and a corrupt one counted).
func (p *PrefixStore) read(ek entryKey) ([]byte, error) {
	key := p.dbKey(ek)
	var v []byte
	err := p.s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err = it.ValueCopy(nil)
		return err
	})
	var payload []byte
	if err == nil {
		payload, err = open(key, v)
	}
	if err != nil {
		p.drop(ek, err == errCorrupt, v)
		return nil, err
	}
	p.mu.Lock()
	if e := p.index[ek]; e != nil {
		e.score = e.score.Use(p.now(), p.half)
		p.heap.Fix(e.index)
		p.touched[ek] = struct{}{}
	}
	p.mu.Unlock()
	return payload, nil
}

// drop forgets an entry that cannot be served; a corrupt one (seen: the
// value read) is deleted and counted.
func (p *PrefixStore) drop(ek entryKey, corrupt bool, seen []byte) {
	p.mu.Lock()
	if e := p.index[ek]; e != nil {
		p.removeLocked(e)
	}
	p.mu.Unlock()
	if corrupt {
		p.s.dropCorrupt(p.dbKey(ek), seen)
	}
}

// Save implements prefix.Disk: it copies data and queues it for the writer.
func (p *PrefixStore) Save(k prefix.Key, data []byte) {
	if len(data) != p.blockBytes {
		return
	}
	p.enqueue(entryKey{k, kindBlock}, data, true)
}

// SaveSnapshot queues a recurrent-state snapshot (engine/sched.SnapshotDisk).
// The blob is not copied: snapshots are immutable once taken.
func (p *PrefixStore) SaveSnapshot(k prefix.Key, blob []byte) {
	if len(blob) == 0 {
		return
	}
	p.enqueue(entryKey{k, kindSnapshot}, blob, false)
}

// LoadSnapshot returns the snapshot stored under k, or nil (not stored,
// unreadable or corrupt; the index answers misses without a read).
func (p *PrefixStore) LoadSnapshot(k prefix.Key) []byte {
	ek := entryKey{k, kindSnapshot}
	p.mu.Lock()
	_, ok := p.index[ek]
	p.mu.Unlock()
	if !ok {
		return nil
	}
	b, err := p.read(ek)
	if err != nil {
		return nil
	}
	p.snapLoad.Add(1)
	return b
}

func (p *PrefixStore) enqueue(ek entryKey, data []byte, copyData bool) {
	if p.s.Paused() {
		p.dropped.Add(1)
		return
	}
	p.qmu.RLock()
	defer p.qmu.RUnlock()
	if p.closed {
		return
	}
	if p.queuedBytes.Load() >= saveQueueBytes {
		p.dropped.Add(1)
		return
	}
	if copyData {
		data = append([]byte(nil), data...)
	}
	p.queuedBytes.Add(int64(len(data)))
	select {
	case p.queue <- saveItem{ek: ek, data: data}:
	default:
		p.queuedBytes.Add(-int64(len(data)))
		p.dropped.Add(1)
	}
}

// Accepting implements prefix.Disk: the write queue has room (and the disk
// is not full).
func (p *PrefixStore) Accepting() bool {
	return !p.s.Paused() && len(p.queue) < cap(p.queue) && p.queuedBytes.Load() < saveQueueBytes
}

// Flush implements prefix.Flusher: it returns once every entry queued before
// it, and every changed score, is written.
func (p *PrefixStore) Flush() {
	ch := make(chan struct{})
	p.qmu.RLock()
	if p.closed {
		p.qmu.RUnlock()
		return
	}
	p.queue <- saveItem{flush: ch}
	p.qmu.RUnlock()
	<-ch
}

// writer writes queued entries in batches until Close.
func (p *PrefixStore) writer() {
	defer close(p.done)
	var batch []saveItem
	var flushes []chan struct{}
	for it := range p.queue {
		batch, flushes = batch[:0], flushes[:0]
		for {
			if it.flush != nil {
				flushes = append(flushes, it.flush)
			} else {
				batch = append(batch, it)
			}
			if len(batch) == writeBatchEntries || len(flushes) > 0 {
				break
			}
			var ok bool
			select {
			case it, ok = <-p.queue:
			default:
			}
			if !ok {
				break
			}
		}
		p.write(batch)
		for _, f := range flushes {
			close(f)
		}
		clear(batch)
	}
	p.write(nil) // scores changed since the last batch
}

// write stores batch with the new entries' scores, then updates the index,
// writes changed scores and deletes what went over the cap.
func (p *PrefixStore) write(batch []saveItem) {
	var queued int64
	for _, it := range batch {
		queued += int64(len(it.data))
	}
	defer p.queuedBytes.Add(-queued)
	if p.s.Paused() {
		p.dropped.Add(uint64(len(batch)))
		return
	}
	// Entries of one batch are ordered as queued (a microsecond apart).
	now := p.now()
	first := func(i int) prefix.Score { return prefix.FirstUse(now+float64(i)*1e-6, p.half) }
	sizes := make([]int64, len(batch))
	if len(batch) > 0 {
		err := p.s.writeBatch(func(wb *badger.WriteBatch) error {
			for i, it := range batch {
				key := p.dbKey(it.ek)
				v := seal(key, it.data)
				sizes[i] = int64(len(v))
				mk := p.metaKey(it.ek)
				if err := wb.Set(key, v); err != nil {
					return err
				}
				if err := wb.Set(mk, sealMeta(mk, entryMeta{first(i), sizes[i]})); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			p.s.writeFailed("prefix cache", err)
			p.dropped.Add(uint64(len(batch)))
			return
		}
	}
	type meta struct {
		ek entryKey
		m  entryMeta
	}
	var metas []meta
	p.mu.Lock()
	for i, it := range batch {
		if it.ek.kind == kindBlock {
			p.saved.Add(1)
		} else {
			p.snapSaved.Add(1)
		}
		if e := p.index[it.ek]; e != nil {
			// Written again (recomputed after an eviction): a use.
			p.bytes += sizes[i] - e.size
			e.size = sizes[i]
			e.score = e.score.Use(now, p.half)
			p.heap.Fix(e.index)
			p.touched[it.ek] = struct{}{}
			continue
		}
		p.addLocked(&diskEntry{ek: it.ek, size: sizes[i], score: first(i)})
	}
	for ek := range p.touched {
		if e := p.index[ek]; e != nil {
			metas = append(metas, meta{ek, entryMeta{e.score, e.size}})
		}
	}
	clear(p.touched)
	victims := p.overCapLocked()
	p.mu.Unlock()
	if len(metas) > 0 {
		err := p.s.writeBatch(func(wb *badger.WriteBatch) error {
			for _, m := range metas {
				mk := p.metaKey(m.ek)
				if err := wb.Set(mk, sealMeta(mk, m.m)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			p.s.writeFailed("prefix cache scores", err)
		}
	}
	p.delete(victims)
}

// overCapLocked removes the lowest-scored entries, blocks and snapshots
// alike, until the rest fit the cap, and returns them for deletion.
func (p *PrefixStore) overCapLocked() []*diskEntry {
	if p.capBytes <= 0 {
		return nil
	}
	var out []*diskEntry
	for p.bytes > p.capBytes && p.heap.Len() > 0 {
		e := p.heap.Min()
		p.removeLocked(e)
		out = append(out, e)
	}
	p.evicted.Add(uint64(len(out)))
	return out
}

// delete deletes evicted entries; their space returns to the file system at
// the next Store.Reclaim, which the freed bytes may ask for.
func (p *PrefixStore) delete(es []*diskEntry) {
	if len(es) == 0 {
		return
	}
	var freed int64
	err := p.s.writeBatch(func(wb *badger.WriteBatch) error {
		for _, e := range es {
			if err := wb.Delete(p.dbKey(e.ek)); err != nil {
				return err
			}
			if err := wb.Delete(p.metaKey(e.ek)); err != nil {
				return err
			}
			freed += e.size
		}
		return nil
	})
	if err != nil {
		p.s.writeFailed("prefix eviction", err)
		return
	}
	p.s.deleted(freed)
}

// Stats returns the counters.
func (p *PrefixStore) Stats() PrefixStats {
	p.mu.Lock()
	st := PrefixStats{Blocks: p.count[0], Snapshots: p.count[1], Bytes: p.bytes}
	p.mu.Unlock()
	st.Saved, st.Loaded, st.SnapshotsSaved, st.SnapshotsRead = p.saved.Load(), p.loaded.Load(), p.snapSaved.Load(), p.snapLoad.Load()
	st.Dropped, st.Evicted = p.dropped.Load(), p.evicted.Load()
	return st
}

// DiskStats implements prefix.DiskStatsReporter (for /metrics): blocks and
// snapshots together.
func (p *PrefixStore) DiskStats() prefix.DiskStats {
	st := p.Stats()
	return prefix.DiskStats{Blocks: st.Blocks, Snapshots: st.Snapshots, Bytes: st.Bytes,
		Saved: st.Saved + st.SnapshotsSaved, Loaded: st.Loaded + st.SnapshotsRead, Dropped: st.Dropped, Evicted: st.Evicted}
}

// Close writes what is queued and the changed scores, and stops the writer;
// call it before Store.Close (graceful shutdown). Saves after Close are
// ignored.
func (p *PrefixStore) Close() {
	p.qmu.Lock()
	if p.closed {
		p.qmu.Unlock()
		return
	}
	p.closed = true
	close(p.queue)
	p.qmu.Unlock()
	<-p.done
}
