package backend

import (
	"math"
	"testing"
)

// TestHalfToFloat32 checks the conversion on every class of half, against
// the value the bits denote.
func TestHalfToFloat32(t *testing.T) {
	for _, c := range []struct {
		h    uint16
		want float64
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, math.Ldexp(1, -24)},
		{0x03ff, math.Ldexp(1023, -24)}, {0x3555, 0.333251953125}, {0x7c00, math.Inf(1)}, {0xfc00, math.Inf(-1)},
	} {
		if got := HalfToFloat32(c.h); float64(got) != c.want {
			t.Errorf("%#04x: %v, want %v", c.h, got, c.want)
		}
	}
	if got := HalfToFloat32(0x7e00); !math.IsNaN(float64(got)) {
		t.Errorf("0x7e00: %v, want NaN", got)
	}
	if got := HalfToFloat32(0x8000); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("0x8000: %v, want -0", got)
	}
}
