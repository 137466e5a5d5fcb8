package store

import (
	"bytes"
	"fmt"
	"sort"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/infernix/infernix/engine/prefix"
)

// PrefixSet is the stored prefix cache of one model fingerprint and layout.
type PrefixSet struct {
	ID        string `json:"id"` // the fingerprint digest in the keys
	Blocks    int    `json:"blocks"`
	Snapshots int    `json:"snapshots"`
	Bytes     int64  `json:"bytes"` // blocks and snapshots
}

// prefixEntry tells what a key under pfx/<id>/ holds (see PrefixStore).
func prefixEntry(rest []byte) (kind, bool) {
	switch len(rest) {
	case len(prefix.Key{}):
		return kindBlock, true
	case 1 + len(prefix.Key{}):
		return kindSnapshot, rest[0] == byte(kindSnapshot)
	}
	return 0, false // a score, or not ours
}

// PrefixSets lists the stored prefix caches (infernix cache ls).
func (s *Store) PrefixSets() ([]PrefixSet, error) {
	sets := map[string]*PrefixSet{}
	err := s.db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.PrefetchValues = false
		o.Prefix = []byte("pfx/")
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()[len("pfx/"):]
			i := bytes.IndexByte(k, '/')
			if i < 0 {
				continue
			}
			id := string(k[:i])
			kd, ok := prefixEntry(k[i+1:])
			if !ok {
				continue
			}
			ps := sets[id]
			if ps == nil {
				ps = &PrefixSet{ID: id}
				sets[id] = ps
			}
			if kd == kindBlock {
				ps.Blocks++
			} else {
				ps.Snapshots++
			}
			ps.Bytes += it.Item().ValueSize()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]PrefixSet, 0, len(sets))
	for _, ps := range sets {
		out = append(out, *ps)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// PrunePrefix deletes the prefix set id ("" = every set) and returns the
// number of blocks and snapshots deleted. The server must not be running on this store
// (the directory lock guarantees it for another process).
func (s *Store) PrunePrefix(id string) (int, error) {
	p := []byte("pfx/")
	if id != "" {
		p = fmt.Appendf(nil, "pfx/%s/", id)
	}
	var keys [][]byte
	entries := 0
	err := s.db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.PrefetchValues = false
		o.Prefix = p
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			keys = append(keys, k)
			if i := bytes.IndexByte(k[len("pfx/"):], '/'); i >= 0 {
				if _, ok := prefixEntry(k[len("pfx/")+i+1:]); ok {
					entries++
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := s.deleteKeys(keys); err != nil {
		return 0, err
	}
	// The space comes back now, not at the next server's first Reclaim.
	if err := s.Reclaim(); err != nil {
		return entries, err
	}
	return entries, nil
}

// Size is the database's size on disk: LSM tree and value log bytes.
func (s *Store) Size() (lsm, vlog int64) { return s.db.Size() }
