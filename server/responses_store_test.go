package server

import (
	"errors"
	"fmt"
	"testing"
)

func TestMemoryResponseStore(t *testing.T) {
	m := NewMemoryResponseStore(3)
	var s ResponseStore = m
	r := &StoredResponse{ID: "a", Response: []byte(`{"id":"a"}`), Conversation: []byte(`[]`)}
	if err := s.Put(r); err != nil {
		t.Fatal(err)
	}
	r.Response[2] = 'X' // the store keeps its own copy
	got, err := s.Get("a")
	if err != nil || string(got.Response) != `{"id":"a"}` || string(got.Conversation) != `[]` {
		t.Fatalf("Get: %v %+v", err, got)
	}
	if _, err := s.Get("b"); !errors.Is(err, ErrResponseNotFound) {
		t.Errorf("Get unknown: %v", err)
	}
	if err := s.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("a"); !errors.Is(err, ErrResponseNotFound) {
		t.Errorf("second Delete: %v", err)
	}
	// At most 3: the oldest go first, however many were deleted before.
	for i := range 10 {
		s.Put(&StoredResponse{ID: fmt.Sprint(i)})
		if i%2 == 0 {
			s.Delete(fmt.Sprint(i))
		}
	}
	for i := range 10 {
		_, err := s.Get(fmt.Sprint(i))
		if want := i == 5 || i == 7 || i == 9; (err == nil) != want {
			t.Errorf("response %d: %v", i, err)
		}
	}
	if len(m.order) > 2*m.max+1 {
		t.Errorf("order grew to %d", len(m.order))
	}
}
