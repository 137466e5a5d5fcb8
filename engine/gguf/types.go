package gguf

import (
	"fmt"
	"strings"
)

// Type is a ggml tensor type (ggml_type).
type Type uint32

// The ggml types this package reads. Others (the IQ and ternary formats)
// are recognised by number only so that errors can name what was found.
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q8_1 Type = 9
	Q2_K Type = 10
	Q3_K Type = 11
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	Q8_K Type = 15
	I8   Type = 24
	I16  Type = 25
	I32  Type = 26
	I64  Type = 27
	F64  Type = 28
	BF16 Type = 30
)

// typeInfo is a type's block: elements per block and bytes per block.
type typeInfo struct {
	name  string
	block int
	bytes int
}

// qk is QK_K, the super-block of the k-quants.
const qk = 256

var types = map[Type]typeInfo{
	F32:  {"F32", 1, 4},
	F16:  {"F16", 1, 2},
	BF16: {"BF16", 1, 2},
	Q4_0: {"Q4_0", 32, 18},
	Q4_1: {"Q4_1", 32, 20},
	Q5_0: {"Q5_0", 32, 22},
	Q5_1: {"Q5_1", 32, 24},
	Q8_0: {"Q8_0", 32, 34},
	Q2_K: {"Q2_K", qk, 84},
	Q3_K: {"Q3_K", qk, 110},
	Q4_K: {"Q4_K", qk, 144},
	Q5_K: {"Q5_K", qk, 176},
	Q6_K: {"Q6_K", qk, 210},
}

// otherNames names types that exist in ggml but that this package does not
// decode, for error messages.
var otherNames = map[Type]string{
	Q8_1: "Q8_1", Q8_K: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S",
	20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", I8: "I8", I16: "I16", I32: "I32",
	I64: "I64", F64: "F64", 29: "IQ1_M", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
}

func (t Type) String() string {
	if ti, ok := types[t]; ok {
		return ti.name
	}
	if n, ok := otherNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Supported reports whether Dequantize reads t.
func (t Type) Supported() bool { _, ok := types[t]; return ok }

// BlockSize is the number of elements a block of t holds (1 for plain types).
func (t Type) BlockSize() int { return types[t].block }

// RowBytes is the size of n elements of t; n must be a multiple of BlockSize.
func (t Type) RowBytes(n int) int {
	ti := types[t]
	return n / ti.block * ti.bytes
}

// SupportedTypes lists the types Dequantize reads, for error messages.
func SupportedTypes() string {
	return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K"
}

// ParseType reads a type name as llama.cpp's tools write it ("q4_k", "Q8_0").
func ParseType(s string) (Type, bool) {
	for t, ti := range types {
		if strings.EqualFold(ti.name, s) {
			return t, true
		}
	}
	return 0, false
}
