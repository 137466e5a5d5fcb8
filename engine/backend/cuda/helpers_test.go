package cuda

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

var (
	sharedOnce sync.Once
	shared     *Backend
	sharedErr  error
)

// gpu returns the package's shared CUDA backend, skipping the test when the
// machine has no usable CUDA (CI has no GPU). One backend serves all tests:
// creating the primary context costs a fraction of a second each time.
func gpu(t testing.TB) *Backend {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = New(Options{Logf: t.Logf}) })
	if sharedErr != nil {
		if errors.Is(sharedErr, driver.ErrNotAvailable) {
			t.Skipf("no CUDA: %v", sharedErr)
		}
		t.Fatal(sharedErr)
	}
	shared.logf = t.Logf
	if shared.err != nil {
		t.Fatalf("backend failed earlier: %v", shared.err)
	}
	return shared
}

// newRand draws a fresh seed for every run (logged, so a failure can be
// replayed with INFERNIX_TEST_SEED).
func newRand(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("INFERNIX_TEST_SEED"); s != "" {
		var v uint64
		for _, c := range s {
			v = v*10 + uint64(c-'0')
		}
		seed = v
	}
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

// pair is the same tensor on both backends.
type pair struct {
	g, c backend.Tensor
}

var cpuBe = cpu.New(0)

// weight makes a random weight of dtype dt on both backends.
func weight(t testing.TB, b *Backend, r *rand.Rand, dt backend.DType, rows, cols int, scale float32, shape ...int) pair {
	t.Helper()
	n := rows * cols
	data := make([]byte, n*dt.Size())
	for i := 0; i < n; i++ {
		v := (r.Float32()*2 - 1) * scale
		switch dt {
		case backend.F32:
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		case backend.BF16:
			binary.LittleEndian.PutUint16(data[2*i:], uint16(math.Float32bits(v)>>16))
		case backend.F16:
			binary.LittleEndian.PutUint16(data[2*i:], floatToHalf(v))
		}
	}
	if len(shape) == 0 {
		shape = []int{rows, cols}
	}
	g, err := b.Upload("w", dt, shape, data)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cpuBe.Upload("w", dt, shape, append([]byte(nil), data...))
	if err != nil {
		t.Fatal(err)
	}
	return pair{g, c}
}

// act makes a random f32 activation on both backends.
func act(t testing.TB, b *Backend, r *rand.Rand, rows, cols int, scale float32) pair {
	t.Helper()
	p := pair{b.Alloc(rows, cols), cpuBe.Alloc(rows, cols)}
	v := p.c.(*cpu.Tensor).F32()
	for i := range v {
		v[i] = (r.Float32()*2 - 1) * scale
	}
	write(t, b, p.g, v)
	return p
}

// out makes an output activation on both backends, the GPU one poisoned
// with NaN so that unwritten elements show.
func out(t testing.TB, b *Backend, rows, cols int) pair {
	p := pair{b.Alloc(rows, cols), cpuBe.Alloc(rows, cols)}
	poison(b, p.g)
	return p
}

func poison(b *Backend, t backend.Tensor) {
	c := t.(*Tensor)
	b.memset(c.ptr, 0x7fc00000, c.rows*c.cols)
}

// write copies host values into a GPU activation.
func write(t testing.TB, b *Backend, dst backend.Tensor, v []float32) {
	t.Helper()
	c := dst.(*Tensor)
	src, err := b.Upload("tmp", backend.F32, []int{len(v)}, f32bytes(v))
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*Tensor)
	b.copyDtoD(c.ptr, s.ptr, 4*len(v))
	b.Free(src)
}

func f32bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// read returns a GPU activation's values.
func read(t testing.TB, b *Backend, x backend.Tensor) []float32 {
	t.Helper()
	c := x.(*Tensor)
	dst := make([]float32, c.rows*c.cols)
	b.ReadRows(x, dst)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// compare checks got against the CPU reference: no NaN, relative error
// ‖Δ‖/‖ref‖ ≤ rel.
func compare(t testing.TB, what string, got, want []float32, rel float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var num, den, worst float64
	wi := 0
	for i := range got {
		if math.IsNaN(float64(got[i])) || math.IsInf(float64(got[i]), 0) {
			t.Fatalf("%s: element %d is %v (unwritten or overflow); reference %v", what, i, got[i], want[i])
		}
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
		if math.Abs(d) > worst {
			worst, wi = math.Abs(d), i
		}
	}
	e := math.Sqrt(num / math.Max(den, 1e-30))
	if e > rel {
		t.Errorf("%s: relative error %.3g > %.3g (worst element %d: %v vs %v)", what, e, rel, wi, got[wi], want[wi])
	}
}

// floatToHalf rounds to the nearest IEEE half (tests only: normal range).
func floatToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case exp <= 0:
		return sign
	case exp >= 31:
		return sign | 0x7c00
	}
	h := sign | uint16(exp)<<10 | uint16(mant>>13)
	if mant&0x1fff > 0x1000 || (mant&0x1fff == 0x1000 && h&1 == 1) {
		h++
	}
	return h
}

// addExperts gives m (device) and mc (CPU) the same E random SwiGLU
// experts of H → I → H, and with shared a shared expert of width 2·I.
func addExperts(t testing.TB, b *Backend, r *rand.Rand, dt backend.DType, m, mc *backend.MoE, E, H, I int, shared bool) {
	for e := 0; e < E; e++ {
		g, u, d := weight(t, b, r, dt, I, H, 0.2), weight(t, b, r, dt, I, H, 0.2), weight(t, b, r, dt, H, I, 0.2)
		m.Gate, mc.Gate = append(m.Gate, g.g), append(mc.Gate, g.c)
		m.Up, mc.Up = append(m.Up, u.g), append(mc.Up, u.c)
		m.Down, mc.Down = append(m.Down, d.g), append(mc.Down, d.c)
	}
	if shared {
		g, u, d := weight(t, b, r, dt, 2*I, H, 0.2), weight(t, b, r, dt, 2*I, H, 0.2), weight(t, b, r, dt, H, 2*I, 0.2)
		m.SharedGate, m.SharedUp, m.SharedDown = g.g, u.g, d.g
		mc.SharedGate, mc.SharedUp, mc.SharedDown = g.c, u.c, d.c
	}
}
