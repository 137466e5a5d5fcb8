package sched

import (
	"time"

	"github.com/infernix/infernix/engine/prefix"
)

// Persistence of the prefix cache (Config.SaveInterval,
// --prefix-cache-save-mins). New full blocks and hybrid snapshots are marked
// dirty as they are made; a save round on the loop goroutine hands them to
// the disk tier (Config.PrefixDisk, Config.SnapshotDisk), whose own writer
// puts them on disk in the background. Rounds run every SaveInterval; with
// SaveInterval 0, at every loop iteration (each entry is saved as soon as it
// is made). A round:
//   - reads each dirty block that is still indexed from the KV pool; its
//     bytes are valid because indexed blocks are never written and only the
//     loop evicts;
//   - stops when the tier's write queue is full and resumes at the next loop
//     iteration, so that saving never blocks serving; while lanes run it
//     moves at most saveStepBlocks entries per iteration.
//
// A dirty block evicted from the device pool before its round is saved at
// eviction (its bytes are read then, as for the host pool): what was computed
// reaches the disk whatever the interval. A dirty snapshot dropped from host
// memory is saved then too. Should the queue be full at that moment the entry
// is lost (the store counts it as dropped).
//
// When the loop ends (Close then drained, or Shutdown) everything dirty is
// saved, waiting for the tier (prefix.Flusher) when its queue is full, and the
// tier is flushed. A process killed without that loses what was dirty; what
// the tier wrote stays readable (the store checksums every entry).
type saver struct {
	every  time.Duration
	next   time.Time // the next round's start
	active bool      // a round is in progress (paused by a full queue)
	retry  time.Duration
	blocks []prefix.Key
	dirty  map[prefix.Key]struct{} // blocks made and not yet saved
	snaps  []prefix.Key            // snapshots marked dirty (snapEntry.dirty), in order
	timer  *time.Timer
}

// saveStepBlocks bounds the entries a round moves per loop iteration while
// requests are running (each is a read from the KV pool and a copy).
const saveStepBlocks = 16

// savePoll is how soon a round paused by a full write queue retries when the
// loop is otherwise idle; the delay doubles, up to saveMaxRetry, while the
// queue takes nothing (a store paused by a full disk takes nothing for good).
const (
	savePoll     = 5 * time.Millisecond
	saveMaxRetry = time.Second
)

func (s *Scheduler) persisting() bool {
	return s.disk != nil || (s.snaps != nil && s.snaps.disk != nil)
}

// markBlock records a newly indexed block for the next round.
func (s *Scheduler) markBlock(key prefix.Key) {
	if _, ok := s.save.dirty[key]; ok || s.disk.Has(key) {
		return
	}
	s.save.dirty[key] = struct{}{}
	s.save.blocks = append(s.save.blocks, key)
}

// pending reports whether anything waits for a round.
func (s *Scheduler) pending() bool { return len(s.save.dirty) > 0 || len(s.save.snaps) > 0 }

// saveDue runs (a step of) a save round when one is due.
func (s *Scheduler) saveDue() {
	if !s.persisting() || !s.save.active && !s.pending() {
		return
	}
	if !s.save.active {
		now := time.Now()
		if now.Before(s.save.next) {
			return
		}
		s.save.active = true
		s.save.next = now.Add(s.save.every)
	}
	limit := -1
	if len(s.running) > 0 {
		limit = saveStepBlocks
	}
	moved, done := s.saveSome(limit, false)
	switch {
	case done:
		s.save.active, s.save.retry = false, 0
	case moved > 0:
		s.save.retry = 0
	default: // the queue is full, or the store paused (disk full): back off
		s.save.retry = min(max(2*s.save.retry, savePoll), saveMaxRetry)
	}
}

// saveWait is what an idle loop also waits on: the next round, a retry of a
// paused one, or nothing (nil).
func (s *Scheduler) saveWait() <-chan time.Time {
	if !s.persisting() || !s.save.active && !s.pending() {
		return nil
	}
	d := max(s.save.retry, savePoll)
	if !s.save.active {
		d = max(time.Until(s.save.next), 0)
	}
	if s.save.timer == nil {
		s.save.timer = time.NewTimer(d)
	} else {
		s.save.timer.Reset(d)
	}
	return s.save.timer.C
}

// saveSome hands up to limit (< 0: all) dirty entries to the tiers, oldest
// first; it returns how many it handed over and whether none is left. With
// wait it waits for a full queue to drain (shutdown); otherwise it stops
// there.
func (s *Scheduler) saveSome(limit int, wait bool) (int, bool) {
	moved := 0
	room := func(acc interface{ Accepting() bool }) bool {
		if acc.Accepting() {
			return true
		}
		if f, ok := acc.(prefix.Flusher); ok && wait {
			f.Flush()
			return acc.Accepting() // still full: the store paused (disk full)
		}
		return false
	}
	i := 0
	for ; i < len(s.save.blocks) && moved != limit; i++ {
		key := s.save.blocks[i]
		if _, ok := s.save.dirty[key]; !ok {
			continue // saved at eviction
		}
		blk, ok := s.pc.Block(key)
		if !ok {
			delete(s.save.dirty, key) // cannot happen: evictions save dirty blocks
			continue
		}
		if !room(s.disk) {
			break
		}
		s.kvc.ReadBlock(blk, s.kvbuf)
		s.disk.Save(key, s.kvbuf)
		delete(s.save.dirty, key)
		moved++
	}
	s.save.blocks = s.save.blocks[:copy(s.save.blocks, s.save.blocks[i:])]
	if len(s.save.blocks) == 0 {
		clear(s.save.dirty) // only entries the list no longer names could remain
	}
	i = 0
	for ; i < len(s.save.snaps) && moved != limit; i++ {
		e := s.snaps.byKey[s.save.snaps[i]]
		if e == nil || !e.dirty {
			continue // saved when dropped from memory
		}
		if !room(s.snaps.disk) {
			break
		}
		s.snaps.disk.SaveSnapshot(e.key, e.blob)
		e.dirty = false
		moved++
	}
	s.save.snaps = s.save.snaps[:copy(s.save.snaps, s.save.snaps[i:])]
	return moved, len(s.save.blocks) == 0 && len(s.save.snaps) == 0
}

// saveAll saves everything dirty and flushes the tiers (the loop is ending).
func (s *Scheduler) saveAll() {
	if !s.persisting() {
		return
	}
	s.saveSome(-1, true)
	if f, ok := s.disk.(prefix.Flusher); ok {
		f.Flush()
	}
	if s.snaps != nil {
		if f, ok := s.snaps.disk.(prefix.Flusher); ok {
			f.Flush()
		}
	}
	s.save.blocks, s.save.snaps = nil, nil
	clear(s.save.dirty)
	if s.save.timer != nil {
		s.save.timer.Stop()
	}
}

// evicted saves a dirty block that the device cache is dropping; buf holds
// its bytes when read is false.
func (s *Scheduler) evicted(key prefix.Key, block int32, read bool) {
	if _, ok := s.save.dirty[key]; !ok || s.disk == nil {
		return
	}
	if read {
		s.kvc.ReadBlock(block, s.kvbuf)
	}
	s.disk.Save(key, s.kvbuf) // dropped (and counted) when the queue is full
	delete(s.save.dirty, key)
}
