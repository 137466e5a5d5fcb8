package cpu

import (
	"fmt"
	"math"

	"github.com/infernix/infernix/engine/backend"
)

var _ backend.RowSampler = (*Backend)(nil)

// SampleLimits: the CPU samples any request, masks too, with the host sampler
// (backend.RowSampler).
func (b *Backend) SampleLimits() backend.SampleLimits {
	return backend.SampleLimits{Rows: math.MaxInt32, MaxLogprobs: math.MaxInt32, MaxBias: math.MaxInt32, Masks: true}
}

// SampleRows runs the host sampler on the logits rows where they are, so
// that a model on the CPU serves model.Sampling with exactly the engine's
// host path (backend.SampleHost) and no copy of the logits.
func (b *Backend) SampleRows(logits backend.Tensor, req []backend.SampleRequest, out []backend.SampleResult) error {
	t := f32(logits)
	if t.dt != backend.F32 || len(req) > t.rows || len(out) < len(req) {
		panic(fmt.Sprintf("cpu: SampleRows of %d requests from a %d×%d %v tensor into %d results", len(req), t.rows, t.cols, t.dt, len(out)))
	}
	backend.SampleHost(t.f32[:len(req)*t.cols], t.cols, req, out)
	return nil
}
