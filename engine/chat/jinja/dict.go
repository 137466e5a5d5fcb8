package jinja

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Dict is an insertion-ordered mapping with Python key semantics: keys are
// hashable values (str, int, float, bool, None, tuples of those), and keys
// that compare equal in Python (1, 1.0, True) are the same key.
type Dict struct {
	keys []Value
	vals []Value
	idx  map[string]int // built once the dict grows past a few entries
}

const dictIndexThreshold = 8

// NewDict returns an empty dict.
func NewDict() *Dict { return &Dict{} }

// Len returns the number of entries.
func (d *Dict) Len() int { return len(d.keys) }

// Keys returns the keys in insertion order (shared, do not modify).
func (d *Dict) Keys() []Value { return d.keys }

// Values returns the values in insertion order (shared, do not modify).
func (d *Dict) Values() []Value { return d.vals }

// Set stores key=val, keeping the position of an existing equal key, like
// Python's d[key] = val. It fails for an unhashable key.
func (d *Dict) Set(key, val Value) error {
	i, err := d.find(key)
	if err != nil {
		return err
	}
	if i >= 0 {
		d.vals[i] = val
		return nil
	}
	d.keys = append(d.keys, key)
	d.vals = append(d.vals, val)
	if d.idx != nil {
		h, _ := hashKey(key)
		d.idx[h] = len(d.keys) - 1
	} else if len(d.keys) > dictIndexThreshold {
		d.buildIndex()
	}
	return nil
}

// SetStr stores a string key (never fails).
func (d *Dict) SetStr(key string, val Value) { _ = d.Set(String(key), val) }

// Get returns the value for key.
func (d *Dict) Get(key Value) (Value, bool, error) {
	i, err := d.find(key)
	if err != nil || i < 0 {
		return Value{}, false, err
	}
	return d.vals[i], true, nil
}

// GetStr looks a string key up.
func (d *Dict) GetStr(key string) (Value, bool) {
	if d.idx == nil {
		for i, k := range d.keys {
			if k.kind == KindString && k.s == key {
				return d.vals[i], true
			}
		}
		return Value{}, false
	}
	i, ok := d.idx["s"+key]
	if !ok {
		return Value{}, false
	}
	return d.vals[i], true
}

func (d *Dict) buildIndex() {
	d.idx = make(map[string]int, len(d.keys)*2)
	for i, k := range d.keys {
		h, _ := hashKey(k)
		d.idx[h] = i
	}
}

func (d *Dict) find(key Value) (int, error) {
	if d.idx != nil {
		h, err := hashKey(key)
		if err != nil {
			return -1, err
		}
		if i, ok := d.idx[h]; ok {
			return i, nil
		}
		return -1, nil
	}
	if err := checkHashable(key); err != nil {
		return -1, err
	}
	for i, k := range d.keys {
		if keyEqual(k, key) {
			return i, nil
		}
	}
	return -1, nil
}

// copyDict returns a shallow copy.
func (d *Dict) copyDict() *Dict {
	c := &Dict{keys: append([]Value(nil), d.keys...), vals: append([]Value(nil), d.vals...)}
	if d.idx != nil {
		c.buildIndex()
	}
	return c
}

func checkHashable(v Value) error {
	if v.kind == KindList && v.list().kind == listTuple {
		_, err := hashKey(v)
		return err
	}
	_, err := leafKey(v)
	return err
}

// keyEqual is Python equality restricted to hashable keys.
func keyEqual(a, b Value) bool {
	if a.kind == KindString && b.kind == KindString {
		return a.s == b.s
	}
	return pyEqual(a, b)
}

// maxKeyWork bounds the items visited to hash one tuple key (its bytes are
// bounded by maxStringLen), so that a tuple nesting shared sub-tuples, whose
// size is exponential in its depth, fails fast instead of hanging.
const maxKeyWork = 1 << 22

var errKeyTooBig = &RuntimeError{Type: "LimitError", Msg: "key too large to hash"}

// hashKey maps a hashable value to a string such that Python-equal keys map
// to the same string.
func hashKey(v Value) (string, error) {
	if v.kind == KindList && v.list().kind == listTuple {
		var sb strings.Builder
		work := 0
		if err := writeTupleKey(&sb, v, &work); err != nil {
			return "", err
		}
		return sb.String(), nil
	}
	return leafKey(v)
}

// writeTupleKey appends the key of tuple v: "t", the item count, ':', then
// each item, a nested tuple written the same way and any other item as its
// leafKey prefixed with its length and ':', so the encoding is unambiguous.
func writeTupleKey(sb *strings.Builder, v Value, work *int) error {
	items := v.list().Items
	sb.WriteByte('t')
	sb.WriteString(strconv.Itoa(len(items)))
	sb.WriteByte(':')
	for _, it := range items {
		*work++
		if *work > maxKeyWork {
			return errKeyTooBig
		}
		if it.kind == KindList && it.list().kind == listTuple {
			if err := writeTupleKey(sb, it, work); err != nil {
				return err
			}
			continue
		}
		h, err := leafKey(it)
		if err != nil {
			return err
		}
		if sb.Len()+len(h) > maxStringLen {
			return errKeyTooBig
		}
		sb.WriteString(strconv.Itoa(len(h)))
		sb.WriteByte(':')
		sb.WriteString(h)
	}
	return nil
}

// leafKey is hashKey for anything but a tuple.
func leafKey(v Value) (string, error) {
	switch v.kind {
	case KindString:
		return "s" + v.s, nil
	case KindNone:
		return "N", nil
	case KindUndefined:
		return "U", nil
	case KindBool, KindInt:
		if v.isBig() {
			return "i" + v.bigInt().String(), nil
		}
		return "i" + strconv.FormatInt(v.n, 10), nil
	case KindFloat:
		f := v.f
		if f == math.Trunc(f) && !math.IsInf(f, 0) {
			if math.Abs(f) < 1<<62 {
				return "i" + strconv.FormatInt(int64(f), 10), nil
			}
			b, _ := new(big.Float).SetFloat64(f).Int(nil)
			return "i" + b.String(), nil
		}
		return "f" + strconv.FormatUint(math.Float64bits(f), 16), nil
	case KindList:
		if k := v.list().kind; k != listGen && k != listRevIter {
			return "", typeErrorf("unhashable type: '%s'", pyTypeName(v))
		}
	case KindDict:
		return "", typeErrorf("unhashable type: 'dict'")
	}
	// Identity-hashed objects (namespaces, callables, generators).
	return "p" + strconv.FormatUint(uint64(ptrID(v)), 16), nil
}
