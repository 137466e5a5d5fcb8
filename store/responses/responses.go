// Package responses keeps Responses API responses (previous_response_id) in
// the Badger store, with a TTL; it implements server.ResponseStore. It is a
// package of its own so that package store does not depend on the server.
package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/infernix/infernix/server"
	"github.com/infernix/infernix/store"
)

// Store implements server.ResponseStore on a store.Store.
type Store struct {
	kv  *store.Store
	ttl time.Duration
}

var _ server.ResponseStore = (*Store)(nil)

// New keeps responses in s for ttl (≤ 0: 30 days).
func New(s *store.Store, ttl time.Duration) *Store {
	if ttl <= 0 {
		ttl = 30 * 24 * time.Hour
	}
	return &Store{kv: s, ttl: ttl}
}

const prefix = "rsp/"

type record struct {
	Response     []byte `json:"response"`
	Conversation []byte `json:"conversation"`
}

// Get implements server.ResponseStore.
func (r *Store) Get(id string) (*server.StoredResponse, error) {
	v, err := r.kv.Get([]byte(prefix + id))
	if err == store.ErrNotFound {
		return nil, server.ErrResponseNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("stored response %s: %w", id, err)
	}
	var rec record
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, fmt.Errorf("stored response %s: %w", id, err)
	}
	// What Put writes: a JSON response and a JSON array of messages.
	conv := bytes.TrimSpace(rec.Conversation)
	if !json.Valid(rec.Response) || !json.Valid(conv) || conv[0] != '[' {
		return nil, fmt.Errorf("stored response %s: not a response record of this version", id)
	}
	return &server.StoredResponse{ID: id, Response: rec.Response, Conversation: rec.Conversation}, nil
}

// Put implements server.ResponseStore.
func (r *Store) Put(sr *server.StoredResponse) error {
	v, err := json.Marshal(record{Response: sr.Response, Conversation: sr.Conversation})
	if err != nil {
		return err
	}
	return r.kv.Put([]byte(prefix+sr.ID), v, r.ttl)
}

// Delete implements server.ResponseStore.
func (r *Store) Delete(id string) error {
	err := r.kv.Delete([]byte(prefix + id))
	if err == store.ErrNotFound {
		return server.ErrResponseNotFound
	}
	return err
}
