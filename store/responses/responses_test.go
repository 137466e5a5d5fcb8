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

// TestMalformedRecord: a stored value whose seal checks but which is not a
// record this version writes (another version's format, a bad write) is an
// error, never a response with empty or invalid JSON.
func TestMalformedRecord(t *testing.T) {
	kv, err := store.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	r := New(kv, time.Hour)
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"valid", `{"response":"eyJpZCI6InIifQ==","conversation":"W10="}`, true}, // {"id":"r"}, []
		{"empty object", `{}`, false},
		{"raw response object", `{"id":"resp_x","object":"response","output":[]}`, false},
		{"response not JSON", `{"response":"bm90IGpzb24=","conversation":"W10="}`, false},
		{"conversation not an array", `{"response":"eyJpZCI6InIifQ==","conversation":"e30="}`, false},
		{"not JSON", `response`, false},
	} {
		id := "resp_" + tc.name
		if err := kv.Put([]byte("rsp/"+id), []byte(tc.value), time.Hour); err != nil {
			t.Fatal(err)
		}
		got, err := r.Get(id)
		if tc.ok {
			if err != nil || string(got.Response) != `{"id":"r"}` || string(got.Conversation) != `[]` {
				t.Errorf("%s: %+v, %v", tc.name, got, err)
			}
			continue
		}
		if err == nil || errors.Is(err, server.ErrResponseNotFound) {
			t.Errorf("%s: got %+v, %v; want a malformed-record error", tc.name, got, err)
		}
	}
}
