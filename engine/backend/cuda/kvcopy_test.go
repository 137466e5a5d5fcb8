package cuda

import (
	"bytes"
	"slices"
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

// TestKVBlockCopy: a block read to host bytes and written into another block
// reads back identically, and attention over either block gives identical
// output (the bytes carry every layer's K and V in the pool's layout).
func TestKVBlockCopy(t *testing.T) {
	b := gpu(t)
	r := newRand(t)
	defer func(on bool) { kvCopyEnabled = on }(kvCopyEnabled)
	kvCopyEnabled = true
	const kvh, G, hd = 2, 4, 64
	spec := backend.KVSpec{Layers: 2, Blocks: 8, KVHeads: kvh, HeadDim: hd}
	kc, err := b.NewKVCache(spec)
	if err != nil {
		t.Fatal(err)
	}
	c := kc.(*kvCache)
	b.FillKV(c, uint32(r.Uint64()), 1)
	n := c.BlockBytes()
	if n != 2*spec.Layers*backend.BlockSize*kvh*hd*2 {
		t.Fatalf("BlockBytes %d", n)
	}
	src := make([]byte, n)
	for i := range src {
		src[i] = 0xAB // poison: ReadBlock must overwrite every byte
	}
	c.ReadBlock(3, src)
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	if bytes.Count(src, []byte{0xAB, 0xAB}) > n/64 || bytes.Count(src, []byte{0, 0}) > n/4 {
		t.Fatalf("block 3 read back as poison or zeros")
	}
	other := make([]byte, n)
	c.ReadBlock(5, other)
	if bytes.Equal(other, src) {
		t.Fatal("blocks 3 and 5 hold the same random bytes before the copy")
	}
	c.WriteBlock(5, src)
	got := make([]byte, n)
	c.ReadBlock(5, got)
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	if !bytes.Equal(got, src) {
		t.Fatal("block 5 after WriteBlock differs from the bytes written")
	}
	// Two sequences, one on block 3, one on block 5, each one token at the
	// block's last slot with the same q, k and v: every earlier slot is read
	// from the copied block, so the outputs must be identical.
	heads := kvh * G
	ab := &backend.AttnBatch{Blocks: [][]int32{{3}, {5}}, Seq: []int32{0, 1}, Pos: []int32{63, 63}}
	for layer := 0; layer < spec.Layers; layer++ {
		twice := func(cols int, scale float32) backend.Tensor {
			row := make([]float32, cols)
			for i := range row {
				row[i] = (r.Float32()*2 - 1) * scale
			}
			x := b.Alloc(2, cols)
			write(t, b, x, append(append([]float32(nil), row...), row...))
			return x
		}
		q, k, v := twice(heads*hd, 2), twice(kvh*hd, 2), twice(kvh*hd, 1)
		o := b.Alloc(2, heads*hd)
		b.Attention(o, q, k, v, c, layer, ab, 0.125)
		res := read(t, b, o)
		if !slices.Equal(res[:heads*hd], res[heads*hd:]) {
			t.Fatalf("layer %d: attention over the copied block differs from the original", layer)
		}
	}
}
