package qwen3next

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/safetensors"
)

// loader wraps a WeightSource with the first error, the checkpoint's name
// prefix, and (for files) raw access for load-time rewrites: fused layouts
// split, zero-centred norms turned into plain scales.
type loader struct {
	w      model.WeightSource
	fw     *model.FileWeights // nil for synthetic weights
	be     backend.Backend
	prefix string
	err    error
}

func (l *loader) get(name string, shape ...int) backend.Tensor {
	if l.err != nil {
		return nil
	}
	t, err := l.w.Tensor(l.prefix+name, shape...)
	if err != nil {
		l.err = err
	}
	return t
}

func (l *loader) has(name string) bool { return l.w.Has(l.prefix + name) }

// raw returns a checkpoint tensor's bytes after checking its shape, or nil
// when the source has no files behind it.
func (l *loader) raw(name string, shape ...int) *safetensors.Tensor {
	if l.err != nil || l.fw == nil {
		return nil
	}
	full := l.fw.Prefix + l.prefix + name
	t := l.fw.Set.Get(full)
	if t == nil {
		l.err = fmt.Errorf("missing tensor %q (expected shape %v)", full, shape)
		return nil
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	if t.Elems() != n || len(t.Shape) != len(shape) {
		l.err = fmt.Errorf("tensor %q has shape %v, expected %v", full, t.Shape, shape)
		return nil
	}
	for i := range shape {
		if t.Shape[i] != shape[i] {
			l.err = fmt.Errorf("tensor %q has shape %v, expected %v", full, t.Shape, shape)
			return nil
		}
	}
	switch t.DType {
	case safetensors.F32, safetensors.F16, safetensors.BF16:
	default:
		l.err = fmt.Errorf("tensor %q has dtype %s; supported: F32, F16, BF16", full, t.DType)
		return nil
	}
	return t
}

func dtypeOf(t *safetensors.Tensor) backend.DType {
	switch t.DType {
	case safetensors.F16:
		return backend.F16
	case safetensors.BF16:
		return backend.BF16
	}
	return backend.F32
}

func (l *loader) upload(name string, dt backend.DType, shape []int, data []byte) backend.Tensor {
	if l.err != nil {
		return nil
	}
	t, err := l.be.Upload(name, dt, shape, data)
	if err != nil {
		l.err = err
	}
	return t
}

// rowsOf uploads rows [lo, hi) of a 2-D (or leading-flattened) raw tensor.
func (l *loader) rowsOf(t *safetensors.Tensor, name string, lo, hi, cols int) backend.Tensor {
	es := t.DType.Size()
	return l.upload(name, dtypeOf(t), []int{hi - lo, cols}, t.Data[lo*cols*es:hi*cols*es])
}

// permuted uploads the rows of t in the order rows (a load-time relayout).
func (l *loader) permuted(t *safetensors.Tensor, name string, rows []int, cols int) backend.Tensor {
	es := t.DType.Size()
	rb := cols * es
	buf := make([]byte, 0, len(rows)*rb)
	for _, r := range rows {
		buf = append(buf, t.Data[r*rb:(r+1)*rb]...)
	}
	return l.upload(name, dtypeOf(t), []int{len(rows), cols}, buf)
}

// zeroCentred loads a (1 + weight) RMSNorm scale as plain F32 weights, so the
// backend's RMSNorm applies it unchanged. Synthetic weights are already
// plausible scales (ones) and are used as they are.
func (l *loader) zeroCentred(name string, n int) backend.Tensor {
	t := l.raw(name, n)
	if t == nil {
		if l.fw == nil {
			return l.get(name, n)
		}
		return nil
	}
	buf := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(1+toF32(t, i)))
	}
	return l.upload(t.Name+"+1", backend.F32, []int{n}, buf)
}

// toF32 reads element i of a F32, F16 or BF16 tensor.
func toF32(t *safetensors.Tensor, i int) float32 {
	switch t.DType {
	case safetensors.F32:
		return math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	case safetensors.BF16:
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.Data[2*i:])) << 16)
	}
	return backend.HalfToFloat32(binary.LittleEndian.Uint16(t.Data[2*i:]))
}

// loadMTP keeps every `mtp.*` tensor (the multi-token-prediction head) resident
// for speculative decoding later; nothing runs it yet.
func (l *loader) loadMTP() map[string]backend.Tensor {
	if l.fw == nil || l.err != nil {
		return nil
	}
	out := map[string]backend.Tensor{}
	names := l.fw.Set.Names()
	sort.Strings(names)
	for _, full := range names {
		name, ok := strings.CutPrefix(full, l.fw.Prefix)
		if !ok || !strings.HasPrefix(name, "mtp.") {
			continue
		}
		t, err := l.w.Tensor(name, l.fw.Set.Get(full).Shape...)
		if err != nil {
			l.err = err
			return nil
		}
		out[name] = t
	}
	return out
}
