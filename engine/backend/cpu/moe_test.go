package cpu

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

func weightF32(t *testing.T, b *Backend, rows, cols int, v ...float32) backend.Tensor {
	t.Helper()
	buf := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
	}
	w, err := b.Upload("w", backend.F32, []int{rows, cols}, buf)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestRoutingMargins: with routing watched, each token row reports the
// router-logit gap between its last chosen expert and the best unchosen one,
// the smallest over MoE calls; unwatched, nothing is recorded.
func TestRoutingMargins(t *testing.T) {
	b := New(1)
	// Router logits: token 0 → [1.0, 0.9, 0.0] (top-1 margin 0.1),
	// token 1 → [0.0, 0.5, 0.2] (margin 0.3).
	m := &backend.MoE{Router: weightF32(t, b, 3, 2, 1.0, 0, 0.9, 0.5, 0, 0.2), TopK: 1}
	for e := 0; e < 3; e++ {
		m.Gate = append(m.Gate, weightF32(t, b, 1, 2, 1, 1))
		m.Up = append(m.Up, weightF32(t, b, 1, 2, 1, 1))
		m.Down = append(m.Down, weightF32(t, b, 2, 1, 1, 1))
	}
	x := b.Alloc(2, 2)
	copy(x.(*Tensor).F32(), []float32{1, 0, 0, 1})
	out := b.Alloc(2, 2)

	b.MoE(out, x, m)
	if got := b.RoutingMargins(); len(got) != 0 {
		t.Fatalf("margins recorded without WatchRouting: %v", got)
	}
	b.WatchRouting()
	b.MoE(out, x, m)
	got := b.RoutingMargins()
	want := []float64{0.1, 0.3}
	if len(got) != 2 || math.Abs(got[0]-want[0]) > 1e-6 || math.Abs(got[1]-want[1]) > 1e-6 {
		t.Fatalf("margins %v, want %v", got, want)
	}
	// A second layer with a closer call for token 1 lowers its margin only.
	m2 := *m
	m2.Router = weightF32(t, b, 3, 2, 1.0, 0, 0.0, 0.25, 0, 0.2) // token 1 → [0, 0.25, 0.2]: 0.05
	b.MoE(out, x, &m2)
	got = b.RoutingMargins()
	if math.Abs(got[0]-0.1) > 1e-6 || math.Abs(got[1]-0.05) > 1e-6 {
		t.Fatalf("after a second layer: margins %v, want [0.1 0.05]", got)
	}
	b.WatchRouting()
	if len(b.RoutingMargins()) != 0 {
		t.Fatal("WatchRouting did not start afresh")
	}
}
