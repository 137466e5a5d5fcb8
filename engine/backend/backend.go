// Package backend defines the operators a model's forward pass is written in,
// and that each device (CPU, CUDA) implements.
//
// Contract:
//   - All methods of a Backend are called from one goroutine (the device
//     goroutine); a backend may run work on other threads internally but
//     returns only when results are visible to the next call (the CUDA backend
//     may queue work on its stream: ReadRows is the synchronisation point).
//   - Activations are F32 row-major 2-D tensors [rows, cols]. Weights keep the
//     checkpoint's dtype (F32, F16 or BF16); arithmetic is F32.
//   - The KV cache is paged: fixed blocks of BlockSize token slots; a sequence
//     owns a list of blocks (its block table), so sequences grow without copying
//     and prefixes can be shared later.
//   - Optional capabilities (graph capture, recurrent state kernels, on-device
//     sampling) are extra interfaces found by type assertion.
package backend

import "fmt"

// DType is a weight element type.
type DType uint8

const (
	F32 DType = iota
	F16
	BF16
	// Q8_0 is ggml's block_q8_0: each run of 32 values of a row is an f16
	// scale d and 32 int8 q, value = float32(q)·d. Rows are whole blocks.
	// Only backends whose QuantizedWeights says so take it.
	Q8_0
)

// QuantizedWeights is an optional capability of backends that keep
// block-quantized weights as stored and multiply with them directly
// (dequantizing as ggml's reference does, then f32 arithmetic). Loaders
// find it by type assertion and expand the weights otherwise.
type QuantizedWeights interface {
	Quantized(dt DType) bool
}

// HalfWeights is an optional capability of backends whose fast products
// take one 16-bit float type (the CUDA backend's are BF16 kernels and
// cuBLASLt BF16 GEMMs). Loaders that must convert weights anyway (GGUF's
// quantized and f16 tensors) produce that type; without the capability
// they produce F16.
type HalfWeights interface {
	HalfDType() DType // F16 or BF16
}

func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case F16:
		return "F16"
	case BF16:
		return "BF16"
	case Q8_0:
		return "Q8_0"
	}
	return fmt.Sprintf("DType(%d)", d)
}

// Size is the element size in bytes (0 for block types: see RowBytes).
func (d DType) Size() int {
	switch d {
	case F32:
		return 4
	case F16, BF16:
		return 2
	}
	return 0
}

// RowBytes is the size of n values (for block types, n whole blocks' worth).
func (d DType) RowBytes(n int) int {
	if d == Q8_0 {
		return n / 32 * 34
	}
	return n * d.Size()
}

// BlockSize is the number of token slots in one KV block (and one prefix-cache block).
const BlockSize = 64

// Tensor is an opaque array resident on a backend.
type Tensor interface {
	Shape() []int
	DType() DType
}

// KVSpec sizes a paged KV cache.
type KVSpec struct {
	Layers  int // attention layers that own KV (hybrid models have fewer than all layers)
	Blocks  int // total blocks in the pool
	KVHeads int
	HeadDim int
}

// KVCache is a backend-resident paged KV pool; block ownership is managed by
// the engine (engine/kv), not by the backend.
type KVCache interface {
	Spec() KVSpec
}

// AttnBatch describes the tokens of one forward call for attention: token t
// belongs to sequence Seq[t] at position Pos[t]; it sees positions 0..Pos[t] of
// that sequence (causal). Tokens of one sequence are contiguous and in
// increasing position order; earlier positions are already in the cache.
type AttnBatch struct {
	Seq    []int32
	Pos    []int32
	Blocks [][]int32 // block table per sequence
	Slots  []int32   // recurrent-state slot per sequence (hybrid models; nil: slot = sequence index)
}

// Rope holds precomputed rotary tables: for position p and pair i,
// cos/sin[p*Half+i]. Rotary applies to the first 2*Half dims of each head
// (partial rotary leaves the rest untouched), rotate-half (NeoX) layout.
type Rope struct {
	Half     int
	MaxPos   int
	Cos, Sin []float32
}

// MoE are the weights of one sparse mixture-of-experts block.
type MoE struct {
	Router           Tensor   // [experts, hidden]
	Gate, Up, Down   []Tensor // per expert: [inter, hidden], [inter, hidden], [hidden, inter]
	TopK             int
	NormTopK         bool
	SharedGate       Tensor // optional shared expert
	SharedUp         Tensor
	SharedDown       Tensor
	SharedExpertGate Tensor // optional [1, hidden]: sigmoid gate on the shared expert
}

// Backend executes operators.
type Backend interface {
	Name() string

	// Upload makes a weight resident. data may be memory-mapped; a backend that
	// keeps a reference (CPU) must not write it.
	Upload(name string, dt DType, shape []int, data []byte) (Tensor, error)
	// Alloc returns a zeroed F32 tensor; Rows(t, n) views its first n rows.
	Alloc(rows, cols int) Tensor
	Rows(t Tensor, n int) Tensor
	// Reshape views the same data with another row length (cols must divide).
	Reshape(t Tensor, rows, cols int) Tensor
	NewKVCache(spec KVSpec) (KVCache, error)

	Embed(out, table Tensor, ids []int32)
	RMSNorm(out, x, w Tensor, eps float32)
	MatMul(out, x, w Tensor) // out[r,o] = Σ_i x[r,i]·w[o,i]
	Add(out, a, b Tensor)
	SwiGLU(out, gate, up Tensor) // out = silu(gate)·up
	RoPE(x Tensor, heads int, pos []int32, r *Rope)
	// Attention stores k and v ([T, kvHeads*headDim]) of every token in the
	// cache, then writes causal GQA attention of q ([T, heads*headDim]) to out.
	// q is an input only: its contents afterwards are unspecified (a backend
	// may fold q's pending norm and rotation into the attention and not
	// write them back), so callers must not read it after the call.
	Attention(out, q, k, v Tensor, cache KVCache, layer int, b *AttnBatch, scale float32)
	MoE(out, x Tensor, m *MoE)
	// Gather copies rows idx of x into out.
	Gather(out, x Tensor, idx []int32)
	// ReadRows copies t's first len(dst)/cols rows to host memory.
	ReadRows(t Tensor, dst []float32)
}
