package backend

// KVBlockCopier is an optional capability of a KVCache: copy one block (all
// layers' K and V for its BlockSize slots) to and from host bytes, for the
// prefix cache's host pool and its persistence. The byte layout is the
// backend's own; bytes are only ever written back to a cache of the same
// backend and spec (the prefix store keys them by model fingerprint and
// BlockBytes). Called on the device goroutine only.
type KVBlockCopier interface {
	// BlockBytes is the size of one block's bytes; 0 means this cache
	// cannot copy blocks after all (a backend that implements the methods
	// but has the capability switched off).
	BlockBytes() int
	// ReadBlock copies block's contents into dst (len BlockBytes).
	ReadBlock(block int32, dst []byte)
	// WriteBlock overwrites block's contents with src (len BlockBytes).
	WriteBlock(block int32, src []byte)
}

// KVBlockFormatter is an optional capability of a KVBlockCopier whose block
// bytes can mean different things at the same size (a GPU cache in bf16 or
// f16): BlockFormat names the encoding, and the engine keys persisted blocks
// by it, so a block is never read back in another encoding.
type KVBlockFormatter interface {
	BlockFormat() string
}

// KVCacheOwner is implemented by models that expose their KV pool, so that
// the prefix cache can copy blocks in and out of it (see KVBlockCopier).
type KVCacheOwner interface {
	KVCache() KVCache
}
