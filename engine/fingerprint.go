package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

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
		var n [8]byte
		for _, name := range set.Names() {
			t := set.Get(name)
			fmt.Fprintf(h, "\x00%s:%s:%v:", name, t.DType, t.Shape)
			binary.LittleEndian.PutUint64(n[:], uint64(len(t.Data)))
			h.Write(n[:])
			d := t.Data
			if len(d) <= 2*fingerprintSample {
				h.Write(d)
			} else {
				h.Write(d[:fingerprintSample])
				h.Write(d[len(d)-fingerprintSample:])
			}
		}
	}
	return h.Sum(nil)
}
