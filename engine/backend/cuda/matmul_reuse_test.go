package cuda

import (
	"fmt"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// TestBF16ReuseRules: the rounded copy is reused only for the same range
// with nothing recorded since, and never when the GEMM that followed the
// conversion wrote over its input (CPU-only: the rules, not the kernels).
func TestBF16ReuseRules(t *testing.T) {
	const x, n = driver.DevPtr(1 << 20), 1000
	cases := []struct {
		name   string
		out    driver.DevPtr
		outN   int
		src    driver.DevPtr
		sn     int
		writes uint64
		want   bool
	}{
		{"same input, nothing since", 1 << 24, 500, x, n, 7, true},
		{"a record since", 1 << 24, 500, x, n, 8, false},
		{"another input", 1 << 24, 500, x + 4, n, 7, false},
		{"another length", 1 << 24, 500, x, n - 1, 7, false},
		{"output over the input's end", x + 4*n - 4, 10, x, n, 7, false},
		{"output over the input's start", x - 8, 3, x, n, 7, false},
		{"output just after the input", x + 4*n, 10, x, n, 7, true},
		{"output just before the input", x - 40, 10, x, n, 7, true},
	}
	for _, c := range cases {
		var r bf16Reuse
		if r.reusable(x, n, 7) {
			t.Fatal("an empty record is reusable")
		}
		r.converted(x, n, c.out, c.outN, 7)
		if got := r.reusable(c.src, c.sn, c.writes); got != c.want {
			t.Errorf("%s: reusable %v, want %v", c.name, got, c.want)
		}
	}
}

// TestMatMulSharedInput: q, k and v of one input through cuBLASLt round it
// to bf16 once and equal the CPU; after the input changes (a kernel writes
// it) the next product rounds it again.
func TestMatMulSharedInput(t *testing.T) {
	b := gpu(t)
	if b.lt == nil {
		t.Skip("no cuBLASLt")
	}
	r := newRand(t)
	const T, I = 100, 512
	x := act(t, b, r, T, I, 1)
	y := act(t, b, r, T, I, 1)
	var ws, outs []pair
	for _, O := range []int{512, 128, 128} {
		ws = append(ws, weight(t, b, r, backend.BF16, O, I, 0.05))
		outs = append(outs, out(t, b, T, O))
	}
	// Round 0 makes the cuBLASLt plans (a first shape may allocate, which
	// rightly ends reuse); rounds 1 and 2 are counted, 2 after the input
	// changed.
	for round := 0; round < 3; round++ {
		if round == 2 {
			b.Add(x.g, x.g, y.g) // the input changes on the device
			cpuBe.Add(x.c, x.c, y.c)
		}
		b.flush()
		before := b.launches
		for i := range ws {
			b.MatMul(outs[i].g, x.g, ws[i].g)
			cpuBe.MatMul(outs[i].c, x.c, ws[i].c)
		}
		if got := b.launches - before; round > 0 && got != 1 {
			t.Errorf("round %d: %d kernel launches for three products of one input, want 1 conversion", round, got)
		}
		for i := range ws {
			compare(t, fmt.Sprintf("round %d product %d", round, i), read(t, b, outs[i].g), cpuF32(outs[i]), 6e-3)
		}
	}
}
