package backend

// Recurrent is the optional capability hybrid models (Qwen3-Next, Qwen3.5)
// need for their Gated DeltaNet linear-attention layers; a model finds it by
// type assertion on its Backend.
//
// Per-sequence state lives in pool tensors with one region per state slot:
//   - conv state: [slots*(K-1), C], the last K-1 conv inputs of the sequence;
//   - recurrent state: [slots*VHeads*VDim, KDim], per value head the
//     transpose (VDim×KDim) of transformers' KDim×VDim state matrix, so both
//     the read-out and the update run along contiguous rows.
//
// A sequence's slot is b.Slots[seq] (nil Slots: the sequence index). A
// sequence whose first token in the batch has position 0 starts from zero
// state (so a recomputed or preempted sequence needs no explicit reset);
// otherwise it continues from the state its slot holds, which must be the
// state after exactly that many tokens.
type Recurrent interface {
	// CausalConv1D writes silu(depthwise causal conv(x)) to out (both
	// [T, C], out ≠ x) with kernel w ([C, K]), continuing each sequence
	// from its conv state and leaving there its last K-1 inputs.
	CausalConv1D(out, x, w, state Tensor, b *AttnBatch)
	// GatedDeltaRule runs the gated delta rule over the conv output qkv
	// ([T, 2*KHeads*KDim + VHeads*VDim]: all q heads, all k heads, all v
	// heads) with per-token raw gates a, bt ([T, VHeads]) and the layer's
	// aLog, dtBias ([VHeads]): q and k are L2-normalised, q scaled by
	// KDim^-½, decay g = -exp(A_log)·softplus(a+dt_bias), beta =
	// sigmoid(bt); value head h reads key head h/(VHeads/KHeads). It writes
	// out ([T, VHeads*VDim]) and updates the recurrent state.
	GatedDeltaRule(out, qkv, a, bt, aLog, dtBias, state Tensor, b *AttnBatch, s GDNSpec)
	// RMSNormGated: out = rmsnorm(x)·w·silu(z) row by row (x, z, out
	// [R, len(w)]; out may be x).
	RMSNormGated(out, x, z, w Tensor, eps float32)
	// MulSigmoid: out = x·sigmoid(gate), elementwise (out may be x).
	MulSigmoid(out, x, gate Tensor)
	// SliceCols views x's rows as groups equal blocks and copies columns
	// [off, off+width) of every block to out: out[r, g*width+j] =
	// x[r, g*(x.cols/groups)+off+j].
	SliceCols(out, x Tensor, groups, off, width int)
	// ReadStateRows / WriteStateRows copy rows [row, row+len/cols) of a state
	// pool to or from host memory (snapshots).
	ReadStateRows(t Tensor, row int, dst []float32)
	WriteStateRows(t Tensor, row int, src []float32)
}

// GDNShapeChecker is optional: a backend whose Recurrent operators run only
// some layer shapes says whether it runs s, so that a model fails at load
// with the reason rather than at its first forward.
type GDNShapeChecker interface {
	CheckGDN(s GDNSpec) error
}

// GDNSpec sizes a Gated DeltaNet layer and picks the algorithm.
type GDNSpec struct {
	KHeads, VHeads int
	KDim, VDim     int
	// Chunk > 0 lets the backend use the chunked form (chunks of Chunk
	// tokens) for runs of more than one token of a sequence; it equals the
	// recurrent form up to rounding. 0 forces the recurrent form.
	Chunk int
}

// Slot returns sequence s's state slot in b.
func (b *AttnBatch) Slot(s int32) int {
	if b.Slots == nil {
		return int(s)
	}
	return int(b.Slots[s])
}
