package model

import (
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

type shapeOnly struct {
	shape []int
	dt    backend.DType
}

func (s *shapeOnly) Shape() []int         { return s.shape }
func (s *shapeOnly) DType() backend.DType { return s.dt }

func TestUnreadPerToken(t *testing.T) {
	bf := func(shape ...int) backend.Tensor { return &shapeOnly{shape, backend.BF16} }
	embed := bf(1000, 64) // 128,000 bytes, 128 a row
	head := bf(1000, 64)
	experts := func(n int) []backend.Tensor {
		ts := make([]backend.Tensor, n)
		for i := range ts {
			ts[i] = bf(48, 64) // 6,144 bytes
		}
		return ts
	}
	moe := &backend.MoE{TopK: 2, Router: bf(8, 64), Gate: experts(8), Up: experts(8), Down: experts(8),
		SharedGate: bf(48, 64)}
	dense := &backend.MoE{TopK: 8, Gate: experts(8), Up: experts(8), Down: experts(8)} // every expert chosen
	for _, tc := range []struct {
		name        string
		embed, head backend.Tensor
		moes        []*backend.MoE
		want        int64
	}{
		{"tied", embed, embed, nil, 0},
		{"untied", embed, head, nil, 128000 - 128},
		{"moe layers and a dense one", embed, embed, []*backend.MoE{moe, nil, moe, dense}, 2 * 6 * 3 * 6144},
		{"untied moe", embed, head, []*backend.MoE{moe}, 128000 - 128 + 6*3*6144},
		{"no embedding", nil, head, nil, 0},
	} {
		if got := UnreadPerToken(tc.embed, tc.head, tc.moes...); got != tc.want {
			t.Errorf("%s: %d bytes unread, want %d", tc.name, got, tc.want)
		}
	}
}

func TestTensorBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		ts   []backend.Tensor
		want int64
	}{
		{"bf16 matrix", []backend.Tensor{&shapeOnly{[]int{3, 5}, backend.BF16}}, 30},
		{"f32 vector", []backend.Tensor{&shapeOnly{[]int{7}, backend.F32}}, 28},
		{"q8_0 rows", []backend.Tensor{&shapeOnly{[]int{2, 64}, backend.Q8_0}}, 2 * 2 * 34},
		{"3-d and nil", []backend.Tensor{&shapeOnly{[]int{2, 3, 4}, backend.F16}, nil}, 48},
	} {
		if got := TensorBytes(tc.ts...); got != tc.want {
			t.Errorf("%s: %d bytes, want %d", tc.name, got, tc.want)
		}
	}
}
