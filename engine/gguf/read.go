package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"

	"github.com/infernix/infernix/engine/internal/mmap"
)

// Magic is the file's first four bytes, "GGUF".
const Magic = 0x46554747

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// ValueType is a metadata value's type (gguf_type).
type ValueType uint32

const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

// scalarSize is the encoded size of a fixed-size value type (0: not one).
func scalarSize(t ValueType) int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// Value is one metadata value. Integers of every width are held as int64
// (uint64 as its bit pattern), floats as float64; arrays of strings, of
// integers, of floats and of bools as []string, []int64, []float64 and
// []bool, nested arrays as []Value.
type Value struct {
	Type ValueType
	Elem ValueType // element type of an array
	v    any
}

// Int returns an integer value.
func (v Value) Int() (int64, bool) { i, ok := v.v.(int64); return i, ok && v.Type != TypeArray }

// Float returns a float value, or an integer one converted.
func (v Value) Float() (float64, bool) {
	switch x := v.v.(type) {
	case float64:
		return x, true
	case int64:
		if v.Type == TypeUint64 {
			return float64(uint64(x)), true
		}
		return float64(x), v.Type != TypeArray
	}
	return 0, false
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) { b, ok := v.v.(bool); return b, ok }

// Str returns a string value.
func (v Value) Str() (string, bool) { s, ok := v.v.(string); return s, ok }

// Strings returns an array of strings.
func (v Value) Strings() ([]string, bool) { s, ok := v.v.([]string); return s, ok }

// Ints returns an array of integers.
func (v Value) Ints() ([]int64, bool) { s, ok := v.v.([]int64); return s, ok }

// Floats returns an array of floats.
func (v Value) Floats() ([]float64, bool) { s, ok := v.v.([]float64); return s, ok }

// Tensor is one tensor's description and bytes.
type Tensor struct {
	Name   string
	Dims   []int // GGUF order: Dims[0] is contiguous
	Type   Type
	Offset uint64 // from the start of the data section
	Data   []byte // aliases the file map
}

// Elements is the product of the dims.
func (t *Tensor) Elements() int {
	n := 1
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file.
type File struct {
	Path      string
	Version   uint32
	Keys      []string // metadata keys in file order
	Meta      map[string]Value
	Tensors   []*Tensor
	byName    map[string]*Tensor
	Alignment int
	DataStart int
	data      []byte // the whole file
	mapped    bool
}

// Tensor returns the named tensor, or nil.
func (f *File) Tensor(name string) *Tensor { return f.byName[name] }

// Size is the file's size in bytes.
func (f *File) Size() int64 { return int64(len(f.data)) }

// Close unmaps the file; its tensors' Data must not be used afterwards.
func (f *File) Close() error {
	if !f.mapped {
		return nil
	}
	f.mapped = false
	return mmap.Unmap(f.data)
}

// Open maps and parses a GGUF file.
func Open(path string) (*File, error) {
	data, err := mmap.Map(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		mmap.Unmap(data)
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	f.Path, f.mapped = path, true
	return f, nil
}

// Parse reads a GGUF file held in memory; the tensors alias data.
func Parse(data []byte) (*File, error) {
	r := &reader{b: data}
	if r.u32() != Magic || r.err != nil {
		return nil, fmt.Errorf("not a GGUF file (bad magic)")
	}
	f := &File{Version: r.u32(), Meta: map[string]Value{}, byName: map[string]*Tensor{}, data: data}
	if f.Version < 2 || f.Version > 3 {
		return nil, fmt.Errorf("GGUF version %d is not supported (2 or 3)", f.Version)
	}
	nt, nkv := r.u64(), r.u64()
	if r.err != nil {
		return nil, fmt.Errorf("truncated header")
	}
	// Every key/value takes at least 12 bytes and every tensor at least 24.
	if nkv > uint64(r.left())/12 || nt > uint64(r.left())/24 {
		return nil, fmt.Errorf("header claims %d metadata entries and %d tensors, more than the file can hold", nkv, nt)
	}
	for i := uint64(0); i < nkv; i++ {
		key := r.str()
		if r.err != nil {
			return nil, fmt.Errorf("metadata entry %d: %v", i, r.err)
		}
		v := r.value(ValueType(r.u32()), 0)
		if r.err != nil {
			return nil, fmt.Errorf("metadata %q: %v", key, r.err)
		}
		if _, dup := f.Meta[key]; dup {
			return nil, fmt.Errorf("metadata %q appears twice", key)
		}
		f.Keys = append(f.Keys, key)
		f.Meta[key] = v
	}
	f.Alignment = DefaultAlignment
	if v, ok := f.Meta["general.alignment"]; ok {
		a, ok := v.Int()
		if !ok || a <= 0 || a > 1<<20 || a&(a-1) != 0 {
			return nil, fmt.Errorf("general.alignment must be a power of two up to 1 MiB")
		}
		f.Alignment = int(a)
	}
	for i := uint64(0); i < nt; i++ {
		t := &Tensor{Name: r.str()}
		nd := r.u32()
		if r.err == nil && nd > 8 {
			return nil, fmt.Errorf("tensor %q has %d dims (at most 8)", t.Name, nd)
		}
		for d := uint32(0); d < nd && r.err == nil; d++ {
			n := r.u64()
			if n == 0 || n > 1<<40 {
				return nil, fmt.Errorf("tensor %q: dim %d is %d", t.Name, d, n)
			}
			t.Dims = append(t.Dims, int(n))
		}
		t.Type, t.Offset = Type(r.u32()), r.u64()
		if r.err != nil {
			return nil, fmt.Errorf("tensor %d: %v", i, r.err)
		}
		if _, dup := f.byName[t.Name]; dup {
			return nil, fmt.Errorf("tensor %q appears twice", t.Name)
		}
		f.Tensors = append(f.Tensors, t)
		f.byName[t.Name] = t
	}
	f.DataStart = (r.off + f.Alignment - 1) / f.Alignment * f.Alignment
	for _, t := range f.Tensors {
		if err := f.bind(t); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// bind checks a tensor's extent and points its Data into the file.
func (f *File) bind(t *Tensor) error {
	ti, ok := types[t.Type]
	if !ok {
		return fmt.Errorf("tensor %q has type %s, which is not supported (supported: %s)", t.Name, t.Type, SupportedTypes())
	}
	elems := uint64(1)
	for _, d := range t.Dims {
		elems *= uint64(d)
		if elems > 1<<42 {
			return fmt.Errorf("tensor %q has too many elements", t.Name)
		}
	}
	if len(t.Dims) > 0 && t.Dims[0]%ti.block != 0 {
		return fmt.Errorf("tensor %q: its rows of %d are not whole %s blocks of %d", t.Name, t.Dims[0], ti.name, ti.block)
	}
	size := elems / uint64(ti.block) * uint64(ti.bytes)
	if t.Offset%uint64(f.Alignment) != 0 {
		return fmt.Errorf("tensor %q: offset %d is not aligned to %d", t.Name, t.Offset, f.Alignment)
	}
	start := uint64(f.DataStart) + t.Offset
	if t.Offset > uint64(len(f.data)) || start+size > uint64(len(f.data)) {
		return fmt.Errorf("tensor %q: %d bytes at data offset %d run past the end of the file (%d bytes)", t.Name, size, t.Offset, len(f.data))
	}
	t.Data = f.data[start : start+size : start+size]
	return nil
}

// reader decodes little-endian fields; the first error sticks and later
// reads return zero values.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left() {
		r.err = fmt.Errorf("truncated at byte %d", r.off)
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) u32() uint32 {
	if s := r.take(4); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if s := r.take(8); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

func (r *reader) str() string {
	n := r.u64()
	if r.err == nil && n > uint64(r.left()) {
		r.err = fmt.Errorf("a string of %d bytes runs past the end", n)
	}
	return string(r.take(int(n)))
}

func (r *reader) scalar(t ValueType) any {
	s := r.take(scalarSize(t))
	if s == nil {
		return nil
	}
	switch t {
	case TypeUint8:
		return int64(s[0])
	case TypeInt8:
		return int64(int8(s[0]))
	case TypeBool:
		if s[0] > 1 {
			r.err = fmt.Errorf("bool value %d", s[0])
		}
		return s[0] == 1
	case TypeUint16:
		return int64(binary.LittleEndian.Uint16(s))
	case TypeInt16:
		return int64(int16(binary.LittleEndian.Uint16(s)))
	case TypeUint32:
		return int64(binary.LittleEndian.Uint32(s))
	case TypeInt32:
		return int64(int32(binary.LittleEndian.Uint32(s)))
	case TypeFloat32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(s)))
	case TypeUint64, TypeInt64:
		return int64(binary.LittleEndian.Uint64(s))
	case TypeFloat64:
		return math.Float64frombits(binary.LittleEndian.Uint64(s))
	}
	return nil
}

func (r *reader) value(t ValueType, depth int) Value {
	switch {
	case t == TypeString:
		return Value{Type: t, v: r.str()}
	case t == TypeArray:
		if depth > 4 {
			r.err = fmt.Errorf("arrays nested too deeply")
			return Value{}
		}
		return r.array(depth)
	case scalarSize(t) > 0:
		return Value{Type: t, v: r.scalar(t)}
	}
	if r.err == nil {
		r.err = fmt.Errorf("unknown value type %d", t)
	}
	return Value{}
}

func (r *reader) array(depth int) Value {
	et := ValueType(r.u32())
	n := r.u64()
	if r.err != nil {
		return Value{}
	}
	min := uint64(scalarSize(et))
	if et == TypeString || et == TypeArray {
		min = 8
	}
	if min == 0 {
		r.err = fmt.Errorf("array of unknown type %d", et)
		return Value{}
	}
	if n > uint64(r.left())/min {
		r.err = fmt.Errorf("an array of %d elements runs past the end", n)
		return Value{}
	}
	v := Value{Type: TypeArray, Elem: et}
	switch {
	case et == TypeString:
		s := make([]string, n)
		for i := range s {
			s[i] = r.str()
		}
		v.v = s
	case et == TypeArray:
		s := make([]Value, n)
		for i := range s {
			s[i] = r.value(TypeArray, depth+1)
		}
		v.v = s
	case et == TypeBool:
		s := make([]bool, n)
		for i := range s {
			s[i], _ = r.scalar(et).(bool)
		}
		v.v = s
	case et == TypeFloat32 || et == TypeFloat64:
		s := make([]float64, n)
		for i := range s {
			s[i], _ = r.scalar(et).(float64)
		}
		v.v = s
	default:
		s := make([]int64, n)
		for i := range s {
			s[i], _ = r.scalar(et).(int64)
		}
		v.v = s
	}
	return v
}
