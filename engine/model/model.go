// Package model defines what an architecture provides to the engine, the
// registry architectures add themselves to, and the pieces every architecture
// shares: Hugging Face config parsing, weight loading with validation, rotary
// tables.
package model

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/infernix/infernix/engine/backend"
)

// Batch is one forward call: a flat list of tokens from one or more sequences
// (prefill chunks and decode steps mixed), their positions and block tables,
// and which token rows need logits.
type Batch struct {
	Tokens  []int32
	Attn    backend.AttnBatch
	Outputs []int32 // indices into Tokens whose next-token logits are wanted
}

// Model is a loaded architecture bound to a backend. Forward is called from
// the device goroutine only.
type Model interface {
	Config() *Config
	// Forward runs the batch and writes len(b.Outputs)×VocabSize logits to dst.
	Forward(b *Batch, dst []float32) error
	// MaxBatchTokens is the most tokens one Forward accepts.
	MaxBatchTokens() int
	// KVBlocks is the number of KV blocks the model's cache holds.
	KVBlocks() int
}

// Sampling is an optional capability of models whose backend chooses tokens
// where the logits are (backend.RowSampler): ForwardSample is Forward
// followed by sampling, and only tokens and requested log-probabilities
// reach the host. The scheduler finds it by type assertion and uses it for
// a step when SampleLimits serves every output row; otherwise (prompt
// log-probs, which need whole rows; more alternatives or logit_bias entries
// than the device handles; a backend without the capability) it calls
// Forward and samples on the host. Both paths give the same tokens for the
// same seeds (see backend.RowSampler's implementations for how exactly).
type Sampling interface {
	// SampleLimits says which requests ForwardSample serves; the zero value
	// means none (the backend cannot sample, or it is switched off).
	SampleLimits() backend.SampleLimits
	// ForwardSample runs the batch and serves req[i] from the logits of
	// b.Outputs[i] into out[i] (len(req) == len(b.Outputs) <= len(out)).
	ForwardSample(b *Batch, req []backend.SampleRequest, out []backend.SampleResult) error
}

// Options size a model's run-time buffers.
type Options struct {
	KVBlocks       int // KV cache blocks of backend.BlockSize tokens
	MaxBatchTokens int // largest Forward (prefill chunk + decode lanes)
}

// Builder constructs an architecture from its config and weights.
type Builder func(cfg *Config, w WeightSource, be backend.Backend, opt Options) (Model, error)

var (
	regMu    sync.RWMutex
	registry = map[string]Builder{}
)

// Register adds an architecture under its config.json `architectures` name.
// It is called from init functions; registering a name twice panics.
func Register(arch string, b Builder) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[arch]; dup {
		panic("model: architecture registered twice: " + arch)
	}
	registry[arch] = b
}

// Lookup returns the builder for arch, or an error listing what is supported.
func Lookup(arch string) (Builder, error) {
	regMu.RLock()
	defer regMu.RUnlock()
	if b, ok := registry[arch]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("architecture %q is not supported (supported: %s)", arch, strings.Join(supportedLocked(), ", "))
}

// Supported lists the registered architectures.
func Supported() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	return supportedLocked()
}

func supportedLocked() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
