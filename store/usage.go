package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Usage are the counts of one API key, model and day.
type Usage struct {
	Requests         int64 `json:"requests"`
	Errors           int64 `json:"errors"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	CachedTokens     int64 `json:"cached_tokens"`
}

func (u *Usage) add(o Usage) {
	u.Requests += o.Requests
	u.Errors += o.Errors
	u.PromptTokens += o.PromptTokens
	u.CompletionTokens += o.CompletionTokens
	u.CachedTokens += o.CachedTokens
}

// UsageRow is one day's usage of one key and model.
type UsageRow struct {
	Day   string `json:"day"`     // YYYY-MM-DD, UTC
	Key   string `json:"api_key"` // KeyLabel of the API key
	Model string `json:"model"`
	Usage
}

const usagePrefix = "use/"

// KeyLabel names an API key in usage statistics without storing it: a short
// SHA-256 prefix ("key-1a2b3c4d"), or "anonymous" for none.
func KeyLabel(apiKey string) string {
	if apiKey == "" {
		return "anonymous"
	}
	d := sha256.Sum256([]byte(apiKey))
	return "key-" + hex.EncodeToString(d[:4])
}

// Day formats t as a usage day (UTC).
func Day(t time.Time) string { return t.UTC().Format("2006-01-02") }

func usageKey(day, key, model string) []byte {
	return []byte(usagePrefix + day + "\x00" + key + "\x00" + model)
}

// AddUsage adds u to the row of (day, key label, model). It is a
// read-modify-write transaction; adds in this process are serialized (so
// that concurrent requests do not lose them to conflicts), and a conflict
// is still retried.
func (s *Store) AddUsage(day, keyLabel, model string, u Usage) error {
	if s.Paused() {
		return nil
	}
	k := usageKey(day, keyLabel, model)
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	for try := 0; ; try++ {
		err := s.update(func(txn *badger.Txn) error {
			var cur Usage
			it, err := txn.Get(k)
			switch {
			case errors.Is(err, badger.ErrKeyNotFound):
			case err != nil:
				return err
			default:
				v, err := it.ValueCopy(nil)
				if err != nil {
					return err
				}
				if cur, err = decodeUsage(k, v); err != nil {
					s.corrupt.Add(1) // a corrupt counter restarts from zero
					cur = Usage{}
				}
			}
			cur.add(u)
			return txn.Set(k, seal(k, encodeUsage(cur)))
		})
		if errors.Is(err, badger.ErrConflict) && try < 10 {
			continue
		}
		if err != nil {
			s.writeFailed("usage", err)
		}
		return err
	}
}

func encodeUsage(u Usage) []byte {
	b := make([]byte, 0, 40)
	for _, v := range []int64{u.Requests, u.Errors, u.PromptTokens, u.CompletionTokens, u.CachedTokens} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func decodeUsage(k, v []byte) (Usage, error) {
	p, err := open(k, v)
	if err != nil || len(p) != 40 {
		return Usage{}, errCorrupt
	}
	f := func(i int) int64 { return int64(binary.LittleEndian.Uint64(p[8*i:])) }
	return Usage{Requests: f(0), Errors: f(1), PromptTokens: f(2), CompletionTokens: f(3), CachedTokens: f(4)}, nil
}

// UsageQuery selects rows; empty fields match everything. Days are
// inclusive YYYY-MM-DD.
type UsageQuery struct {
	From, To string
	Key      string // a KeyLabel
	Model    string
}

// Usage returns the matching rows ordered by day, key and model. Corrupt
// rows are skipped and counted.
func (s *Store) Usage(q UsageQuery) ([]UsageRow, error) {
	var rows []UsageRow
	err := s.db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.Prefix = []byte(usagePrefix)
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Seek([]byte(usagePrefix + q.From)); it.Valid(); it.Next() {
			k := it.Item().Key()
			parts := strings.SplitN(string(k[len(usagePrefix):]), "\x00", 3)
			if len(parts) != 3 {
				continue
			}
			if q.To != "" && parts[0] > q.To {
				break
			}
			if (q.Key != "" && parts[1] != q.Key) || (q.Model != "" && parts[2] != q.Model) {
				continue
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			u, err := decodeUsage(k, v)
			if err != nil {
				s.corrupt.Add(1)
				continue
			}
			rows = append(rows, UsageRow{Day: parts[0], Key: parts[1], Model: parts[2], Usage: u})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading usage: %w", err)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Day != b.Day {
			return a.Day < b.Day
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Model < b.Model
	})
	return rows, nil
}
