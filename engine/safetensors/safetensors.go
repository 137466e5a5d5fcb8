// Package safetensors reads Hugging Face safetensors files, single or sharded,
// through read-only memory maps: tensor bytes are never copied by this package.
//
// Every malformed input (bad header, offsets past the end, a size that does not
// match dtype×shape, an unknown dtype, a shard missing from disk) is reported as
// an error naming the file and the tensor; nothing panics.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/infernix/infernix/engine/internal/mmap"
)

// DType is a tensor element type as written in the safetensors header.
type DType string

const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	F64  DType = "F64"
	I64  DType = "I64"
	I32  DType = "I32"
	I8   DType = "I8"
	U8   DType = "U8"
	BOOL DType = "BOOL"
	F8E4 DType = "F8_E4M3"
	F8E5 DType = "F8_E5M2"
)

// Size returns the element size in bytes, or 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case F64, I64:
		return 8
	case F32, I32:
		return 4
	case F16, BF16:
		return 2
	case I8, U8, BOOL, F8E4, F8E5:
		return 1
	}
	return 0
}

// Tensor is one tensor of a loaded file. Data aliases the file's memory map and
// must not be written.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
	File  string
}

// Elems is the number of elements (product of the shape).
func (t *Tensor) Elems() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// maxHeader bounds the JSON header so that a corrupt length cannot make us
// allocate gigabytes.
const maxHeader = 100 << 20

type headerEntry struct {
	DType       DType   `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// File is one mapped safetensors file.
type File struct {
	Path     string
	Tensors  map[string]*Tensor
	Metadata map[string]string
	mapping  []byte
}

// Open maps path and parses its header.
func Open(path string) (*File, error) {
	data, err := mmap.Map(path)
	if err != nil {
		return nil, err
	}
	f, err := parse(path, data)
	if err != nil {
		mmap.Unmap(data)
		return nil, err
	}
	return f, nil
}

// Parse reads a safetensors image already in memory (used by tests and fuzzing).
func Parse(name string, data []byte) (*File, error) { return parse(name, data) }

func parse(path string, data []byte) (*File, error) {
	base := filepath.Base(path)
	if len(data) < 8 {
		return nil, fmt.Errorf("safetensors %s: file is %d bytes, too short for a header", base, len(data))
	}
	n := binary.LittleEndian.Uint64(data[:8])
	if n > maxHeader || n > uint64(len(data)-8) {
		return nil, fmt.Errorf("safetensors %s: header length %d exceeds the file (%d bytes): truncated or not a safetensors file", base, n, len(data))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &raw); err != nil {
		return nil, fmt.Errorf("safetensors %s: bad header JSON: %v", base, err)
	}
	body := data[8+n:]
	f := &File{Path: path, Tensors: make(map[string]*Tensor, len(raw)), mapping: data}
	for name, msg := range raw {
		if name == "__metadata__" {
			_ = json.Unmarshal(msg, &f.Metadata)
			continue
		}
		var e headerEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("safetensors %s: tensor %q: bad header entry: %v", base, name, err)
		}
		size := e.DType.Size()
		if size == 0 {
			return nil, fmt.Errorf("safetensors %s: tensor %q: unknown dtype %q", base, name, e.DType)
		}
		if len(e.DataOffsets) != 2 {
			return nil, fmt.Errorf("safetensors %s: tensor %q: data_offsets must have 2 values", base, name)
		}
		elems := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && elems > (1<<50)/int64(d)) {
				return nil, fmt.Errorf("safetensors %s: tensor %q: bad shape %v", base, name, e.Shape)
			}
			elems *= int64(d)
		}
		start, end := e.DataOffsets[0], e.DataOffsets[1]
		if start < 0 || end < start || end > int64(len(body)) {
			return nil, fmt.Errorf("safetensors %s: tensor %q: data offsets [%d, %d) outside the %d-byte data section (truncated file?)", base, name, start, end, len(body))
		}
		if end-start != elems*int64(size) {
			return nil, fmt.Errorf("safetensors %s: tensor %q: %d bytes for %s%v, expected %d", base, name, end-start, e.DType, e.Shape, elems*int64(size))
		}
		f.Tensors[name] = &Tensor{Name: name, DType: e.DType, Shape: e.Shape, Data: body[start:end:end], File: path}
	}
	return f, nil
}

// Close unmaps the file; its tensors must not be used afterwards.
func (f *File) Close() error {
	if f.mapping == nil {
		return nil
	}
	m := f.mapping
	f.mapping = nil
	return mmap.Unmap(m)
}

// Set is every tensor of a model directory: one file, or the shards named by
// model.safetensors.index.json, or all *.safetensors files.
type Set struct {
	files   []*File
	tensors map[string]*Tensor
}

// OpenDir opens the weights of a Hugging Face model directory.
func OpenDir(dir string) (*Set, error) {
	var paths []string
	indexPath := filepath.Join(dir, "model.safetensors.index.json")
	if b, err := os.ReadFile(indexPath); err == nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			return nil, fmt.Errorf("%s: bad JSON: %v", indexPath, err)
		}
		seen := map[string]bool{}
		for _, file := range idx.WeightMap {
			if !seen[file] {
				seen[file] = true
				paths = append(paths, filepath.Join(dir, file))
			}
		}
		sort.Strings(paths)
		s, err := openAll(paths)
		if err != nil {
			return nil, err
		}
		for name, file := range idx.WeightMap {
			t, ok := s.tensors[name]
			if !ok {
				s.Close()
				return nil, fmt.Errorf("%s: tensor %q is listed in %s but missing from it", indexPath, name, file)
			}
			if filepath.Base(t.File) != filepath.Base(file) {
				s.Close()
				return nil, fmt.Errorf("%s: tensor %q is listed in %s but found in %s", indexPath, name, file, filepath.Base(t.File))
			}
		}
		return s, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	paths, _ = filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no *.safetensors files (and no model.safetensors.index.json)", dir)
	}
	sort.Strings(paths)
	return openAll(paths)
}

func openAll(paths []string) (*Set, error) {
	s := &Set{tensors: map[string]*Tensor{}}
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.files = append(s.files, f)
		for name, t := range f.Tensors {
			if prev, dup := s.tensors[name]; dup {
				s.Close()
				return nil, fmt.Errorf("tensor %q appears in both %s and %s", name, filepath.Base(prev.File), filepath.Base(p))
			}
			s.tensors[name] = t
		}
	}
	return s, nil
}

// Get returns the named tensor, or nil.
func (s *Set) Get(name string) *Tensor { return s.tensors[name] }

// Names lists every tensor name, sorted.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.tensors))
	for n := range s.tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Bytes is the total size of all tensor data.
func (s *Set) Bytes() int64 {
	var n int64
	for _, t := range s.tensors {
		n += int64(len(t.Data))
	}
	return n
}

// Close unmaps every file.
func (s *Set) Close() error {
	var first error
	for _, f := range s.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.files = nil
	return first
}
