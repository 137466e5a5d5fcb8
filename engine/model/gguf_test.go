package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/gguf"
)

func TestGGUFName(t *testing.T) {
	for _, c := range []struct {
		hf, gguf string
		expert   int
	}{
		{"model.embed_tokens.weight", "token_embd.weight", -1},
		{"lm_head.weight", "output.weight", -1},
		{"model.layers.11.self_attn.o_proj.weight", "blk.11.attn_output.weight", -1},
		{"model.layers.0.post_attention_layernorm.weight", "blk.0.ffn_norm.weight", -1},
		{"model.layers.3.mlp.gate.weight", "blk.3.ffn_gate_inp.weight", -1},
		{"model.layers.3.mlp.experts.17.down_proj.weight", "blk.3.ffn_down_exps.weight", 17},
	} {
		g, e, ok := GGUFName(c.hf)
		if !ok || g != c.gguf || e != c.expert {
			t.Errorf("%s → %s %d %v, want %s %d", c.hf, g, e, ok, c.gguf, c.expert)
		}
	}
	for _, bad := range []string{"model.layers.1.mlp.experts.x.up_proj.weight", "model.layers.1.linear_attn.A_log", "mtp.fc.weight"} {
		if g, _, ok := GGUFName(bad); ok {
			t.Errorf("%s mapped to %s", bad, g)
		}
	}
}

// TestExpand: values past f16's range make the tensor f32, exactly.
func TestExpand(t *testing.T) {
	x := make([]float32, 3*(1<<16)+64) // more than one chunk, and a partial one
	for i := range x {
		x[i] = float32(i%251) - 125
	}
	for _, big := range []bool{false, true} {
		if big {
			x[len(x)-3] = 1e6
		}
		q, err := gguf.Quantize(gguf.Q8_0, x)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(x))
		gguf.Dequantize(gguf.Q8_0, q, want)
		out, dt, err := expand(gguf.Q8_0, q, len(x), backend.F16)
		if err != nil {
			t.Fatal(err)
		}
		if (dt == backend.F32) != big {
			t.Fatalf("big %v: dtype %v", big, dt)
		}
		for i, w := range want {
			var got float32
			if dt == backend.F32 {
				got = float32frombytes(out[4*i:])
			} else {
				got = backend.HalfToFloat32(uint16(out[2*i]) | uint16(out[2*i+1])<<8)
				w = backend.HalfToFloat32(backend.Float32ToHalf(w))
			}
			if got != w {
				t.Fatalf("big %v: element %d = %v, want %v", big, i, got, w)
			}
		}
	}
}

// TestExpandBF16: into bf16 there is no overflow, and each value is the
// dequantized one rounded once.
func TestExpandBF16(t *testing.T) {
	x := make([]float32, 1<<16+96)
	for i := range x {
		x[i] = float32(i%97)*0.37 - 11
	}
	x[5] = 3e5 // past f16's range
	q, err := gguf.Quantize(gguf.Q8_0, x)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(x))
	gguf.Dequantize(gguf.Q8_0, q, want)
	out, dt, err := expand(gguf.Q8_0, q, len(x), backend.BF16)
	if err != nil || dt != backend.BF16 || len(out) != 2*len(x) {
		t.Fatalf("dtype %v, %d bytes, %v", dt, len(out), err)
	}
	for i, w := range want {
		if got := binary.LittleEndian.Uint16(out[2*i:]); got != backend.Float32ToBF16(w) {
			t.Fatalf("element %d = %#x, want %#x (%v)", i, got, backend.Float32ToBF16(w), w)
		}
	}
}

// halfBackend is a backend that only answers the loader's capability
// questions; tensorData never calls anything else.
type halfBackend struct {
	backend.Backend
	half  backend.DType
	quant bool
}

func (b halfBackend) HalfDType() backend.DType        { return b.half }
func (b halfBackend) Quantized(dt backend.DType) bool { return b.quant && dt == backend.Q8_0 }

type plainBackend struct{ backend.Backend }

// TestGGUFTensorDTypes: what each stored type becomes on a backend without
// capabilities (f16), one whose products are bf16 (CUDA), and one that keeps
// Q8_0 (CPU).
func TestGGUFTensorDTypes(t *testing.T) {
	types := []gguf.Type{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_K}
	// Layer i holds a 4-row matrix of types[i]; rows of 256 (a k-quant block).
	const rows, cols = 4, 256
	vals := make([]float32, rows*cols)
	for i := range vals {
		vals[i] = float32(i%13)*0.25 - 1.5
	}
	var w gguf.Writer
	for i, typ := range types {
		data, err := gguf.Quantize(typ, vals)
		if err != nil {
			t.Fatal(err)
		}
		w.Tensor(fmt.Sprintf("blk.%d.ffn_up.weight", i), []int{cols, rows}, typ, data)
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		be   backend.Backend
		want []backend.DType // per stored type
	}{
		{plainBackend{}, []backend.DType{backend.F32, backend.F16, backend.BF16, backend.F16, backend.F16}},
		{halfBackend{half: backend.BF16}, []backend.DType{backend.F32, backend.BF16, backend.BF16, backend.BF16, backend.BF16}},
		{halfBackend{half: backend.F16, quant: true}, []backend.DType{backend.F32, backend.F16, backend.BF16, backend.Q8_0, backend.F16}},
	} {
		gw := &GGUFWeights{File: f, Be: c.be}
		for i, typ := range types {
			dt, data, err := gw.tensorData(fmt.Sprintf("model.layers.%d.mlp.up_proj.weight", i), []int{rows, cols})
			if err != nil {
				t.Fatalf("%T %v: %v", c.be, typ, err)
			}
			if dt != c.want[i] || len(data) != rows*dt.RowBytes(cols) {
				t.Errorf("%T %v: %v with %d bytes, want %v", c.be, typ, dt, len(data), c.want[i])
				continue
			}
			// Every conversion keeps the values, to the target's rounding.
			ref := make([]float32, rows*cols)
			got := make([]float32, rows*cols)
			gguf.Dequantize(typ, f.Tensors[i].Data, ref)
			if err := gguf.Dequantize(ggufType(dt), data, got); err != nil {
				t.Fatal(err)
			}
			for j := range ref {
				if d := got[j] - ref[j]; d > 0.01 || d < -0.01 {
					t.Fatalf("%T %v→%v: element %d = %v, want %v", c.be, typ, dt, j, got[j], ref[j])
				}
			}
		}
	}
}

func ggufType(dt backend.DType) gguf.Type {
	return map[backend.DType]gguf.Type{backend.F32: gguf.F32, backend.F16: gguf.F16, backend.BF16: gguf.BF16, backend.Q8_0: gguf.Q8_0}[dt]
}

func float32frombytes(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

// TestGGUFConfigErrors: an unsupported architecture or a missing size is
// an error naming the key.
func TestGGUFConfigErrors(t *testing.T) {
	build := func(arch string, keys map[string]uint32, embd bool) *gguf.File {
		var w gguf.Writer
		w.String("general.architecture", arch)
		for k, v := range keys {
			w.Uint32(arch+"."+k, v)
		}
		if embd {
			w.Tensor("token_embd.weight", []int{4, 8}, gguf.F32, make([]byte, 4*32))
		}
		b, err := w.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	full := map[string]uint32{"embedding_length": 4, "block_count": 1, "attention.head_count": 1, "context_length": 64, "feed_forward_length": 8}
	if _, err := GGUFConfig(build("llama", full, true)); err == nil || !strings.Contains(err.Error(), `"llama" is not supported`) {
		t.Errorf("llama: %v", err)
	}
	partial := map[string]uint32{"embedding_length": 4, "attention.head_count": 1, "context_length": 64, "feed_forward_length": 8}
	if _, err := GGUFConfig(build("qwen3", partial, true)); err == nil || !strings.Contains(err.Error(), "qwen3.block_count") {
		t.Errorf("missing block_count: %v", err)
	}
	if _, err := GGUFConfig(build("qwen3", full, false)); err == nil || !strings.Contains(err.Error(), "token_embd.weight") {
		t.Errorf("missing embedding: %v", err)
	}
	raw, err := GGUFConfig(build("qwen3", full, true))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil || cfg.VocabSize != 8 || cfg.HiddenSize != 4 || !cfg.TieWordEmbeddings || cfg.Arch() != "Qwen3ForCausalLM" {
		t.Errorf("config %+v %v", cfg, err)
	}
}
