package engine

import (
	"fmt"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/prefix"
	"github.com/infernix/infernix/engine/sched"
)

// Persister is the data directory as the engine sees it: it opens the
// persistent tier of the prefix cache for one model fingerprint. When to
// save is the scheduler's (sched.Config.SaveInterval); the tier writes in the
// background and Close writes what it still holds. store/
// implements it and cmd wires it in, so the engine never depends on the
// storage engine. The engine owns it after Load and closes it in Close.
type Persister interface {
	OpenPrefix(fingerprint []byte, blockBytes int) (PrefixTier, error)
	Close() error
}

// PrefixTier is one model's persistent prefix-cache tier. For hybrid models
// it must also keep their recurrent-state snapshots (sched.SnapshotDisk, as
// store.PrefixStore does): KV blocks without the state at their end cannot
// be resumed from.
type PrefixTier interface {
	prefix.Disk
	Close()
}

// openStore sets up the host pool (--host-cache-mib) and, unless prefix
// reuse is off, the persistent prefix-cache tier for this model's
// fingerprint. The tier needs a model that exposes its KV pool
// (backend.KVCacheOwner) on a backend that copies blocks
// (backend.KVBlockCopier); otherwise the prefix cache stays in memory.
func (e *Engine) openStore(opt Options, sc *sched.Config) error {
	if opt.HostCacheMiB > 0 && !sc.NoPrefixReuse {
		sc.PrefixHost = prefix.NewHostPool(int64(opt.HostCacheMiB) << 20)
	}
	e.Persist = opt.Persist
	if opt.Persist == nil || sc.NoPrefixReuse {
		return nil
	}
	owner, ok := e.Model.(backend.KVCacheOwner)
	if !ok {
		return nil
	}
	kc, ok := owner.KVCache().(backend.KVBlockCopier)
	if !ok || kc.BlockBytes() == 0 {
		return nil
	}
	sc.PrefixSeed = formatSeed(sc.PrefixSeed, kc)
	tier, err := opt.Persist.OpenPrefix(sc.PrefixSeed, kc.BlockBytes())
	if err != nil {
		return fmt.Errorf("prefix cache: %w", err)
	}
	if !prefix.Reusable(e.Model) {
		// Hybrid models resume from KV blocks plus a state snapshot: both
		// must persist, or neither helps after a restart.
		snaps, ok := tier.(sched.SnapshotDisk)
		if !ok {
			tier.Close()
			return nil
		}
		sc.SnapshotDisk = snaps
	}
	e.PrefixTier = tier
	sc.PrefixDisk = tier
	return nil
}

// closeStore writes queued prefix blocks and closes the data directory.
func (e *Engine) closeStore() error {
	if e.PrefixTier != nil {
		e.PrefixTier.Close()
	}
	if e.Persist != nil {
		return e.Persist.Close()
	}
	return nil
}

// formatSeed extends a model's prefix-cache seed with the block encoding of
// a cache that names one (backend.KVBlockFormatter): another encoding of the
// same model's blocks is another cache, in memory and on disk. seed itself
// is not modified.
func formatSeed(seed []byte, kc backend.KVBlockCopier) []byte {
	f, ok := kc.(backend.KVBlockFormatter)
	if !ok {
		return seed
	}
	out := append([]byte(nil), seed...)
	return append(append(out, 0), f.BlockFormat()...)
}
