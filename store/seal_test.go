package store

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/infernix/infernix/engine/prefix"
)

func FuzzOpen(f *testing.F) {
	f.Add([]byte("k"), []byte("payload"), 3)
	f.Add([]byte(""), []byte(""), 0)
	f.Fuzz(func(t *testing.T, key, payload []byte, flip int) {
		v := seal(key, payload)
		got, err := open(key, v)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("round trip: %v", err)
		}
		// Any single flipped bit or truncation is detected.
		if flip < 0 {
			flip = -flip
		}
		bad := append([]byte(nil), v...)
		bad[flip%len(bad)] ^= 1 << (flip % 8)
		if _, err := open(key, bad); err == nil {
			t.Fatal("flipped bit not detected")
		}
		if _, err := open(key, v[:len(v)-1]); err == nil && len(v) > 5 {
			t.Fatal("truncation not detected")
		}
		decodeUsage(key, payload) // must not panic on arbitrary bytes
	})
}

func TestDiskFullPauses(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	defer s.Close()
	p, err := s.Prefix([]byte("m"), 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Accepting() {
		t.Fatal("a fresh store does not accept blocks")
	}
	s.writeFailed("test", errors.New("write /data/000001.vlog: no space left on device"))
	s.writeFailed("test", errors.New("write: no space left on device")) // warned once
	if !s.Paused() {
		t.Fatal("not paused")
	}
	if p.Accepting() {
		t.Fatal("accepting blocks while paused")
	}
	p.Save(prefix.Seed(), make([]byte, 8))
	p.Close()
	if st := p.Stats(); st.Saved != 0 || st.Blocks != 0 || st.Dropped != 1 {
		t.Fatalf("saved while paused: %+v (want the block dropped and counted)", st)
	}
	if err := s.AddUsage("2026-12-01", "k", "m", Usage{Requests: 1}); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecodeRecords: the record decoders (a score, a usage row, a prefix
// key) never panic on arbitrary stored bytes, and accept only what the
// matching encoder writes under that key.
func FuzzDecodeRecords(f *testing.F) {
	mk := []byte("pfx/0123456789abcdef01234567/mb0123456789abcdef")
	f.Add(mk, sealMeta(mk, entryMeta{score: 12.5, size: 1005}))
	uk := usageKey("2026-12-01", "anonymous", "qwen")
	f.Add(uk, seal(uk, encodeUsage(Usage{Requests: 3, PromptTokens: 100})))
	f.Add([]byte("k"), []byte{1, 0, 0, 0, 0})
	f.Add([]byte(""), []byte{})
	f.Fuzz(func(t *testing.T, key, v []byte) {
		if m, ok := openMeta(key, v); ok {
			if math.IsNaN(float64(m.score)) || math.IsInf(float64(m.score), 0) || m.size <= 0 {
				t.Fatalf("invalid score accepted: %+v", m)
			}
			if !bytes.Equal(sealMeta(key, m), v) {
				t.Fatalf("score %+v does not re-encode to %x", m, v)
			}
		}
		if u, err := decodeUsage(key, v); err == nil {
			if !bytes.Equal(seal(key, encodeUsage(u)), v) {
				t.Fatalf("usage %+v does not re-encode to %x", u, v)
			}
		} else if u != (Usage{}) {
			t.Fatalf("a rejected usage row returned %+v", u)
		}
		if kd, ok := prefixEntry(v); ok {
			want := len(prefix.Key{})
			if kd == kindSnapshot {
				want++
			}
			if len(v) != want {
				t.Fatalf("a %d-byte key read as kind %c", len(v), kd)
			}
		}
	})
}
