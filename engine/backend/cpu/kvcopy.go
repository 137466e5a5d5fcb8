package cpu

import (
	"encoding/binary"
	"math"

	"github.com/infernix/infernix/engine/backend"
)

var _ backend.KVBlockCopier = (*kvCache)(nil)

// blockFloats is the number of float32 of one layer's K (or V) in one block.
func (c *kvCache) blockFloats() int { return backend.BlockSize * c.spec.KVHeads * c.spec.HeadDim }

// BlockBytes: per layer K then V, little-endian float32.
func (c *kvCache) BlockBytes() int { return c.spec.Layers * 2 * c.blockFloats() * 4 }

func (c *kvCache) ReadBlock(block int32, dst []byte) {
	n := c.blockFloats()
	off := int(block) * n
	p := 0
	for l := range c.k {
		for _, src := range [2][]float32{c.k[l][off : off+n], c.v[l][off : off+n]} {
			for _, f := range src {
				binary.LittleEndian.PutUint32(dst[p:], math.Float32bits(f))
				p += 4
			}
		}
	}
}

func (c *kvCache) WriteBlock(block int32, src []byte) {
	n := c.blockFloats()
	off := int(block) * n
	p := 0
	for l := range c.k {
		for _, dst := range [2][]float32{c.k[l][off : off+n], c.v[l][off : off+n]} {
			for i := range dst {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[p:]))
				p += 4
			}
		}
	}
}
