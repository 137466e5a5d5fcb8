package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/infernix/infernix/engine/prefix"
)

// saveQueueBlocks and saveQueueBytes bound the blocks waiting to be written
// (a large model's block is megabytes); beyond them new blocks are dropped
// (counted) rather than slowing the scheduler or growing memory.
const (
	saveQueueBlocks = 64
	saveQueueBytes  = 256 << 20
)

// PrefixStore persists prefix-cache blocks of one model fingerprint and block
// layout; it implements prefix.Disk. Blocks are written behind, in the
// background, as the scheduler indexes them; Close drains the queue. The key
// index is loaded at open and block bytes are read when first used.
type PrefixStore struct {
	s          *Store
	ns         []byte // key prefix: pfx/<hash of fingerprint and layout>/
	blockBytes int
	capBytes   int64

	mu    sync.Mutex
	index map[prefix.Key]*diskEntry
	clock uint64
	bytes int64

	qmu     sync.RWMutex // Save holds it shared while sending, Close exclusively to close queue
	queue   chan saveItem
	done    chan struct{}
	closed  bool
	dropped atomic.Uint64
	saved   atomic.Uint64
	loaded  atomic.Uint64
}

type diskEntry struct {
	last uint64
	size int64
}

type saveItem struct {
	key  prefix.Key
	data []byte
}

var _ prefix.Disk = (*PrefixStore)(nil)

// PrefixStats are a PrefixStore's counters.
type PrefixStats struct {
	Blocks                 int
	Bytes                  int64
	Saved, Loaded, Dropped uint64
}

// Prefix opens the prefix blocks stored for fingerprint with blocks of
// blockBytes bytes, keeping at most capBytes on disk (≤ 0: no cap). Entries
// of other fingerprints or layouts are never read.
func (s *Store) Prefix(fingerprint []byte, blockBytes int, capBytes int64) (*PrefixStore, error) {
	h := sha256.New()
	h.Write(fingerprint)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(blockBytes))
	h.Write(n[:])
	ns := fmt.Appendf(nil, "pfx/%s/", hex.EncodeToString(h.Sum(nil)[:12]))
	p := &PrefixStore{s: s, ns: ns, blockBytes: blockBytes, capBytes: capBytes, index: map[prefix.Key]*diskEntry{},
		queue: make(chan saveItem, max(1, min(saveQueueBlocks, saveQueueBytes/max(blockBytes, 1)))), done: make(chan struct{})}
	err := s.db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.PrefetchValues = false
		o.Prefix = ns
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			var key prefix.Key
			if len(k) != len(ns)+len(key) {
				continue
			}
			copy(key[:], k[len(ns):])
			p.clock++
			sz := it.Item().ValueSize()
			p.index[key] = &diskEntry{last: p.clock, size: sz}
			p.bytes += sz
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("loading the prefix-cache index: %w", err)
	}
	go p.writer()
	return p, nil
}

func (p *PrefixStore) dbKey(k prefix.Key) []byte {
	return append(append([]byte(nil), p.ns...), k[:]...)
}

// Has implements prefix.Disk.
func (p *PrefixStore) Has(k prefix.Key) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.index[k]
	return ok
}

// Load implements prefix.Disk.
func (p *PrefixStore) Load(k prefix.Key, dst []byte) error {
	key := p.dbKey(k)
	var v []byte
	err := p.s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err = it.ValueCopy(nil)
		return err
	})
	if err == nil {
		var payload []byte
		payload, err = open(key, v)
		if err == nil && len(payload) != p.blockBytes {
			err = errCorrupt
		}
		if err == nil && len(dst) != p.blockBytes {
			return fmt.Errorf("prefix block %s: buffer of %d bytes for %d", k, len(dst), p.blockBytes)
		}
		if err == nil {
			copy(dst, payload)
			p.loaded.Add(1)
			p.mu.Lock()
			if e := p.index[k]; e != nil {
				p.clock++
				e.last = p.clock
			}
			p.mu.Unlock()
			return nil
		}
	}
	p.forget(k)
	if err == errCorrupt {
		p.s.dropCorrupt(key)
	}
	return fmt.Errorf("prefix block %s: %w", k, err)
}

func (p *PrefixStore) forget(k prefix.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.index[k]; e != nil {
		p.bytes -= e.size
		delete(p.index, k)
	}
}

// Save implements prefix.Disk.
func (p *PrefixStore) Save(k prefix.Key, data []byte) {
	if p.s.Paused() || len(data) != p.blockBytes {
		return
	}
	p.qmu.RLock()
	defer p.qmu.RUnlock()
	if p.closed {
		return
	}
	select {
	case p.queue <- saveItem{k, append([]byte(nil), data...)}:
	default:
		p.dropped.Add(1)
	}
}

// Accepting implements prefix.Disk.
func (p *PrefixStore) Accepting() bool {
	return !p.s.Paused() && len(p.queue) < cap(p.queue)
}

// writer writes queued blocks in batches until Close.
func (p *PrefixStore) writer() {
	defer close(p.done)
	var batch []saveItem
	for it := range p.queue {
		batch = append(batch[:0], it)
	drain:
		for len(batch) < 16 {
			select {
			case more, ok := <-p.queue:
				if !ok {
					break drain
				}
				batch = append(batch, more)
			default:
				break drain
			}
		}
		p.write(batch)
		clear(batch)
	}
}

func (p *PrefixStore) write(batch []saveItem) {
	if p.s.Paused() {
		return
	}
	wb := p.s.db.NewWriteBatch()
	defer wb.Cancel()
	sizes := make([]int64, len(batch))
	for i, it := range batch {
		key := p.dbKey(it.key)
		v := seal(key, it.data)
		sizes[i] = int64(len(v))
		if err := wb.Set(key, v); err != nil {
			p.s.writeFailed("prefix blocks", err)
			return
		}
	}
	if err := wb.Flush(); err != nil {
		p.s.writeFailed("prefix blocks", err)
		return
	}
	p.saved.Add(uint64(len(batch)))
	p.mu.Lock()
	for i, it := range batch {
		if _, dup := p.index[it.key]; dup {
			continue
		}
		p.clock++
		p.index[it.key] = &diskEntry{last: p.clock, size: sizes[i]}
		p.bytes += sizes[i]
	}
	victims := p.overCapLocked()
	p.mu.Unlock()
	p.delete(victims)
}

// overCapLocked removes the least recently used entries beyond the cap from
// the index and returns them for deletion.
func (p *PrefixStore) overCapLocked() []prefix.Key {
	if p.capBytes <= 0 || p.bytes <= p.capBytes {
		return nil
	}
	keys := make([]prefix.Key, 0, len(p.index))
	for k := range p.index {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return p.index[keys[i]].last < p.index[keys[j]].last })
	var out []prefix.Key
	for _, k := range keys {
		if p.bytes <= p.capBytes {
			break
		}
		p.bytes -= p.index[k].size
		delete(p.index, k)
		out = append(out, k)
	}
	return out
}

func (p *PrefixStore) delete(keys []prefix.Key) {
	if len(keys) == 0 {
		return
	}
	wb := p.s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(p.dbKey(k)); err != nil {
			p.s.writeFailed("prefix eviction", err)
			return
		}
	}
	if err := wb.Flush(); err != nil {
		p.s.writeFailed("prefix eviction", err)
	}
}

// Stats returns the counters.
func (p *PrefixStore) Stats() PrefixStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PrefixStats{Blocks: len(p.index), Bytes: p.bytes, Saved: p.saved.Load(), Loaded: p.loaded.Load(), Dropped: p.dropped.Load()}
}

// Close writes what is queued and stops the writer; call it before
// Store.Close (graceful shutdown). Saves after Close are ignored.
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
