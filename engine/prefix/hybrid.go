package prefix

import "github.com/infernix/infernix/engine/model"

// StateSnapshots is the hook for hybrid models (Gated DeltaNet layers keep a
// recurrent and a convolution state per sequence besides attention KV). KV
// blocks alone cannot resume such a sequence: the recurrent state after the
// reused prefix is needed too. Until the scheduler drives this interface
// (calls SnapshotAt at block boundaries and RestoreFrom at admission), hybrid
// models get no reuse at all (see Reusable), so results never depend on the
// cache.
//
// Contract (to be implemented by the hybrid architecture; not implemented
// yet):
//   - SnapshotAt is called on the device goroutine right after the forward in
//     which sequence seq (index into that batch's block tables) computed its
//     tokens up to a block boundary; it saves the sequence's recurrent state
//     under key and returns false if it chose not to (memory bound).
//   - RestoreFrom loads the state saved under key into the lane about to
//     compute from that boundary (block table blocks) and reports whether it
//     was still there; a lookup resumes from the deepest block that has both
//     KV and a snapshot.
//   - DropSnapshot frees a snapshot (its block was evicted, or a conversation
//     moved past an endpoint it never resumed from).
type StateSnapshots interface {
	SnapshotAt(key Key, seq int) bool
	RestoreFrom(key Key, blocks []int32) bool
	DropSnapshot(key Key)
}

// Reusable reports whether m's sequences can resume from cached KV blocks:
// models with only full-attention layers can; hybrid ones (any other layer
// type, a full-attention interval, linear-attention heads, also in a nested
// text_config) cannot until StateSnapshots is wired into the scheduler.
func Reusable(m model.Model) bool { return !hybrid(m.Config()) }

func hybrid(c *model.Config) bool {
	if c == nil {
		return false
	}
	for _, t := range c.LayerTypes {
		if t != "full_attention" && t != "" {
			return true
		}
	}
	return c.FullAttentionInterval > 1 || c.LinearNumKeyHeads > 0 || c.LinearConvKernelDim > 0 || hybrid(c.TextConfig)
}
