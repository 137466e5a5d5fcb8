// Package cpu is the reference backend: pure Go, F32 arithmetic from F32, F16
// or BF16 weights, parallel across cores. It runs CI and is what the CUDA
// backend is checked against.
package cpu

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/infernix/infernix/engine/backend"
)

// Tensor is a CPU tensor: F32 activations in f32, or weights aliasing the
// checkpoint bytes (u16 for F16/BF16) without a copy.
type Tensor struct {
	rows, cols int
	dt         backend.DType
	f32        []float32
	u16        []uint16
	q          []byte // Q8_0 blocks
}

var _ backend.QuantizedWeights = (*Backend)(nil)

// Quantized: the CPU backend multiplies Q8_0 weights as stored.
func (b *Backend) Quantized(dt backend.DType) bool { return dt == backend.Q8_0 }

func (t *Tensor) Shape() []int         { return []int{t.rows, t.cols} }
func (t *Tensor) DType() backend.DType { return t.dt }

// F32 exposes an activation tensor's data (tests and the engine's host paths).
func (t *Tensor) F32() []float32 { return t.f32 }

// Backend is the CPU backend.
type Backend struct {
	workers int
	pool    *pool
	moe     moeScratch
}

var _ backend.Backend = (*Backend)(nil)

// New returns a CPU backend using threads goroutines (0 = GOMAXPROCS).
func New(threads int) *Backend {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	return &Backend{workers: threads, pool: newPool(threads)}
}

func (b *Backend) Name() string { return fmt.Sprintf("cpu (%d threads)", b.workers) }

// Upload wraps data as a weight. Multi-dimensional shapes collapse to
// [prod(shape[:-1]), shape[-1]].
func (b *Backend) Upload(name string, dt backend.DType, shape []int, data []byte) (backend.Tensor, error) {
	rows, cols := 1, 1
	switch len(shape) {
	case 0:
	case 1:
		cols = shape[0]
	default:
		cols = shape[len(shape)-1]
		for _, d := range shape[:len(shape)-1] {
			rows *= d
		}
	}
	n := rows * cols
	if dt == backend.Q8_0 && cols%32 != 0 {
		return nil, fmt.Errorf("tensor %s: Q8_0 rows of %d are not whole blocks of 32", name, cols)
	}
	if len(data) != dt.RowBytes(n) || dt > backend.Q8_0 {
		return nil, fmt.Errorf("tensor %s: %d bytes for %v %v", name, len(data), dt, shape)
	}
	t := &Tensor{rows: rows, cols: cols, dt: dt}
	if n == 0 {
		return t, nil
	}
	if dt == backend.Q8_0 {
		t.q = data
		return t, nil
	}
	aligned := uintptr(unsafe.Pointer(&data[0]))%uintptr(dt.Size()) == 0
	if !aligned {
		data = append([]byte(nil), data...)
	}
	switch dt {
	case backend.F32:
		t.f32 = unsafe.Slice((*float32)(unsafe.Pointer(&data[0])), n)
	case backend.F16, backend.BF16:
		t.u16 = unsafe.Slice((*uint16)(unsafe.Pointer(&data[0])), n)
	default:
		return nil, fmt.Errorf("tensor %s: dtype %v not supported by the CPU backend", name, dt)
	}
	return t, nil
}

func (b *Backend) Alloc(rows, cols int) backend.Tensor {
	return &Tensor{rows: rows, cols: cols, dt: backend.F32, f32: make([]float32, rows*cols)}
}

func (b *Backend) Rows(t backend.Tensor, n int) backend.Tensor {
	c := t.(*Tensor)
	if n > c.rows {
		panic(fmt.Sprintf("cpu: Rows(%d) of a %d-row tensor", n, c.rows))
	}
	return &Tensor{rows: n, cols: c.cols, dt: c.dt, f32: c.f32[:n*c.cols]}
}

func (b *Backend) Reshape(t backend.Tensor, rows, cols int) backend.Tensor {
	c := t.(*Tensor)
	if rows*cols != c.rows*c.cols {
		panic(fmt.Sprintf("cpu: Reshape %dx%d to %dx%d", c.rows, c.cols, rows, cols))
	}
	return &Tensor{rows: rows, cols: cols, dt: c.dt, f32: c.f32, u16: c.u16, q: c.q}
}

func (b *Backend) ReadRows(t backend.Tensor, dst []float32) {
	copy(dst, t.(*Tensor).f32)
}

func f32(t backend.Tensor) *Tensor { return t.(*Tensor) }
