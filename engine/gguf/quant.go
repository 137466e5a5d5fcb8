package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/infernix/infernix/engine/backend"
)

// Quantize encodes x as type t (len(x) a multiple of t's block size) with
// round-to-nearest scales: each block's scale comes from its range, each
// value from the scale, without llama.cpp's search for the scales that
// minimise the error. The blocks have ggml's exact layouts, so ggml and
// Dequantize read them alike.
func Quantize(t Type, x []float32) ([]byte, error) {
	ti, ok := types[t]
	if !ok {
		return nil, fmt.Errorf("type %s is not supported (supported: %s)", t, SupportedTypes())
	}
	out := make([]byte, len(x)/ti.block*ti.bytes)
	return out, QuantizeInto(t, x, out)
}

// QuantizeInto is Quantize into out, which must be t.RowBytes(len(x)) long.
func QuantizeInto(t Type, x []float32, out []byte) error {
	ti, ok := types[t]
	if !ok {
		return fmt.Errorf("type %s is not supported (supported: %s)", t, SupportedTypes())
	}
	if len(x)%ti.block != 0 || len(out) != len(x)/ti.block*ti.bytes {
		return fmt.Errorf("%s: %d elements are not whole blocks of %d, or %d bytes do not hold them", t, len(x), ti.block, len(out))
	}
	clear(out)
	for i := 0; i < len(x)/ti.block; i++ {
		b := out[i*ti.bytes : (i+1)*ti.bytes]
		v := x[i*ti.block : (i+1)*ti.block]
		switch t {
		case F32:
			binary.LittleEndian.PutUint32(b, math.Float32bits(v[0]))
		case F16:
			binary.LittleEndian.PutUint16(b, backend.Float32ToHalf(v[0]))
		case BF16:
			binary.LittleEndian.PutUint16(b, backend.Float32ToBF16(v[0]))
		case Q8_0:
			d := half(amax(v) / 127)
			putF16(b, d)
			for j, f := range v {
				b[2+j] = byte(int8(roundDiv(f, d, -127, 127)))
			}
		case Q4_0, Q5_0:
			quantSymmetric(t, v, b)
		case Q4_1, Q5_1:
			quantAffine(t, v, b)
		case Q2_K:
			quantQ2K(v, b)
		case Q3_K:
			quantQ3K(v, b)
		case Q4_K, Q5_K:
			quantQ45K(t, v, b)
		case Q6_K:
			quantQ6K(v, b)
		}
	}
	return nil
}

func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, backend.Float32ToHalf(f)) }

// half rounds f to the f16 the block stores, so that values are quantized
// against the scale the reader will see.
func half(f float32) float32 { return backend.HalfToFloat32(backend.Float32ToHalf(f)) }

func amax(v []float32) float32 {
	m := float32(0)
	for _, f := range v {
		m = max(m, float32(math.Abs(float64(f))))
	}
	return m
}

// roundDiv is round(f/d) clamped to [lo, hi]; 0 when d is 0.
func roundDiv(f, d float32, lo, hi int) int {
	if d == 0 {
		return max(lo, min(hi, 0))
	}
	return max(lo, min(hi, int(math.Round(float64(f/d)))))
}

// quantSymmetric: Q4_0 (levels −8..7) and Q5_0 (−16..15) around zero.
func quantSymmetric(t Type, v []float32, b []byte) {
	bias := 8
	if t == Q5_0 {
		bias = 16
	}
	d := half(amax(v) / float32(bias-1))
	putF16(b, d)
	var qh uint32
	qs := b[2:]
	if t == Q5_0 {
		qs = b[6:]
	}
	for j := 0; j < 16; j++ {
		q0 := roundDiv(v[j], d, -bias, bias-1) + bias
		q1 := roundDiv(v[j+16], d, -bias, bias-1) + bias
		qs[j] = byte(q0&0xf | (q1&0xf)<<4)
		qh |= uint32(q0>>4&1)<<uint(j) | uint32(q1>>4&1)<<uint(j+16)
	}
	if t == Q5_0 {
		binary.LittleEndian.PutUint32(b[2:], qh)
	}
}

// quantAffine: Q4_1 (levels 0..15) and Q5_1 (0..31) from the block's min.
func quantAffine(t Type, v []float32, b []byte) {
	top := 15
	if t == Q5_1 {
		top = 31
	}
	lo, hi := v[0], v[0]
	for _, f := range v {
		lo, hi = min(lo, f), max(hi, f)
	}
	d, m := half((hi-lo)/float32(top)), half(lo)
	putF16(b, d)
	putF16(b[2:], m)
	var qh uint32
	qs := b[4:]
	if t == Q5_1 {
		qs = b[8:]
	}
	for j := 0; j < 16; j++ {
		q0 := roundDiv(v[j]-m, d, 0, top)
		q1 := roundDiv(v[j+16]-m, d, 0, top)
		qs[j] = byte(q0&0xf | (q1&0xf)<<4)
		qh |= uint32(q0>>4&1)<<uint(j) | uint32(q1>>4&1)<<uint(j+16)
	}
	if t == Q5_1 {
		binary.LittleEndian.PutUint32(b[4:], qh)
	}
}

// subScales gives each sub-block of n values a scale and a non-negative
// min with x ≈ scale·q − min, q in 0..top.
func subScales(v []float32, n, top int) (scale, mins []float32) {
	for s := 0; s < len(v); s += n {
		lo, hi := float32(0), v[s]
		for _, f := range v[s : s+n] {
			lo, hi = min(lo, f), max(hi, f)
		}
		scale = append(scale, max(hi-lo, 0)/float32(top))
		mins = append(mins, -lo)
	}
	return scale, mins
}

// superScale is the f16 super-block scale that maps vals onto 0..levels.
func superScale(vals []float32, levels int) float32 {
	m := float32(0)
	for _, f := range vals {
		m = max(m, f)
	}
	return half(m / float32(levels))
}

// quantQ45K: eight sub-blocks of 32, 6-bit scales and mins.
func quantQ45K(t Type, v []float32, b []byte) {
	top := 15
	if t == Q5_K {
		top = 31
	}
	scale, mins := subScales(v, 32, top)
	d, dmin := superScale(scale, 63), superScale(mins, 63)
	putF16(b, d)
	putF16(b[2:], dmin)
	var sc, mn [8]int
	for j := range sc {
		sc[j], mn[j] = roundDiv(scale[j], d, 0, 63), roundDiv(mins[j], dmin, 0, 63)
	}
	packed := b[4:16]
	for j := 0; j < 8; j++ {
		if j < 4 {
			packed[j], packed[j+4] = byte(sc[j]), byte(mn[j])
		} else {
			packed[j+4] = byte(sc[j]&0xf | (mn[j]&0xf)<<4)
			packed[j-4] |= byte(sc[j]>>4) << 6
			packed[j] |= byte(mn[j]>>4) << 6
		}
	}
	var qh, ql []byte
	if t == Q5_K {
		qh, ql = b[16:48], b[48:176]
	} else {
		ql = b[16:144]
	}
	level := func(e int) int {
		s := e / 32
		step := float32(d * float32(sc[s]))
		return roundDiv(v[e]+float32(dmin*float32(mn[s])), step, 0, top)
	}
	for j := 0; j < qk; j += 64 {
		bit := uint(j / 32)
		for l := 0; l < 32; l++ {
			q1, q2 := level(j+l), level(j+32+l)
			ql[j/2+l] = byte(q1&0xf | (q2&0xf)<<4)
			if qh != nil {
				qh[l] |= byte(q1>>4&1)<<bit | byte(q2>>4&1)<<(bit+1)
			}
		}
	}
}

// quantQ6K: sixteen sub-blocks of 16, int8 scales, levels −32..31.
func quantQ6K(v []float32, b []byte) {
	var scale [16]float32
	for s := range scale {
		scale[s] = amax(v[16*s:16*s+16]) / 31
	}
	d := superScale(scale[:], 127)
	b[208], b[209] = 0, 0
	putF16(b[208:], d)
	var sc [16]int
	for s := range sc {
		sc[s] = roundDiv(scale[s], d, 0, 127)
		b[192+s] = byte(int8(sc[s]))
	}
	L := make([]int, qk)
	for e := range L {
		L[e] = roundDiv(v[e], float32(d*float32(sc[e/16])), -32, 31) + 32
	}
	for n := 0; n < qk; n += 128 {
		ql, qh := b[n/2:], b[128+n/4:]
		for l := 0; l < 32; l++ {
			ql[l] = byte(L[n+l]&0xf | (L[n+l+64]&0xf)<<4)
			ql[l+32] = byte(L[n+l+32]&0xf | (L[n+l+96]&0xf)<<4)
			qh[l] = byte(L[n+l]>>4 | (L[n+l+32]>>4)<<2 | (L[n+l+64]>>4)<<4 | (L[n+l+96]>>4)<<6)
		}
	}
}

// packLevels2 writes 2-bit levels in the Q2_K/Q3_K order.
func packLevels2(L []int, qs []byte) {
	for n := 0; n < qk; n += 128 {
		for l := 0; l < 32; l++ {
			qs[n/4+l] = byte(L[n+l] | L[n+l+32]<<2 | L[n+l+64]<<4 | L[n+l+96]<<6)
		}
	}
}

// quantQ2K: sixteen sub-blocks of 16, 4-bit scales and mins, levels 0..3.
func quantQ2K(v []float32, b []byte) {
	scale, mins := subScales(v, 16, 3)
	d, dmin := superScale(scale, 15), superScale(mins, 15)
	putF16(b[80:], d)
	putF16(b[82:], dmin)
	L := make([]int, qk)
	for s := 0; s < 16; s++ {
		sc, mn := roundDiv(scale[s], d, 0, 15), roundDiv(mins[s], dmin, 0, 15)
		b[s] = byte(sc | mn<<4)
		step := float32(d * float32(sc))
		for e := 16 * s; e < 16*s+16; e++ {
			L[e] = roundDiv(v[e]+float32(dmin*float32(mn)), step, 0, 3)
		}
	}
	packLevels2(L, b[16:80])
}

// quantQ3K: sixteen sub-blocks of 16, 6-bit signed scales, levels −4..3.
func quantQ3K(v []float32, b []byte) {
	var scale [16]float32
	for s := range scale {
		scale[s] = amax(v[16*s:16*s+16]) / 4
	}
	d := superScale(scale[:], 31)
	putF16(b[108:], d)
	L := make([]int, qk)
	packed := b[96:108]
	for s := 0; s < 16; s++ {
		sc := roundDiv(scale[s], d, 0, 31)
		l := sc + 32
		if s < 8 {
			packed[s] |= byte(l & 0xf)
		} else {
			packed[s-8] |= byte(l&0xf) << 4
		}
		packed[s%4+8] |= byte(l>>4) << (2 * uint(s/4))
		step := float32(d * float32(sc))
		for e := 16 * s; e < 16*s+16; e++ {
			L[e] = roundDiv(v[e], step, -4, 3) + 4
		}
	}
	hm := b[0:32]
	for e := range L {
		if L[e] > 3 {
			hm[e%32] |= 1 << uint(e/32)
			L[e] -= 4
		}
	}
	packLevels2(L, b[32:96])
}
