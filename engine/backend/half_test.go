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

// TestFloat32ToHalf checks every half round-trips, and that values between
// two neighbours round to the nearer, ties to the even one, against a
// float64 search over all finite halves.
func TestFloat32ToHalf(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := HalfToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			if g := Float32ToHalf(f); g&0x7c00 != 0x7c00 || g&0x3ff == 0 {
				t.Fatalf("NaN %#04x → %#04x", h, g)
			}
			continue
		}
		if g := Float32ToHalf(f); g != uint16(h) {
			t.Fatalf("%#04x (%v) → %#04x", h, f, g)
		}
	}
	nearest := func(f float32) uint16 {
		best, bestErr := uint16(0), math.Inf(1)
		for h := 0; h < 0x7c00; h++ {
			for _, s := range []uint16{0, 0x8000} {
				d := math.Abs(float64(HalfToFloat32(uint16(h)|s)) - float64(f))
				if d < bestErr || (d == bestErr && h&1 == 0) {
					best, bestErr = uint16(h)|s, d
				}
			}
		}
		return best
	}
	for _, f := range []float32{1.00048828125, 1.000732421875, 0.1, -3.14159, 1e-5, 3e-8, 6e-8, -2.9802322e-08, 65519, 1.5e-7} {
		if g, w := Float32ToHalf(f), nearest(f); g != w && HalfToFloat32(g) != HalfToFloat32(w) {
			t.Errorf("%v → %#04x (%v), want %#04x (%v)", f, g, HalfToFloat32(g), w, HalfToFloat32(w))
		}
	}
	if g := Float32ToHalf(65520); g != 0x7c00 {
		t.Errorf("65520 → %#04x, want +Inf", g)
	}
}

// TestFloat32ToBF16 checks rounding to nearest, ties to even.
func TestFloat32ToBF16(t *testing.T) {
	for _, c := range []struct {
		in   uint32
		want uint16
	}{{0x3f800000, 0x3f80}, {0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81}, {0x7f7fffff, 0x7f80}, {0xbf7fffff, 0xbf80}} {
		if g := Float32ToBF16(math.Float32frombits(c.in)); g != c.want {
			t.Errorf("%#08x → %#04x, want %#04x", c.in, g, c.want)
		}
	}
}
