package prefix

// Disk is the persistent tier of the cache (store.PrefixStore implements it
// with Badger). Its entries are already scoped to one model fingerprint and
// block layout. Implementations are safe for concurrent use.
type Disk interface {
	// Has reports whether a block with key is stored (an in-memory index:
	// cheap enough for every lookup).
	Has(key Key) bool
	// Load reads the block's bytes into dst (BlockBytes long), verifying its
	// checksum; a corrupt or missing entry is an error (and a corrupt one is
	// dropped).
	Load(key Key, dst []byte) error
	// Save queues the block's bytes for writing in the background; it copies
	// data and never blocks (a full queue or a paused store drops the block).
	// When to save is the caller's choice (engine/sched: as soon as a block
	// is made, or every --prefix-cache-save-mins).
	Save(key Key, data []byte)
	// Accepting reports whether a Save now would be kept, so that the
	// scheduler copies a block off the device only when it will be written.
	Accepting() bool
}

// Flusher is an optional capability of a Disk that writes in the background
// (store.PrefixStore): Flush returns once everything saved before it is
// written. The scheduler calls it on shutdown, and when the write queue is
// full while it must save everything.
type Flusher interface {
	Flush()
}

// DiskStats are a persistent tier's counters for /metrics: the blocks and
// snapshots stored and their bytes, and since it was opened the entries
// (blocks and snapshots) written, read back, dropped unwritten (the write
// queue was full or the disk is full) and evicted (over the size cap).
type DiskStats struct {
	Blocks, Snapshots               int
	Bytes                           int64
	Saved, Loaded, Dropped, Evicted uint64
}

// DiskStatsReporter is an optional capability of a Disk (store.PrefixStore):
// the server reports its counters on /metrics.
type DiskStatsReporter interface {
	DiskStats() DiskStats
}
