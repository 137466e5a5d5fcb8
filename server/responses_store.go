package server

import (
	"errors"
	"sync"
)

// StoredResponse is one stored Responses API response.
type StoredResponse struct {
	// ID is the response id (resp_…).
	ID string
	// Response is the response object as GET /v1/responses/{id} returns it.
	Response []byte
	// Conversation is the JSON array of chat messages that a request naming
	// this response as previous_response_id continues: the earlier turns,
	// this response's input and its output (instructions excluded, as they
	// do not carry over).
	Conversation []byte
}

// ErrResponseNotFound is what a ResponseStore returns for an unknown id.
var ErrResponseNotFound = errors.New("response not found")

// ResponseStore keeps stored responses (store: true). Implementations must
// be safe for concurrent use, and must not keep the slices of a Put value
// or hand out slices the store later changes.
type ResponseStore interface {
	// Get returns the response with id, or ErrResponseNotFound.
	Get(id string) (*StoredResponse, error)
	// Put stores r, replacing any response with the same id.
	Put(r *StoredResponse) error
	// Delete removes the response with id, or returns ErrResponseNotFound.
	Delete(id string) error
}

// MemoryResponseStore is a ResponseStore in memory holding at most a fixed
// number of responses (the oldest go first). It forgets everything on
// restart.
type MemoryResponseStore struct {
	mu    sync.Mutex
	max   int
	byID  map[string]*StoredResponse
	order []string // insertion order, for eviction; may hold deleted ids
}

// DefaultStoredResponses bounds a MemoryResponseStore made with max ≤ 0.
const DefaultStoredResponses = 10000

// NewMemoryResponseStore returns an empty store keeping at most max
// responses (DefaultStoredResponses when max ≤ 0).
func NewMemoryResponseStore(max int) *MemoryResponseStore {
	if max <= 0 {
		max = DefaultStoredResponses
	}
	return &MemoryResponseStore{max: max, byID: map[string]*StoredResponse{}}
}

// Get implements ResponseStore.
func (m *MemoryResponseStore) Get(id string) (*StoredResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byID[id]
	if !ok {
		return nil, ErrResponseNotFound
	}
	c := *r
	return &c, nil
}

// Put implements ResponseStore.
func (m *MemoryResponseStore) Put(r *StoredResponse) error {
	c := &StoredResponse{ID: r.ID, Response: append([]byte(nil), r.Response...),
		Conversation: append([]byte(nil), r.Conversation...)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byID[r.ID]; !ok {
		m.order = append(m.order, r.ID)
	}
	m.byID[r.ID] = c
	for len(m.byID) > m.max && len(m.order) > 0 {
		delete(m.byID, m.order[0])
		m.order = m.order[1:]
	}
	if len(m.order) > 2*m.max { // drop ids deleted earlier
		kept := m.order[:0]
		for _, id := range m.order {
			if _, ok := m.byID[id]; ok {
				kept = append(kept, id)
			}
		}
		m.order = kept
	}
	return nil
}

// Delete implements ResponseStore.
func (m *MemoryResponseStore) Delete(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byID[id]; !ok {
		return ErrResponseNotFound
	}
	delete(m.byID, id)
	return nil
}
