package cuda

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// Block copies between the device KV pool and host bytes, for the prefix
// cache's host pool and its persistence on disk (backend.KVBlockCopier).
// A block's bytes are, for each layer, its K then its V region: one block
// of one layer is contiguous in the pool (slot-major within the block, as
// the attention kernels index it), so a block is 2·layers copies.
//
// On unless INFERNIX_CUDA_KV_COPY=0 (BlockBytes is then 0 and the engine
// keeps the prefix cache in device memory only). On the GPU (run 10):
// TestKVBlockCopy, the demo models' end-to-end tests and the prefix cache
// across an engine restart (read back from Badger into the device pool).
//
// The bytes are the cache's own elements, bf16 or f16 (INFERNIX_CUDA_KV):
// both 2 bytes, so BlockBytes is the same for either; BlockFormat names the
// type, and the engine keys persisted blocks by it, so blocks saved under
// one type are never read back under the other.

var (
	_ backend.KVBlockCopier    = (*kvCache)(nil)
	_ backend.KVBlockFormatter = (*kvCache)(nil)
)

// BlockFormat names the bytes' encoding: the element type and the layout
// (per layer K then V, slot-major within a block).
func (c *kvCache) BlockFormat() string { return "cuda-kv1-" + c.dt.String() }

var kvCopyEnabled = os.Getenv("INFERNIX_CUDA_KV_COPY") != "0"

// blockLayerBytes is one block's K (or V) in one layer (2-byte elements
// whichever the type).
func (c *kvCache) blockLayerBytes() int {
	return backend.BlockSize * c.spec.KVHeads * c.spec.HeadDim * 2
}

func (c *kvCache) BlockBytes() int {
	if !kvCopyEnabled {
		return 0
	}
	return 2 * c.spec.Layers * c.blockLayerBytes()
}

// regions calls f with each device region of block in byte order.
func (c *kvCache) regions(block int32, f func(off int, src driver.DevPtr, n int)) {
	n := c.blockLayerBytes()
	at := driver.DevPtr(int(block) * n)
	off := 0
	for l := range c.k {
		f(off, c.k[l]+at, n)
		off += n
		f(off, c.v[l]+at, n)
		off += n
	}
}

func (c *kvCache) checkBlock(block int32, buf []byte) bool {
	return block >= 0 && int(block) < c.spec.Blocks && len(buf) == 2*c.spec.Layers*c.blockLayerBytes()
}

// ReadBlock copies block to dst after the work queued so far (held
// operators included) has finished, through the page-locked output buffer.
func (c *kvCache) ReadBlock(block int32, dst []byte) {
	b := c.b
	if !c.checkBlock(block, dst) {
		panic(fmt.Sprintf("cuda: ReadBlock %d into %d bytes (blocks %d, block bytes %d)", block, len(dst), c.spec.Blocks, 2*c.spec.Layers*c.blockLayerBytes()))
	}
	b.sync()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if b.err != nil || !b.bind() {
		return
	}
	if len(dst) > b.out.size {
		b.needEager()
		if err := b.out.ensure(b, len(dst)); err != nil {
			b.fail(err)
			return
		}
	}
	c.regions(block, func(off int, src driver.DevPtr, n int) {
		if b.err == nil {
			b.fail(b.drv.DtoHAsync(unsafe.Add(b.out.p, off), src, uint64(n), b.stream))
		}
	})
	b.fail(b.drv.StreamSynchronize(b.stream))
	if b.err == nil {
		copy(dst, unsafe.Slice((*byte)(b.out.p), len(dst)))
	}
}

// WriteBlock overwrites block with src; it returns when the copy is done.
func (c *kvCache) WriteBlock(block int32, src []byte) {
	b := c.b
	if !c.checkBlock(block, src) {
		panic(fmt.Sprintf("cuda: WriteBlock %d from %d bytes (blocks %d, block bytes %d)", block, len(src), c.spec.Blocks, 2*c.spec.Layers*c.blockLayerBytes()))
	}
	b.sync()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if b.err != nil || !b.bind() {
		return
	}
	c.regions(block, func(off int, dst driver.DevPtr, n int) {
		if b.err == nil {
			b.fail(b.upload(dst, src[off:off+n]))
		}
	})
}
