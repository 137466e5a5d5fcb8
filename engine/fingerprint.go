package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"

	"github.com/infernix/infernix/engine/gguf"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/safetensors"
)

// fingerprintSample is how many bytes of each tensor's start and end enter
// the fingerprint: enough to tell apart fine-tunes and quantizations without
// reading gigabytes at startup.
const fingerprintSample = 64

// Fingerprint identifies a model's numerics for the prefix cache: its
// config.json, and each tensor's name, dtype, shape and sampled bytes (nil
// set: synthetic weights, identified by the seed). Cached KV computed under
// one fingerprint is never served under another.
func Fingerprint(cfg *model.Config, set *safetensors.Set, syntheticSeed int64) []byte {
	h := sha256.New()
	h.Write([]byte("infernix-model-v1\x00"))
	h.Write(cfg.Raw())
	if set == nil {
		fmt.Fprintf(h, "\x00synthetic:%d", syntheticSeed)
	} else {
		for _, name := range set.Names() {
			t := set.Get(name)
			hashTensor(h, fmt.Sprintf("%s:%s:%v:", name, t.DType, t.Shape), t.Data)
		}
	}
	return h.Sum(nil)
}

// FingerprintGGUF is Fingerprint for a GGUF file: the config its metadata
// gives, and each tensor's name, type, dims and sampled bytes.
func FingerprintGGUF(cfg *model.Config, f *gguf.File) []byte {
	h := sha256.New()
	h.Write([]byte("infernix-model-v1\x00gguf\x00"))
	h.Write(cfg.Raw())
	for _, t := range f.Tensors {
		hashTensor(h, fmt.Sprintf("%s:%s:%v:", t.Name, t.Type, t.Dims), t.Data)
	}
	return h.Sum(nil)
}

func hashTensor(h hash.Hash, desc string, d []byte) {
	var n [8]byte
	h.Write([]byte("\x00" + desc))
	binary.LittleEndian.PutUint64(n[:], uint64(len(d)))
	h.Write(n[:])
	if len(d) <= 2*fingerprintSample {
		h.Write(d)
	} else {
		h.Write(d[:fingerprintSample])
		h.Write(d[len(d)-fingerprintSample:])
	}
}
