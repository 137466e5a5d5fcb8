// Package store is Infernix's persistent state in one Badger v4 database
// under --data-dir: prefix-cache blocks (keyed by model fingerprint), usage
// statistics per API key, model and day, and stored Responses API responses.
//
// Every value carries a CRC-32C over its key and payload; an entry that fails
// it is dropped and counted, never served. A data directory is used by one
// process at a time (Badger's directory lock): a second Open fails with
// ErrInUse.
package store

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// ErrInUse says another process holds the data directory.
var ErrInUse = errors.New("the data directory is in use by another infernix process")

// errCorrupt marks an entry whose checksum or framing is wrong.
var errCorrupt = errors.New("store: corrupt entry")

// valueThreshold: values this large or larger (prefix blocks and snapshots)
// go to Badger's value log instead of the LSM tree, so that compactions do
// not rewrite them and opening the index reads only keys. Scores, usage rows
// and most responses stay in the tree.
const valueThreshold = 16 << 10

// gcInterval is how often deleted space is reclaimed (Reclaim) at the
// latest; the prefix cache asks sooner once it has deleted a value-log
// file's worth.
const gcInterval = 10 * time.Minute

// valueLogFileSize is the size of Badger's value-log files. The value log
// is reclaimed a file at a time, so the disk use of the prefix cache can
// pass its cap by up to about two files; Badger's default, 1 GiB, would be
// a quarter of the default cap. A variable for tests.
var valueLogFileSize int64 = 256 << 20

// gcDiscardRatio: a value-log file is rewritten once this share of it is
// deleted data.
const gcDiscardRatio = 0.3

// reclaimKey is the throwaway key whose DropPrefix flushes Badger's
// memtable and compacts it (see Reclaim).
var reclaimKey = []byte("gc/reclaim")

// Store is an open data directory.
type Store struct {
	db      *badger.DB
	dir     string
	log     *slog.Logger
	corrupt atomic.Uint64
	paused  atomic.Bool // a write failed for lack of space: persistence stops
	usageMu sync.Mutex  // serializes AddUsage's read-modify-writes
	// gate: writers hold it shared for the span of a write, Reclaim
	// exclusively (Badger refuses writes while DropPrefix runs).
	gate    sync.RWMutex
	freed   atomic.Int64  // value bytes deleted since the last Reclaim
	reclaim chan struct{} // asks gcLoop for a Reclaim now
	warn    sync.Once
	stop    chan struct{}
	wg      sync.WaitGroup
}

// DefaultDir is the per-user data directory ($XDG_DATA_HOME/infernix or
// ~/.local/share/infernix).
func DefaultDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "infernix")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "infernix")
	}
	return filepath.Join(os.TempDir(), "infernix")
}

// Open opens (creating) the database in dir. log may be nil.
func Open(dir string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	opt := badger.DefaultOptions(dir).WithLogger(nil).WithNumVersionsToKeep(1).WithValueThreshold(valueThreshold).
		WithValueLogFileSize(valueLogFileSize)
	db, err := badger.Open(opt)
	if err != nil {
		if strings.Contains(err.Error(), "directory lock") {
			return nil, fmt.Errorf("%s: %w (stop it or pass another --data-dir)", dir, ErrInUse)
		}
		return nil, fmt.Errorf("opening data directory %s: %w", dir, err)
	}
	s := &Store{db: db, dir: dir, log: log, stop: make(chan struct{}), reclaim: make(chan struct{}, 1)}
	if n, err := s.dropLegacy(); err != nil {
		s.writeFailed("removing entries of an older version", err)
	} else if n > 0 {
		log.Info("removed entries an older version wrote", "dir", dir, "entries", n)
	}
	s.wg.Add(1)
	go s.gcLoop()
	return s, nil
}

// legacyPrefixes are key prefixes that older versions wrote and this one
// never reads: Open deletes them rather than leave them to their TTL.
//
//	snap/<fingerprint>/<key>  hybrid models' state snapshots, kept 7 days,
//	                          before they moved into the prefix store
//	                          (pfx/<id>/s<key>, evicted with its blocks)
var legacyPrefixes = []string{"snap/"}

// dropLegacy deletes every entry under legacyPrefixes and returns how many.
func (s *Store) dropLegacy() (int, error) {
	var keys [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		for _, p := range legacyPrefixes {
			o := badger.DefaultIteratorOptions
			o.PrefetchValues = false
			o.Prefix = []byte(p)
			it := txn.NewIterator(o)
			for it.Rewind(); it.Valid(); it.Next() {
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			it.Close()
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	if err := s.deleteKeys(keys); err != nil {
		return 0, err
	}
	return len(keys), nil
}

// deleteKeys deletes keys in one write batch.
func (s *Store) deleteKeys(keys [][]byte) error {
	return s.writeBatch(func(wb *badger.WriteBatch) error {
		for _, k := range keys {
			if err := wb.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// update runs a read-write transaction (under the gate).
func (s *Store) update(fn func(txn *badger.Txn) error) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	return s.db.Update(fn)
}

// writeBatch fills a write batch with fill and writes it (under the gate);
// nothing is written when fill fails.
func (s *Store) writeBatch(fill func(wb *badger.WriteBatch) error) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	if err := fill(wb); err != nil {
		return err
	}
	return wb.Flush()
}

// deleted notes n bytes of values deleted, and asks for a Reclaim once they
// fill a value-log file.
func (s *Store) deleted(n int64) {
	if s.freed.Add(n) >= valueLogFileSize {
		select {
		case s.reclaim <- struct{}{}:
		default:
		}
	}
}

// Reclaim gives the space of deleted values back to the file system. Badger
// frees a value-log file only after its compactions have counted what in
// it is deleted, and with keys this small its memtable would take millions
// of writes to fill and be compacted at all: so a cap on the prefix cache
// would bound its index but not the disk. Here DropPrefix of a throwaway
// key flushes the memtable and compacts it with the tables below it
// (writes wait on the gate meanwhile: Badger refuses them), and the value
// log's garbage collection then rewrites the files whose share of deleted
// data passed gcDiscardRatio.
func (s *Store) Reclaim() error {
	s.freed.Store(0)
	s.gate.Lock()
	err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(reclaimKey, []byte{1}) })
	if err == nil {
		err = s.db.DropPrefix(reclaimKey)
	}
	s.gate.Unlock()
	if err != nil {
		return fmt.Errorf("reclaiming deleted space: %w", err)
	}
	for s.db.RunValueLogGC(gcDiscardRatio) == nil {
	}
	return nil
}

// Dir is the data directory.
func (s *Store) Dir() string { return s.dir }

// Corrupt is the number of entries dropped for a bad checksum or framing.
func (s *Store) Corrupt() uint64 { return s.corrupt.Load() }

// Paused reports whether persistence stopped after running out of space.
func (s *Store) Paused() bool { return s.paused.Load() }

// Close stops background work and closes the database.
func (s *Store) Close() error {
	close(s.stop)
	s.wg.Wait()
	return s.db.Close()
}

func (s *Store) gcLoop() {
	defer s.wg.Done()
	t := time.NewTicker(gcInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.reclaim:
		}
		if err := s.Reclaim(); err != nil {
			s.writeFailed("reclaim", err)
		}
	}
}

// writeFailed pauses persistence on a full disk (one warning) and logs
// other errors.
func (s *Store) writeFailed(what string, err error) {
	if isNoSpace(err) {
		s.paused.Store(true)
		s.warn.Do(func() {
			s.log.Warn("data directory is full: persistence paused, serving continues", "dir", s.dir, "what", what, "err", err)
		})
		return
	}
	s.log.Warn("store write failed", "what", what, "err", err)
}

func isNoSpace(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "no space left") || strings.Contains(err.Error(), "ENOSPC"))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// seal frames payload as version(1) | crc32c(key, payload)(4) | payload.
func seal(key, payload []byte) []byte {
	out := make([]byte, 5+len(payload))
	out[0] = 1
	c := crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, payload)
	out[1], out[2], out[3], out[4] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
	copy(out[5:], payload)
	return out
}

// open checks a sealed value and returns its payload (aliasing v).
func open(key, v []byte) ([]byte, error) {
	if len(v) < 5 || v[0] != 1 {
		return nil, errCorrupt
	}
	want := uint32(v[1]) | uint32(v[2])<<8 | uint32(v[3])<<16 | uint32(v[4])<<24
	if crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, v[5:]) != want {
		return nil, errCorrupt
	}
	return v[5:], nil
}

// dropCorrupt deletes a bad entry and counts it. seen is the value found
// bad: it is deleted only while it is still the key's value, so that one
// written since (a Put racing the read) is kept.
func (s *Store) dropCorrupt(key, seen []byte) {
	s.corrupt.Add(1)
	k := append([]byte(nil), key...)
	err := s.update(func(txn *badger.Txn) error {
		it, err := txn.Get(k)
		if err != nil {
			return err
		}
		if cur, err := it.ValueCopy(nil); err == nil && !bytes.Equal(cur, seen) {
			return nil // rewritten since (an unreadable value goes)
		}
		return txn.Delete(k)
	})
	if errors.Is(err, badger.ErrKeyNotFound) || errors.Is(err, badger.ErrConflict) {
		return // already gone, or rewritten while we looked
	}
	if err != nil {
		s.writeFailed("drop corrupt entry", err)
	}
}
