package cpu

import (
	"bytes"
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

func TestKVBlockCopyRoundTrip(t *testing.T) {
	be := New(1)
	kc, err := be.NewKVCache(backend.KVSpec{Layers: 2, Blocks: 3, KVHeads: 2, HeadDim: 4})
	if err != nil {
		t.Fatal(err)
	}
	c := kc.(backend.KVBlockCopier)
	if got, want := c.BlockBytes(), 2*2*64*2*4*4; got != want {
		t.Fatalf("BlockBytes %d, want %d", got, want)
	}
	src := make([]byte, c.BlockBytes())
	for i := range src {
		src[i] = byte(i * 7)
	}
	c.WriteBlock(1, src)
	got := make([]byte, c.BlockBytes())
	c.ReadBlock(1, got)
	if !bytes.Equal(got, src) {
		t.Fatal("block 1 read back differs")
	}
	// Neighbours are untouched.
	zero := make([]byte, c.BlockBytes())
	for _, b := range []int32{0, 2} {
		c.ReadBlock(b, got)
		if !bytes.Equal(got, zero) {
			t.Fatalf("block %d was written", b)
		}
	}
}
