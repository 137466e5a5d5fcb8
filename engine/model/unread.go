package model

import "github.com/infernix/infernix/engine/backend"

// Unread is an optional capability of a model: the bytes of its loaded
// weights that a decode step of one lane does not read. A decode step's
// memory roofline divides the bandwidth by what it does read (the loaded
// bytes less these), so a benchmark that counted every loaded byte would
// flatter a model with an untied embedding table or a mixture of experts.
type Unread interface {
	UnreadPerToken() int64
}

// UnreadPerToken is the common answer: an embedding table that is not also
// the LM head is gathered one row a token, and a mixture of experts reads
// its router and shared expert whole but only top-k of its routed experts
// (counted at the routed experts' mean size).
func UnreadPerToken(embed, lmHead backend.Tensor, moes ...*backend.MoE) int64 {
	var unread int64
	if embed != nil && embed != lmHead {
		if s := embed.Shape(); len(s) == 2 && s[0] > 0 {
			unread += TensorBytes(embed) / int64(s[0]) * int64(s[0]-1)
		}
	}
	for _, m := range moes {
		if m == nil || len(m.Gate) == 0 || m.TopK >= len(m.Gate) {
			continue
		}
		routed := TensorBytes(m.Gate...) + TensorBytes(m.Up...) + TensorBytes(m.Down...)
		E := int64(len(m.Gate))
		unread += routed - routed*int64(m.TopK)/E
	}
	return unread
}

// TensorBytes is the resident size of weights by their shapes and types
// (nil entries count nothing).
func TensorBytes(ts ...backend.Tensor) int64 {
	var n int64
	for _, t := range ts {
		if t == nil {
			continue
		}
		s := t.Shape()
		if len(s) == 0 {
			continue
		}
		rows := int64(1)
		for _, d := range s[:len(s)-1] {
			rows *= int64(d)
		}
		n += rows * int64(t.DType().RowBytes(s[len(s)-1]))
	}
	return n
}
