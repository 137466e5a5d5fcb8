package cuda

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// Tensor is a device array: F32 activations, or weights in their checkpoint
// dtype (small 1-row weights such as norm scales are widened to F32 at
// upload, exactly).
type Tensor struct {
	ptr        driver.DevPtr
	rows, cols int
	dt         backend.DType
}

func (t *Tensor) Shape() []int         { return []int{t.rows, t.cols} }
func (t *Tensor) DType() backend.DType { return t.dt }

// Ptr is the device address (tests, tools).
func (t *Tensor) Ptr() uint64 { return uint64(t.ptr) }

func (t *Tensor) bytes() uint64 { return uint64(t.rows*t.cols) * uint64(t.dt.Size()) }

func tensor(t backend.Tensor) *Tensor {
	c, ok := t.(*Tensor)
	if !ok {
		panic(fmt.Sprintf("cuda: tensor of another backend (%T)", t))
	}
	return c
}

func f32t(t backend.Tensor, op string) *Tensor {
	c := tensor(t)
	if c.dt != backend.F32 {
		panic(fmt.Sprintf("cuda: %s needs an F32 activation, got %v", op, c.dt))
	}
	return c
}

// Upload copies a weight to the device. Shapes collapse to
// [prod(shape[:-1]), shape[-1]] as in the CPU backend.
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
	if dt > backend.BF16 {
		return nil, fmt.Errorf("tensor %s: dtype %v not supported by the CUDA backend", name, dt)
	}
	n := rows * cols
	if len(data) != n*dt.Size() {
		return nil, fmt.Errorf("tensor %s: %d bytes for %v %v", name, len(data), dt, shape)
	}
	if b.err != nil {
		return nil, b.err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.needEager()
	src := data
	if rows == 1 && dt != backend.F32 {
		// Norm scales and gate vectors: f32 on the device, so that the
		// kernels that use them need no dtype variants.
		f := make([]float32, n)
		for i := range f {
			h := uint16(data[2*i]) | uint16(data[2*i+1])<<8
			if dt == backend.BF16 {
				f[i] = math.Float32frombits(uint32(h) << 16)
			} else {
				f[i] = backend.HalfToFloat32(h)
			}
		}
		src = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*n)
		dt = backend.F32
		defer runtime.KeepAlive(f)
	}
	t := &Tensor{rows: rows, cols: cols, dt: dt}
	p, err := b.wmalloc(t.bytes(), "tensor "+name)
	if err != nil {
		return nil, err
	}
	t.ptr = p
	if err := b.upload(p, src); err != nil {
		b.fail(fmt.Errorf("uploading %s: %w", name, err))
		return nil, b.err
	}
	return t, nil
}

// Alloc returns a zeroed F32 activation tensor.
func (b *Backend) Alloc(rows, cols int) backend.Tensor {
	t := &Tensor{rows: rows, cols: cols, dt: backend.F32}
	if b.err != nil {
		return t
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.needEager()
	p, err := b.malloc(t.bytes(), fmt.Sprintf("activation %d×%d", rows, cols))
	if err != nil {
		b.fail(err)
		return t
	}
	t.ptr = p
	b.fail(b.drv.MemsetD32Async(p, 0, uint64(rows*cols), b.stream))
	return t
}

func (b *Backend) Rows(t backend.Tensor, n int) backend.Tensor {
	c := tensor(t)
	if n > c.rows || n < 0 {
		panic(fmt.Sprintf("cuda: Rows(%d) of a %d-row tensor", n, c.rows))
	}
	return &Tensor{ptr: c.ptr, rows: n, cols: c.cols, dt: c.dt}
}

func (b *Backend) Reshape(t backend.Tensor, rows, cols int) backend.Tensor {
	c := tensor(t)
	if rows*cols != c.rows*c.cols {
		panic(fmt.Sprintf("cuda: Reshape %dx%d to %dx%d", c.rows, c.cols, rows, cols))
	}
	return &Tensor{ptr: c.ptr, rows: rows, cols: cols, dt: c.dt}
}

// ReadRows copies t's first len(dst)/cols rows to dst. It is the
// synchronisation point: it ends the forward (launching its graph when one
// matched), waits for the device and reports failures through Err; on
// failure dst is filled with NaN.
func (b *Backend) ReadRows(t backend.Tensor, dst []float32) {
	c := f32t(t, "ReadRows")
	if len(dst) > c.rows*c.cols {
		panic(fmt.Sprintf("cuda: ReadRows of %d values from a %d×%d tensor", len(dst), c.rows, c.cols))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := len(dst) * 4
	if n > b.out.size {
		b.needEager()
		if err := b.out.ensure(b, n); err != nil {
			b.fail(err)
		}
	}
	if b.err == nil {
		r := rec{kind: recDtoH, nargs: 3}
		r.args[0], r.args[1], r.args[2] = 0, uint64(c.ptr), uint64(n)
		b.submit(&r)
	}
	if b.err == nil && b.bind() {
		b.endStep()
	}
	b.g.inStep, b.g.mode = false, modeEager
	b.sync()
	b.meta.reset()
	if b.err != nil {
		nan := float32(math.NaN())
		for i := range dst {
			dst[i] = nan
		}
		return
	}
	if n > 0 {
		copy(dst, unsafe.Slice((*float32)(b.out.p), len(dst)))
	}
}

// Free releases a tensor made by Upload or Alloc (not a view); using it
// afterwards is an error. Models normally keep their tensors for the
// backend's lifetime and let Close free them.
func (b *Backend) Free(t backend.Tensor) {
	c := tensor(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.needEager()
	b.sync()
	// Its f32 copy goes too: a weight uploaded later at the same address
	// (slabs and the driver both reuse them) must not find it.
	if p, ok := b.f32w[c.ptr]; ok {
		delete(b.f32w, c.ptr)
		b.free(p)
	}
	b.mlpFree(c.ptr)
	b.free(c.ptr)
}
