package store

import (
	"errors"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// ErrNotFound is returned by Get and Delete for a missing (or expired, or
// corrupt) key.
var ErrNotFound = errors.New("store: not found")

// Get returns a copy of key's checksummed value. A corrupt value is dropped,
// counted and reported as ErrNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	var v []byte
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err = it.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	p, err := open(key, v)
	if err != nil {
		s.dropCorrupt(key, v)
		return nil, ErrNotFound
	}
	return p, nil
}

// Put stores value under key with a checksum; ttl > 0 expires it.
func (s *Store) Put(key, value []byte, ttl time.Duration) error {
	e := badger.NewEntry(append([]byte(nil), key...), seal(key, value))
	if ttl > 0 {
		e = e.WithTTL(ttl)
	}
	err := s.update(func(txn *badger.Txn) error { return txn.SetEntry(e) })
	if err != nil {
		s.writeFailed(string(key), err)
	}
	return err
}

// Delete removes key, or returns ErrNotFound.
func (s *Store) Delete(key []byte) error {
	err := s.update(func(txn *badger.Txn) error {
		if _, err := txn.Get(key); err != nil {
			return err
		}
		return txn.Delete(key)
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return ErrNotFound
	}
	return err
}
