package plugins

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/infernix/infernix/store"
)

// TestStoreKV runs the kv API over the real store and checks that values,
// counters and expiry survive reopening it.
func TestStoreKV(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	kv := NewStoreKV(st, "plugin/")
	kv.Set("s", "text", 0)
	kv.Incr("n", 2, time.Hour)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); kv.Incr("n", 1, 0) }()
	}
	wg.Wait()
	kv.Set("gone", 1.0, time.Millisecond)
	kv.Set("del", "x", 0)
	kv.Delete("del")
	time.Sleep(5 * time.Millisecond)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = store.Open(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	kv = NewStoreKV(st, "plugin/")
	if v, ok := kv.Get("s"); !ok || v != "text" {
		t.Errorf("s = %v %v", v, ok)
	}
	if v, ok := kv.Get("n"); !ok || v != 52.0 {
		t.Errorf("n = %v %v", v, ok)
	}
	for _, k := range []string{"gone", "del", "never"} {
		if v, ok := kv.Get(k); ok {
			t.Errorf("%s = %v, want missing", k, v)
		}
	}
	if _, err := st.Get([]byte("s")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("keys are not under the prefix: %v", err)
	}
}
