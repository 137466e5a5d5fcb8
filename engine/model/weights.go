package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/safetensors"
)

// WeightSource hands an architecture its tensors, checked against the shape it
// expects and made resident on the backend.
type WeightSource interface {
	// Tensor returns the named tensor; the error names the tensor and what
	// was expected when it is missing or has another shape or dtype.
	Tensor(name string, shape ...int) (backend.Tensor, error)
	// Has reports whether the checkpoint contains name.
	Has(name string) bool
}

// FileWeights serves tensors from safetensors files.
type FileWeights struct {
	Set    *safetensors.Set
	Be     backend.Backend
	Prefix string // prepended to every name (e.g. "model.language_model." mappings are done by the arch)
	used   map[string]bool
}

func (w *FileWeights) Has(name string) bool { return w.Set.Get(w.Prefix+name) != nil }

func (w *FileWeights) Tensor(name string, shape ...int) (backend.Tensor, error) {
	full := w.Prefix + name
	t := w.Set.Get(full)
	if t == nil {
		return nil, fmt.Errorf("missing tensor %q (expected shape %v)", full, shape)
	}
	if !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("tensor %q in %s has shape %v, expected %v", full, baseName(t.File), t.Shape, shape)
	}
	var dt backend.DType
	switch t.DType {
	case safetensors.F32:
		dt = backend.F32
	case safetensors.F16:
		dt = backend.F16
	case safetensors.BF16:
		dt = backend.BF16
	default:
		return nil, fmt.Errorf("tensor %q in %s has dtype %s; supported: F32, F16, BF16", full, baseName(t.File), t.DType)
	}
	if w.used == nil {
		w.used = map[string]bool{}
	}
	w.used[full] = true
	return w.Be.Upload(full, dt, shape, t.Data)
}

// Unused lists checkpoint tensors never requested (to report, e.g. MTP heads).
func (w *FileWeights) Unused() []string {
	var out []string
	for _, n := range w.Set.Names() {
		if !w.used[n] {
			out = append(out, n)
		}
	}
	return out
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// SyntheticWeights makes deterministic random BF16 tensors of whatever shape
// is asked for, like vLLM's dummy load format: for benchmarks of real model
// shapes without downloading checkpoints. Norm weights are ones.
type SyntheticWeights struct {
	Be    backend.Backend
	Seed  uint64
	Std   float64 // standard deviation of non-norm weights (0 = 0.02)
	Bytes int64   // total bytes made so far
}

func (s *SyntheticWeights) Has(name string) bool { return !strings.Contains(name, "lm_head") }

func (s *SyntheticWeights) Tensor(name string, shape ...int) (backend.Tensor, error) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	buf := make([]byte, 2*n)
	s.Bytes += int64(len(buf))
	if strings.Contains(name, "norm") {
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(buf[2*i:], 0x3f80) // 1.0
		}
		return s.Be.Upload(name, backend.BF16, shape, buf)
	}
	// Uniform values of the given standard deviation from a cheap generator,
	// in parallel chunks: real-model shapes have billions of elements.
	std := s.Std
	if std == 0 {
		std = 0.02
	}
	scale := float32(std * 1.7320508 / (1 << 15))
	const chunk = 1 << 20
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		sem <- struct{}{}
		go func(lo, hi int) {
			defer func() { <-sem; wg.Done() }()
			r := rand.New(rand.NewPCG(s.Seed, uint64(len(name))*1315423911+uint64(n)+uint64(lo)*2654435761))
			for i := lo; i < hi; i += 4 {
				x := r.Uint64()
				for k := 0; k < 4 && i+k < hi; k++ {
					v := float32(int16(x>>(16*k))) * scale
					binary.LittleEndian.PutUint16(buf[2*(i+k):], uint16(math.Float32bits(v)>>16))
				}
			}
		}(lo, hi)
	}
	wg.Wait()
	return s.Be.Upload(name, backend.BF16, shape, buf)
}
