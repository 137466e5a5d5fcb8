package engine

import (
	"fmt"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/prefix"
	"github.com/infernix/infernix/engine/sched"
)

// Persister is the data directory as the engine sees it: it opens the
// persistent tier of the prefix cache for one model fingerprint. store/
// implements it and cmd wires it in, so the engine never depends on the
// storage engine. The engine owns it after Load and closes it in Close.
type Persister interface {
	OpenPrefix(fingerprint []byte, blockBytes int) (PrefixTier, error)
	Close() error
}

// SnapshotPersister is an optional capability of a Persister: it keeps
// hybrid models' recurrent-state snapshots (for prefix reuse) across
// restarts.
type SnapshotPersister interface {
	OpenSnapshots(fingerprint []byte) sched.SnapshotDisk
}

// PrefixTier is one model's persistent prefix-cache tier.
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
	if !prefix.Reusable(e.Model) {
		// Hybrid models resume from KV blocks plus a state snapshot: both
		// must persist, or neither helps after a restart.
		sp, ok := opt.Persist.(SnapshotPersister)
		if !ok {
			return nil
		}
		sc.SnapshotDisk = sp.OpenSnapshots(sc.PrefixSeed)
	}
	owner, ok := e.Model.(backend.KVCacheOwner)
	if !ok {
		return nil
	}
	kc, ok := owner.KVCache().(backend.KVBlockCopier)
	if !ok {
		return nil
	}
	tier, err := opt.Persist.OpenPrefix(sc.PrefixSeed, kc.BlockBytes())
	if err != nil {
		return fmt.Errorf("prefix cache: %w", err)
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
