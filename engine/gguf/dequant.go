package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/infernix/infernix/engine/backend"
)

// Dequantize decodes len(dst) elements of type t from src, which must hold
// exactly t.RowBytes(len(dst)) bytes. The arithmetic is ggml's reference
// dequantisation, in float32 and in its order; explicit float32
// conversions keep Go from fusing it into FMAs.
func Dequantize(t Type, src []byte, dst []float32) error {
	ti, ok := types[t]
	if !ok {
		return fmt.Errorf("type %s is not supported (supported: %s)", t, SupportedTypes())
	}
	if len(dst)%ti.block != 0 || len(src) != len(dst)/ti.block*ti.bytes {
		return fmt.Errorf("%s: %d bytes for %d elements", t, len(src), len(dst))
	}
	nb := len(dst) / ti.block
	for i := 0; i < nb; i++ {
		b := src[i*ti.bytes : (i+1)*ti.bytes]
		y := dst[i*ti.block : (i+1)*ti.block]
		switch t {
		case F32:
			y[0] = math.Float32frombits(binary.LittleEndian.Uint32(b))
		case F16:
			y[0] = f16(b)
		case BF16:
			y[0] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16)
		case Q8_0:
			d := f16(b)
			for j := 0; j < 32; j++ {
				y[j] = float32(int8(b[2+j])) * d
			}
		case Q4_0, Q4_1:
			d, m, qs := f16(b), float32(0), b[2:]
			if t == Q4_1 {
				m, qs = f16(b[2:]), b[4:]
			}
			for j := 0; j < 16; j++ {
				x0, x1 := int(qs[j]&0xf), int(qs[j]>>4)
				if t == Q4_0 {
					y[j], y[j+16] = float32(x0-8)*d, float32(x1-8)*d
				} else {
					y[j], y[j+16] = float32(float32(x0)*d)+m, float32(float32(x1)*d)+m
				}
			}
		case Q5_0, Q5_1:
			d, m, rest := f16(b), float32(0), b[2:]
			if t == Q5_1 {
				m, rest = f16(b[2:]), b[4:]
			}
			qh, qs := binary.LittleEndian.Uint32(rest), rest[4:]
			for j := 0; j < 16; j++ {
				xh0 := int((qh>>uint(j))<<4) & 0x10
				xh1 := int(qh>>uint(j+12)) & 0x10
				x0, x1 := int(qs[j]&0xf)|xh0, int(qs[j]>>4)|xh1
				if t == Q5_0 {
					y[j], y[j+16] = float32(x0-16)*d, float32(x1-16)*d
				} else {
					y[j], y[j+16] = float32(float32(x0)*d)+m, float32(float32(x1)*d)+m
				}
			}
		case Q2_K:
			dequantQ2K(b, y)
		case Q3_K:
			dequantQ3K(b, y)
		case Q4_K, Q5_K:
			dequantQ45K(t, b, y)
		case Q6_K:
			dequantQ6K(b, y)
		}
	}
	return nil
}

func f16(b []byte) float32 { return backend.HalfToFloat32(binary.LittleEndian.Uint16(b)) }

// scaleMinK4 unpacks the j-th 6-bit scale and min of a Q4_K/Q5_K block's
// 12 packed bytes (ggml's get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// dequantQ45K: d, dmin, scales[12], (Q5_K: qh[32]), qs[128].
func dequantQ45K(t Type, b []byte, y []float32) {
	d, dmin := f16(b), f16(b[2:])
	scales := b[4:16]
	var qh, ql []byte
	if t == Q5_K {
		qh, ql = b[16:48], b[48:176]
	} else {
		ql = b[16:144]
	}
	u1, u2 := uint8(1), uint8(2)
	for j, is := 0, 0; j < qk; j, is = j+64, is+2 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := float32(d*float32(sc)), float32(dmin*float32(m))
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := float32(d*float32(sc)), float32(dmin*float32(m))
		q := ql[j/2 : j/2+32]
		for l := 0; l < 32; l++ {
			lo, hi := int(q[l]&0xf), int(q[l]>>4)
			if qh != nil {
				if qh[l]&u1 != 0 {
					lo += 16
				}
				if qh[l]&u2 != 0 {
					hi += 16
				}
			}
			y[j+l] = float32(d1*float32(lo)) - m1
			y[j+32+l] = float32(d2*float32(hi)) - m2
		}
		u1, u2 = u1<<2, u2<<2
	}
}

// dequantQ6K: ql[128], qh[64], scales[16] (int8), d.
func dequantQ6K(b []byte, y []float32) {
	ql, qh, sc := b[0:128], b[128:192], b[192:208]
	d := f16(b[208:])
	for n := 0; n < qk; n += 128 {
		l0, h0, s0 := ql[n/2:], qh[n/4:], sc[n/16:]
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(l0[l]&0xf|(h0[l]>>0&3)<<4) - 32
			q2 := int(l0[l+32]&0xf|(h0[l]>>2&3)<<4) - 32
			q3 := int(l0[l]>>4|(h0[l]>>4&3)<<4) - 32
			q4 := int(l0[l+32]>>4|(h0[l]>>6&3)<<4) - 32
			y[n+l] = float32(d*float32(int8(s0[is]))) * float32(q1)
			y[n+l+32] = float32(d*float32(int8(s0[is+2]))) * float32(q2)
			y[n+l+64] = float32(d*float32(int8(s0[is+4]))) * float32(q3)
			y[n+l+96] = float32(d*float32(int8(s0[is+6]))) * float32(q4)
		}
	}
}

// dequantQ2K: scales[16] (low nibble scale, high min), qs[64], d, dmin.
func dequantQ2K(b []byte, y []float32) {
	scales, qs := b[0:16], b[16:80]
	d, dmin := f16(b[80:]), f16(b[82:])
	is, o := 0, 0
	for n := 0; n < qk; n += 128 {
		q := qs[n/4:]
		for shift := uint(0); shift < 8; shift += 2 {
			for half := 0; half < 2; half++ {
				sc := scales[is]
				is++
				dl, ml := float32(d*float32(sc&0xf)), float32(dmin*float32(sc>>4))
				for l := 0; l < 16; l++ {
					y[o] = float32(dl*float32(q[16*half+l]>>shift&3)) - ml
					o++
				}
			}
		}
	}
}

// dequantQ3K: hmask[32], qs[64], scales[12] (16 packed 6-bit scales), d.
func dequantQ3K(b []byte, y []float32) {
	hm, qs, packed := b[0:32], b[32:96], b[96:108]
	d := f16(b[108:])
	var aux [4]uint32
	for i := range 3 {
		aux[i] = binary.LittleEndian.Uint32(packed[4*i:])
	}
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	tmp := aux[2]
	aux[2] = (aux[0]>>4)&kmask2 | ((tmp>>4)&kmask1)<<4
	aux[3] = (aux[1]>>4)&kmask2 | ((tmp>>6)&kmask1)<<4
	aux[0] = aux[0]&kmask2 | (tmp&kmask1)<<4
	aux[1] = aux[1]&kmask2 | ((tmp>>2)&kmask1)<<4
	var scales [16]int8
	for i := range scales {
		scales[i] = int8(aux[i/4] >> (8 * uint(i%4)))
	}
	is, o := 0, 0
	m := uint8(1)
	for n := 0; n < qk; n += 128 {
		q := qs[n/4:]
		for shift := uint(0); shift < 8; shift += 2 {
			for half := 0; half < 2; half++ {
				dl := float32(d * float32(int(scales[is])-32))
				is++
				for l := 0; l < 16; l++ {
					v := int(q[16*half+l] >> shift & 3)
					if hm[16*half+l]&m == 0 {
						v -= 4
					}
					y[o] = dl * float32(v)
					o++
				}
			}
			m <<= 1
		}
	}
}
