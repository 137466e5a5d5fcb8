package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

func sampleFile(t testing.TB) []byte {
	t.Helper()
	var w Writer
	w.String("general.architecture", "qwen3")
	w.Uint32("qwen3.block_count", 2)
	w.Float32("qwen3.rope.freq_base", 1e6)
	w.Bool("tokenizer.ggml.add_bos_token", false)
	w.Strings("tokenizer.ggml.tokens", []string{"a", "b", "ĠĠ"})
	w.Int32s("tokenizer.ggml.token_type", []int32{1, 1, 3})
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(i) - 31.5
	}
	f32, _ := Quantize(F32, x)
	q8, _ := Quantize(Q8_0, x)
	w.Tensor("a", []int{64}, F32, f32)
	w.Tensor("b", []int{32, 2}, Q8_0, q8)
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRoundTrip writes a file and reads back every value and tensor.
func TestRoundTrip(t *testing.T) {
	f, err := Parse(sampleFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Keys, ","); got != "general.architecture,qwen3.block_count,qwen3.rope.freq_base,tokenizer.ggml.add_bos_token,tokenizer.ggml.tokens,tokenizer.ggml.token_type" {
		t.Fatalf("keys %s", got)
	}
	if s, _ := f.Meta["general.architecture"].Str(); s != "qwen3" {
		t.Errorf("architecture %q", s)
	}
	if n, ok := f.Meta["qwen3.block_count"].Int(); !ok || n != 2 {
		t.Errorf("block_count %d %v", n, ok)
	}
	if v, ok := f.Meta["qwen3.rope.freq_base"].Float(); !ok || v != 1e6 {
		t.Errorf("freq_base %v", v)
	}
	if b, ok := f.Meta["tokenizer.ggml.add_bos_token"].Bool(); !ok || b {
		t.Errorf("add_bos %v %v", b, ok)
	}
	if s, _ := f.Meta["tokenizer.ggml.tokens"].Strings(); strings.Join(s, "|") != "a|b|ĠĠ" {
		t.Errorf("tokens %q", s)
	}
	if s, _ := f.Meta["tokenizer.ggml.token_type"].Ints(); len(s) != 3 || s[2] != 3 {
		t.Errorf("token types %v", s)
	}
	a, b := f.Tensor("a"), f.Tensor("b")
	if a == nil || b == nil || a.Type != F32 || b.Type != Q8_0 || b.Dims[1] != 2 || b.Elements() != 64 {
		t.Fatalf("tensors %+v %+v", a, b)
	}
	if (f.DataStart+int(b.Offset))%DefaultAlignment != 0 || len(b.Data) != 68 {
		t.Errorf("b at %d+%d, %d bytes", f.DataStart, b.Offset, len(b.Data))
	}
	got := make([]float32, 64)
	if err := Dequantize(F32, a.Data, got); err != nil || got[0] != -31.5 || got[63] != 31.5 {
		t.Errorf("a: %v %v", got[:2], err)
	}
	// Written through a file and mapped back.
	var w Writer
	w.String("general.architecture", "x")
	w.Tensor("t", []int{32}, Q8_0, b.Data[:34])
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	mf, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	if tt := mf.Tensor("t"); tt == nil || string(tt.Data) != string(b.Data[:34]) {
		t.Errorf("mapped tensor differs")
	}
}

// TestMalformed: truncations and corruptions of a valid file are errors
// naming what is wrong, never panics.
func TestMalformed(t *testing.T) {
	good := sampleFile(t)
	g, _ := Parse(good)
	last := g.Tensors[len(g.Tensors)-1]
	end := g.DataStart + int(last.Offset) + len(last.Data) // padding after it is optional
	for n := 0; n < end; n += 7 {
		if _, err := Parse(good[:n]); err == nil {
			t.Fatalf("a file cut to %d of %d bytes parsed", n, len(good))
		}
	}
	for _, c := range []struct {
		name string
		edit func(b []byte)
		want string
	}{
		{"magic", func(b []byte) { b[0] = 'X' }, "bad magic"},
		{"version", func(b []byte) { b[4] = 9 }, "version 9"},
		{"kv count", func(b []byte) { binary.LittleEndian.PutUint64(b[16:], 1<<40) }, "more than the file can hold"},
		{"string length", func(b []byte) { binary.LittleEndian.PutUint64(b[24:], 1<<40) }, "runs past the end"},
		{"value type", func(b []byte) { binary.LittleEndian.PutUint32(b[24+8+len("general.architecture"):], 99) }, "unknown value type 99"},
	} {
		b := append([]byte(nil), good...)
		c.edit(b)
		_, err := Parse(b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	var w Writer
	w.Tensor("bad", []int{33}, Q8_0, make([]byte, 34))
	if _, err := w.Bytes(); err == nil || !strings.Contains(err.Error(), "blocks") {
		t.Errorf("writer accepted a partial block: %v", err)
	}
}

// TestQuantizeRoundTrip: every type's blocks decode to within its step of
// the input (a half step for rounding, more for the 6- and 4-bit scales),
// on random data with outliers, all-zero and constant blocks.
func TestQuantizeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 4*qk)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if i%97 == 0 {
			x[i] *= 8
		}
	}
	for i := 2 * qk; i < 3*qk; i++ {
		x[i] = 0
	}
	for i := 3 * qk; i < 4*qk; i++ {
		x[i] = 0.75
	}
	// bound: the largest error relative to a block's largest magnitude.
	for _, c := range []struct {
		t     Type
		bound float64
	}{
		{F32, 0}, {F16, 1e-3}, {BF16, 4e-3}, {Q8_0, 0.5 / 127 * 1.01}, {Q4_0, 0.5 / 7 * 1.01}, {Q4_1, 0.5 / 15 * 2.02},
		{Q5_0, 0.5 / 15 * 1.01}, {Q5_1, 0.5 / 31 * 2.02}, {Q6_K, 0.06}, {Q5_K, 0.1}, {Q4_K, 0.15}, {Q3_K, 0.4}, {Q2_K, 0.6},
	} {
		b, err := Quantize(c.t, x)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != c.t.RowBytes(len(x)) {
			t.Fatalf("%s: %d bytes", c.t, len(b))
		}
		y := make([]float32, len(x))
		if err := Dequantize(c.t, b, y); err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for s := 0; s < len(x); s += qk {
			m := float64(amax(x[s : s+qk]))
			for i := s; i < s+qk; i++ {
				e := math.Abs(float64(y[i] - x[i]))
				if m > 0 {
					e /= m
				}
				worst = max(worst, e)
			}
		}
		for i := 2 * qk; i < 3*qk; i++ {
			if y[i] != 0 {
				t.Errorf("%s: zero block decodes to %v at %d", c.t, y[i], i)
				break
			}
		}
		if worst > c.bound {
			t.Errorf("%s: worst relative error %.4f > %.4f", c.t, worst, c.bound)
		}
	}
}

// TestDequantizeKnownBlocks decodes hand-built blocks whose values follow
// from ggml's block layouts.
func TestDequantizeKnownBlocks(t *testing.T) {
	h := func(f float32) (byte, byte) {
		v := backend.Float32ToHalf(f)
		return byte(v), byte(v >> 8)
	}
	// Q8_0: d = 0.5, q = j-16.
	q8 := make([]byte, 34)
	q8[0], q8[1] = h(0.5)
	for j := 0; j < 32; j++ {
		q8[2+j] = byte(int8(j - 16))
	}
	// Q4_K: d = 1, dmin = 0.25; sub-block 0 scale 3 min 4, sub-block 5
	// scale 33 (high bits in byte 1) min 17 (high bits in byte 5); every
	// level 5 in the low nibbles (sub-blocks 0, 2, 4, 6) and 9 in the high.
	q4k := make([]byte, 144)
	q4k[0], q4k[1] = h(1)
	q4k[2], q4k[3] = h(0.25)
	sc := q4k[4:16]
	sc[0], sc[4] = 3, 4
	sc[9] = 33&0xf | (17&0xf)<<4
	sc[1] |= (33 >> 4) << 6
	sc[5] |= (17 >> 4) << 6
	for i := 16; i < 144; i++ {
		q4k[i] = 5 | 9<<4
	}
	// Q6_K: d = 2, scale of sub-block 0 = -3, of 8 = 5; level 0x2a at
	// element 0 (low nibble 0xa, high bits 2), 63 at element 128.
	q6k := make([]byte, 210)
	q6k[208], q6k[209] = h(2)
	q6k[192], q6k[200] = byte(0xfd), 5
	q6k[0], q6k[128] = 0xa, 2
	q6k[64], q6k[160] = 0xf, 3
	for _, c := range []struct {
		t    Type
		b    []byte
		at   []int
		want []float32
	}{
		{Q8_0, q8, []int{0, 16, 31}, []float32{-8, 0, 7.5}},
		{Q4_K, q4k, []int{0, 32 * 5, 32 * 1}, []float32{3*5 - 0.25*4, 33*9 - 0.25*17, 0}},
		{Q6_K, q6k, []int{0, 1, 128}, []float32{2 * -3 * (0x2a - 32), 2 * -3 * -32, 2 * 5 * (63 - 32)}},
	} {
		y := make([]float32, c.t.BlockSize())
		if err := Dequantize(c.t, c.b, y); err != nil {
			t.Fatal(err)
		}
		for i, at := range c.at {
			if y[at] != c.want[i] {
				t.Errorf("%s[%d] = %v, want %v", c.t, at, y[at], c.want[i])
			}
		}
	}
}

// FuzzParse: no input panics; whatever parses has in-bounds tensors.
func FuzzParse(f *testing.F) {
	f.Add(sampleFile(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Parse(b)
		if err != nil {
			return
		}
		for _, tt := range g.Tensors {
			if len(tt.Data) != tt.Type.RowBytes(tt.Elements()) {
				t.Fatalf("tensor %q: %d bytes", tt.Name, len(tt.Data))
			}
			y := make([]float32, min(tt.Elements(), 1<<16))
			y = y[:len(y)/tt.Type.BlockSize()*tt.Type.BlockSize()]
			Dequantize(tt.Type, tt.Data[:tt.Type.RowBytes(len(y))], y)
		}
	})
}

// TestTensorFunc: lazily made tensors are written like eager ones, and a
// maker that returns the wrong size or fails stops the write.
func TestTensorFunc(t *testing.T) {
	data := make([]byte, 34)
	data[0] = 0x3c
	var eager, lazy Writer
	eager.Tensor("t", []int{32}, Q8_0, data)
	lazy.TensorFunc("t", []int{32}, Q8_0, func() ([]byte, error) { return data, nil })
	a, _ := eager.Bytes()
	b, err := lazy.Bytes()
	if err != nil || string(a) != string(b) {
		t.Fatalf("lazy tensor written differently: %v", err)
	}
	var short Writer
	short.TensorFunc("t", []int{32}, Q8_0, func() ([]byte, error) { return data[:33], nil })
	if _, err := short.Bytes(); err == nil || !strings.Contains(err.Error(), "made 33 bytes") {
		t.Errorf("short tensor: %v", err)
	}
	var failing Writer
	failing.TensorFunc("t", []int{32}, Q8_0, func() ([]byte, error) { return nil, fmt.Errorf("disk gone") })
	path := filepath.Join(t.TempDir(), "f.gguf")
	if err := failing.WriteFile(path); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Errorf("failing tensor: %v", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a failed write left a file")
	}
}
