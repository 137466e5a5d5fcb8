package plugins

import (
	"encoding/binary"
	"math"
	"sync"
	"time"
)

// ByteStore is a persistent byte store such as the server's *store.Store
// (--data-dir): Get returns an error for a missing key.
type ByteStore interface {
	Get(key []byte) ([]byte, error)
	Put(key, value []byte, ttl time.Duration) error
	Delete(key []byte) error
}

// StoreKV is a KV kept in a ByteStore, so plugin state (quotas, counters)
// survives restarts. Each value records its own expiry, so an update keeps
// the expiry the key was created with. Incr is atomic within the process.
type StoreKV struct {
	bs     ByteStore
	prefix string
	mu     sync.Mutex // makes Incr's read-modify-write atomic
}

// NewStoreKV keeps keys under prefix in bs.
func NewStoreKV(bs ByteStore, prefix string) *StoreKV { return &StoreKV{bs: bs, prefix: prefix} }

// Value layout: 8 bytes expiry (unix ns, 0 = never), 1 byte kind, payload.
const (
	kindNumber byte = 'n'
	kindString byte = 's'
)

func (k *StoreKV) key(key string) []byte { return []byte(k.prefix + key) }

func (k *StoreKV) read(key string) (v any, expires int64, ok bool) {
	b, err := k.bs.Get(k.key(key))
	if err != nil || len(b) < 9 {
		return nil, 0, false
	}
	expires = int64(binary.BigEndian.Uint64(b))
	if expires != 0 && time.Now().UnixNano() > expires {
		return nil, 0, false
	}
	switch b[8] {
	case kindNumber:
		if len(b) != 17 {
			return nil, 0, false
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b[9:])), expires, true
	case kindString:
		return string(b[9:]), expires, true
	}
	return nil, 0, false
}

func (k *StoreKV) write(key string, v any, expires int64) {
	b := binary.BigEndian.AppendUint64(nil, uint64(expires))
	switch v := v.(type) {
	case float64:
		b = append(b, kindNumber)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
	case string:
		b = append(b, kindString)
		b = append(b, v...)
	default:
		return
	}
	var ttl time.Duration
	if expires != 0 {
		ttl = time.Until(time.Unix(0, expires))
		if ttl <= 0 {
			k.bs.Delete(k.key(key))
			return
		}
	}
	k.bs.Put(k.key(key), b, ttl)
}

func expiry(ttl time.Duration) int64 {
	if ttl <= 0 {
		return 0
	}
	return time.Now().Add(ttl).UnixNano()
}

func (k *StoreKV) Get(key string) (any, bool) {
	v, _, ok := k.read(key)
	return v, ok
}

func (k *StoreKV) Set(key string, v any, ttl time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.write(key, v, expiry(ttl))
}

func (k *StoreKV) Incr(key string, n float64, ttl time.Duration) float64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, exp, ok := k.read(key)
	cur, _ := v.(float64)
	if !ok {
		exp = expiry(ttl)
	}
	k.write(key, cur+n, exp)
	return cur + n
}

func (k *StoreKV) Delete(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.bs.Delete(k.key(key)) // a missing key is already deleted
}
