package responses

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/infernix/infernix/server"
	"github.com/infernix/infernix/store"
)

func TestResponses(t *testing.T) {
	dir := t.TempDir()
	kv, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := New(kv, time.Hour)
	in := &server.StoredResponse{ID: "resp_1", Response: []byte(`{"id":"resp_1"}`), Conversation: []byte(`[{"role":"user","content":"hi"}]`)}
	if err := r.Put(in); err != nil {
		t.Fatal(err)
	}
	in.Response[0] = 'X' // the store must not keep the caller's slices
	short := New(kv, time.Second)
	if err := short.Put(&server.StoredResponse{ID: "resp_short", Response: []byte("{}"), Conversation: []byte("[]")}); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	kv, err = store.Open(dir, nil) // persisted across restarts
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	r = New(kv, time.Hour)
	got, err := r.Get("resp_1")
	if err != nil || got.ID != "resp_1" || !bytes.Equal(got.Response, []byte(`{"id":"resp_1"}`)) || !bytes.Equal(got.Conversation, []byte(`[{"role":"user","content":"hi"}]`)) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := r.Get("resp_missing"); !errors.Is(err, server.ErrResponseNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if err := r.Delete("resp_1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete("resp_1"); !errors.Is(err, server.ErrResponseNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := r.Get("resp_1"); !errors.Is(err, server.ErrResponseNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	// Badger TTLs have one-second granularity.
	time.Sleep(2100 * time.Millisecond)
	if _, err := r.Get("resp_short"); !errors.Is(err, server.ErrResponseNotFound) {
		t.Fatalf("expired: %v", err)
	}
}
