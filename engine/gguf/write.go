package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// Writer builds a GGUF version 3 file: metadata in the order added, then
// tensor descriptions and data, each tensor aligned to DefaultAlignment.
type Writer struct {
	meta    bytes.Buffer
	nkv     int
	keys    map[string]bool
	tensors []*Tensor
	produce []func() ([]byte, error) // per tensor; nil: Data is set
	err     error
}

func (w *Writer) key(k string, t ValueType) {
	if w.keys == nil {
		w.keys = map[string]bool{}
	}
	if w.keys[k] && w.err == nil {
		w.err = fmt.Errorf("gguf: metadata %q written twice", k)
	}
	w.keys[k] = true
	w.nkv++
	putString(&w.meta, k)
	put(&w.meta, uint32(t))
}

func put(b *bytes.Buffer, v any) { binary.Write(b, binary.LittleEndian, v) }

func putString(b *bytes.Buffer, s string) {
	put(b, uint64(len(s)))
	b.WriteString(s)
}

// String, Uint32, Int32, Float32, Bool, Strings and Int32s add one
// metadata entry of that GGUF type.
func (w *Writer) String(k, v string) { w.key(k, TypeString); putString(&w.meta, v) }

func (w *Writer) Uint32(k string, v uint32) { w.key(k, TypeUint32); put(&w.meta, v) }

func (w *Writer) Int32(k string, v int32) { w.key(k, TypeInt32); put(&w.meta, v) }

func (w *Writer) Float32(k string, v float32) {
	w.key(k, TypeFloat32)
	put(&w.meta, math.Float32bits(v))
}

func (w *Writer) Bool(k string, v bool) {
	w.key(k, TypeBool)
	if v {
		w.meta.WriteByte(1)
	} else {
		w.meta.WriteByte(0)
	}
}

func (w *Writer) Strings(k string, v []string) {
	w.key(k, TypeArray)
	put(&w.meta, uint32(TypeString))
	put(&w.meta, uint64(len(v)))
	for _, s := range v {
		putString(&w.meta, s)
	}
}

func (w *Writer) Int32s(k string, v []int32) {
	w.key(k, TypeArray)
	put(&w.meta, uint32(TypeInt32))
	put(&w.meta, uint64(len(v)))
	put(&w.meta, v)
}

// Tensor adds a tensor; dims are in GGUF order (contiguous axis first) and
// data must be exactly the type's size for them.
func (w *Writer) Tensor(name string, dims []int, t Type, data []byte) {
	w.add(name, dims, t, len(data), nil)
	if len(w.tensors) > 0 {
		w.tensors[len(w.tensors)-1].Data = data
	}
}

// TensorFunc adds a tensor whose bytes produce makes when the file is
// written, so that a converter holds one tensor in memory at a time.
func (w *Writer) TensorFunc(name string, dims []int, t Type, produce func() ([]byte, error)) {
	n := 1
	for _, d := range dims {
		n *= d
	}
	w.add(name, dims, t, t.RowBytes(n), produce)
}

func (w *Writer) add(name string, dims []int, t Type, size int, produce func() ([]byte, error)) {
	tt := &Tensor{Name: name, Dims: append([]int(nil), dims...), Type: t}
	ti, ok := types[t]
	switch {
	case w.err != nil:
	case !ok:
		w.err = fmt.Errorf("gguf: tensor %q: type %s is not supported", name, t)
	case len(dims) == 0 || dims[0]%ti.block != 0:
		w.err = fmt.Errorf("gguf: tensor %q: dims %v are not whole %s blocks", name, dims, t)
	case size != t.RowBytes(tt.Elements()):
		w.err = fmt.Errorf("gguf: tensor %q: %d bytes for %s %v", name, size, t, dims)
	}
	w.tensors = append(w.tensors, tt)
	w.produce = append(w.produce, produce)
}

// WriteTo writes the file's image to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	var h bytes.Buffer
	put(&h, uint32(Magic))
	put(&h, uint32(3))
	put(&h, uint64(len(w.tensors)))
	put(&h, uint64(w.nkv))
	h.Write(w.meta.Bytes())
	align := func(n int) int { return (n + DefaultAlignment - 1) / DefaultAlignment * DefaultAlignment }
	off := 0
	for _, t := range w.tensors {
		putString(&h, t.Name)
		put(&h, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			put(&h, uint64(d))
		}
		put(&h, uint32(t.Type))
		put(&h, uint64(off))
		off = align(off + t.Type.RowBytes(t.Elements()))
	}
	h.Write(make([]byte, align(h.Len())-h.Len()))
	n, err := out.Write(h.Bytes())
	total := int64(n)
	var pad [DefaultAlignment]byte
	for i, t := range w.tensors {
		if err != nil {
			break
		}
		data := t.Data
		if w.produce[i] != nil {
			if data, err = w.produce[i](); err != nil {
				break
			}
			if len(data) != t.Type.RowBytes(t.Elements()) {
				err = fmt.Errorf("gguf: tensor %q: made %d bytes for %s %v", t.Name, len(data), t.Type, t.Dims)
				break
			}
		}
		n, err = out.Write(data)
		total += int64(n)
		if err == nil {
			n, err = out.Write(pad[:align(len(data))-len(data)])
			total += int64(n)
		}
	}
	return total, err
}

// Bytes returns the file's image.
func (w *Writer) Bytes() ([]byte, error) {
	var b bytes.Buffer
	_, err := w.WriteTo(&b)
	return b.Bytes(), err
}

// WriteFile writes the file to path through a temporary file renamed into
// place, so that a failed write (a full disk) leaves no partial model.
func (w *Writer) WriteFile(path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	_, err = w.WriteTo(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
