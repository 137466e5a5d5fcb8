package model

import (
	"fmt"

	"github.com/infernix/infernix/engine/backend"
)

// Head gives an architecture its Forward, SampleLimits and ForwardSample
// from one function, Run, that computes a batch up to the LM head and
// returns the logits of b.Outputs on the backend (nil when there are none),
// not yet read back. Architectures embed it and set it when built.
type Head struct {
	Be    backend.Backend
	Vocab int
	Run   func(b *Batch) (backend.Tensor, error)
}

// Forward reads the logits back to dst (Model).
func (h *Head) Forward(b *Batch, dst []float32) error {
	if len(dst) < len(b.Outputs)*h.Vocab {
		return fmt.Errorf("logits buffer too small")
	}
	logits, err := h.Run(b)
	if err != nil || logits == nil {
		return err
	}
	h.Be.ReadRows(logits, dst[:len(b.Outputs)*h.Vocab])
	return h.checkBackend()
}

// SampleLimits reports what ForwardSample serves: the backend's sampling
// on the device, if it has one (Sampling).
func (h *Head) SampleLimits() backend.SampleLimits {
	if rs, ok := h.Be.(backend.RowSampler); ok {
		return rs.SampleLimits()
	}
	return backend.SampleLimits{}
}

// ForwardSample is Forward with the tokens chosen by the backend (Sampling).
func (h *Head) ForwardSample(b *Batch, req []backend.SampleRequest, out []backend.SampleResult) error {
	rs, ok := h.Be.(backend.RowSampler)
	if !ok {
		return fmt.Errorf("backend %s cannot sample", h.Be.Name())
	}
	if len(req) != len(b.Outputs) || len(out) < len(req) {
		return fmt.Errorf("%d sampling requests and %d results for %d outputs", len(req), len(out), len(b.Outputs))
	}
	logits, err := h.Run(b)
	if err != nil || logits == nil {
		return err
	}
	if err := rs.SampleRows(logits, req, out); err != nil {
		return fmt.Errorf("sampling: %w", err)
	}
	return h.checkBackend()
}

// checkBackend returns a device backend's asynchronous failure, reported
// after the forward's synchronisation rather than per operator.
func (h *Head) checkBackend() error {
	if c, ok := h.Be.(backend.Checker); ok {
		if err := c.Err(); err != nil {
			return fmt.Errorf("forward pass: %w", err)
		}
	}
	return nil
}
