package cuda

import (
	"fmt"
	"runtime"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// kvCache is the paged KV pool: per layer, K and V as 16-bit floats (dt:
// f16, or bf16 with INFERNIX_CUDA_KV=bf16) laid out
// [block][kvHead][64 slots][headDim].
type kvCache struct {
	spec backend.KVSpec
	k, v []driver.DevPtr
	b    *Backend
	dt   kvDType // fixed when the cache is made: its bytes mean nothing in the other type
}

// kvDType is the element type of a KV cache. Both take 2 bytes, so sizes,
// layouts and block copies are the same; only the kernels that convert to
// and from f32 differ (compiled per type: -DKVDT).
type kvDType uint8

const (
	// kvBF16 (the default): f32's range, 8 significant bits.
	kvBF16 kvDType = iota
	// kvF16: 11 significant bits, so 8× less rounding error than bf16 in
	// what attention reads back, but a range of ±65504: stores saturate
	// there (f32_to_f16 in kernels/prelude.cuh). Qwen3's K is RMS-normed
	// per head and stays small; V is not normalised, but projections of
	// RMS-normed activations reach nowhere near 65504 in the models run so
	// far. Off by default until a GPU run confirms the gain.
	kvF16
	numKVDTypes
)

func (d kvDType) String() string { return [...]string{"bf16", "f16"}[d] }

// define is the kernels' -D option for the type (kernels/attention.cu).
func (d kvDType) define() string { return [...]string{"KVDT=DT_BF16", "KVDT=DT_F16"}[d] }

// mergeSplitsMax is the most splits attn_merge_splits takes (MS_MAXZ in
// kernels/attention.cu).
const mergeSplitsMax = 1024

// mergeNarrowMax is the most splits' slots a launch of attn_merge_splits
// takes; more go to attn_merge_wide, which requests them in about one
// round trip instead of one per 32 (kernels/attention.cu).
const mergeNarrowMax = 64

// kvDTypeFromEnv parses INFERNIX_CUDA_KV: "" or "f16" (the default), or
// "bf16"; false for anything else (which keeps f16). f16 carries 11
// significant bits to bf16's 8 in the same two bytes: on the H200 (run 10)
// it cut the GPU-vs-CPU log-prob error of the reference fixtures from
// 0.02–0.026 to 0.001–0.008. Qwen3's K is RMS-normed per head and V is a
// projection of RMS-normed activations, far inside f16's ±65504; stores
// saturate there rather than overflow.
func kvDTypeFromEnv(v string) (kvDType, bool) {
	switch v {
	case "", "f16":
		return kvF16, true
	case "bf16":
		return kvBF16, true
	}
	return kvF16, false
}

func (c *kvCache) Spec() backend.KVSpec { return c.spec }

// LayerBytes is the device memory of one layer's K (or V).
func kvLayerBytes(s backend.KVSpec) uint64 {
	return uint64(s.Blocks) * backend.BlockSize * uint64(s.KVHeads*s.HeadDim) * 2
}

// KVBytes is the device memory a KV cache of spec takes (for planning).
func KVBytes(s backend.KVSpec) uint64 { return 2 * uint64(s.Layers) * kvLayerBytes(s) }

func (b *Backend) NewKVCache(spec backend.KVSpec) (backend.KVCache, error) {
	if spec.Layers <= 0 || spec.Blocks <= 0 || spec.KVHeads <= 0 || spec.HeadDim <= 0 {
		return nil, fmt.Errorf("cuda: KV cache spec %+v", spec)
	}
	if b.err != nil {
		return nil, b.err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.needEager()
	c := &kvCache{spec: spec, b: b, dt: b.kvDT}
	per := kvLayerBytes(spec)
	for l := 0; l < spec.Layers; l++ {
		for _, dst := range []*[]driver.DevPtr{&c.k, &c.v} {
			p, err := b.malloc(per, fmt.Sprintf("KV cache (%d blocks × %d layers, %.2f GiB in all)", spec.Blocks, spec.Layers, gib(KVBytes(spec))))
			if err != nil {
				for _, q := range append(c.k, c.v...) {
					b.free(q)
				}
				return nil, err
			}
			// Zeroed so that never-written slots hold finite values.
			if err := b.drv.MemsetD32Async(p, 0, per/4, b.stream); err != nil {
				b.fail(err)
				return nil, err
			}
			*dst = append(*dst, p)
		}
	}
	b.kvCaches = append(b.kvCaches, c)
	return c, nil
}

// attnMeta is the staged attention metadata of one batch.
type attnMeta struct {
	epoch             int
	qt                int // tokens per prefill tile (0: no tiles)
	tokTab, pos, tabs driver.DevPtr
	tiles             driver.DevPtr
	nTiles            int
	maxLen            int
	// Host copy of what was staged, to recognise the same batch again.
	seq, posH, blk []int32
	lens           []int32
}

// Attention stores k and v in the cache, then computes causal GQA attention.
// Batches of up to 16 tokens (decode) use the split kernel, one query token
// per block row, split over the context; larger batches use the tensor-core
// flash kernel where it applies.
func (b *Backend) Attention(out, q, k, v backend.Tensor, cache backend.KVCache, layer int, ab *backend.AttnBatch, scale float32) {
	c, ok := cache.(*kvCache)
	if !ok {
		panic(fmt.Sprintf("cuda: KV cache of another backend (%T)", cache))
	}
	o, qq, kk, vv := f32t(out, "Attention"), f32t(q, "Attention"), f32t(k, "Attention"), f32t(v, "Attention")
	kvh, hd := c.spec.KVHeads, c.spec.HeadDim
	T := len(ab.Pos)
	if qq.cols%hd != 0 || kk.cols != kvh*hd || vv.cols != kvh*hd || o.cols != qq.cols || qq.rows < T || kk.rows < T || vv.rows < T || o.rows < T || len(ab.Seq) != T {
		panic(fmt.Sprintf("cuda: Attention shapes out %dx%d q %dx%d k %dx%d v %dx%d for %d tokens, %d KV heads of %d", o.rows, o.cols, qq.rows, qq.cols, kk.rows, kk.cols, vv.rows, vv.cols, T, kvh, hd))
	}
	if layer < 0 || layer >= c.spec.Layers {
		panic(fmt.Sprintf("cuda: Attention layer %d of %d", layer, c.spec.Layers))
	}
	heads := qq.cols / hd
	if heads%kvh != 0 {
		panic(fmt.Sprintf("cuda: %d query heads for %d KV heads", heads, kvh))
	}
	if b.err != nil || T == 0 {
		return
	}
	G := heads / kvh
	ak, err := b.attnFor(hd, G, c.dt)
	if err != nil {
		b.fail(err)
		return
	}
	usePrefill := b.usesPrefillAttn(ak, T)

	qt := 0
	prefillK, prefillNT := ak.prefill, uint32(128)
	if usePrefill {
		if b.prefillRows == 128 {
			if k := b.prefillRows128(ak); k != nil {
				prefillK, prefillNT = k, 256
			}
		}
		qt = int(prefillNT) / 2 / G // PF_ROWS / G
	}
	m := b.attnMetadata(ab, c.spec, qt)
	if m == nil {
		return
	}
	kc, vc := c.k[layer], c.v[layer]
	// Scratch first: growing a buffer leaves graph mode and flushes what
	// is held, which must happen before the fusion decision below.
	var part, cnt driver.DevPtr
	chunk, zmax, clusterZ := 0, 0, 0
	dynChunk, dynZ, dynBlocks := 0, 0, 0 // the fold's units handed out (ATTN_DYN), where used
	var decodeK *kernel
	decodeSmem, decodeNT := 0, 0
	if !usePrefill {
		if b.attnOld {
			zmax = oldSplits(m.maxLen, c.spec.Blocks)
			chunk = 128
		} else {
			// The merge keeps G·nz weights in the K/V stages' shared memory.
			dk, dsmem, perSM := ak.decodeFor(b.attnDeep, b.attnTC, b.attnTC2)
			deep := dk == ak.deep || dk == ak.deep3
			// Splits of 3·2ᵏ tiles too where more than 2 blocks share an SM.
			chunk, zmax = b.decodeSplits(m.maxLen, T, kvh, c.spec.Blocks, dsmem/4/G, perSM, deep || perSM > 2)
			decodeK, decodeSmem, decodeNT = dk, dsmem, 128
			if cz := b.attnCluster; cz > 1 && (dk == ak.decodeTC || dk == ak.decodeTC2) && zmax > 1 && zmax <= 2*cz {
				// Few splits: at most attnCluster of them, merged within
				// their cluster (a split may take twice the tiles).
				if zmax > cz {
					chunk, zmax = b.decodeSplits(m.maxLen, T, kvh, c.spec.Blocks, min(cz, dsmem/4/G), perSM, deep || perSM > 2)
				}
				fk := ak.decodeTCPrep
				if dk == ak.decodeTC2 {
					fk = ak.decodeTC2Prep
				}
				if zmax > 1 && zmax <= cz && fk != nil && b.clusterFits(ak, fk, zmax, dsmem) {
					clusterZ = zmax
				}
			}
			if deep {
				decodeNT = 256
			}
			if b.attnDyn > 0 && dk == ak.decodeTC && G <= 8 && b.attnDefer && ak.mergeSplits != nil && clusterZ == 0 {
				dynChunk, dynZ, dynBlocks = b.dynUnits(m.maxLen, T, kvh, c.spec.Blocks, perSM)
			}
			if cnt, ok = b.attnCounters(T * kvh); !ok {
				return
			}
		}
		// Rows of PART_LD = hd + 4 floats (kernels/attention.cu).
		if part, ok = b.scratchPtr(scrAttn, uint64(T*heads*max(zmax, dynZ)*(hd+4)*4)); !ok {
			return
		}
	}
	qn, kn, rope, prepped := b.takeAttnPrep(qq.ptr, kk.ptr, vv.ptr, T, heads, kvh, hd, m.pos)
	foldK := ak.decodeTCPrep
	if decodeK == ak.decodeTC2 {
		foldK = ak.decodeTC2Prep
	}
	if prepped && decodeK != nil && (decodeK == ak.decodeTC || decodeK == ak.decodeTC2) && foldK != nil && b.fz.prep && distinct(ab.Seq) {
		// The prep folded into the decode attention (struct DecodePrepP
		// in kernels/attention.cu): no block of the launch reads a
		// position that another stores.
		gridZ := zmax
		if dynChunk > 0 { // the units handed out: dynBlocks blocks a (token, KV head) take dynZ partials' slots
			chunk, zmax, gridZ = dynChunk, dynZ, dynBlocks
			if b.attnAcc {
				// A partial a block (ATTN_ACC): the splits' slots are the
				// blocks, and the merge takes min(units, blocks) of them.
				zmax = dynBlocks
			}
			b.dynRuns++
		}
		var a [21]uint64
		a[0], a[1], a[2], a[3], a[4], a[5] = ptr(kc), ptr(vc), ptr(qq.ptr), ptr(o.ptr), ptr(part), ptr(cnt)
		a[6], a[7], a[8], a[9], a[10] = ptr(m.tokTab), ptr(m.pos), ptr(m.tabs), ptr(kk.ptr), ptr(vv.ptr)
		a[11], a[12], a[13], a[14] = ptr(qn.w), ptr(kn.w), ptr(rope.tab.cos), ptr(rope.tab.sin)
		a[15] = argPair(i32(kvh), i32(zmax))
		a[16] = argPair(i32(chunk), i32(rope.half))
		a[17] = argPair(f32(scale), f32(qn.eps))
		a[18] = f32(kn.eps)
		a[19] = ptr(b.attnTimeline) // ATTN_TIMING's records, or 0
		// The merge as a kernel of its own (attn_merge_splits: a warp per
		// query head, token and 32 dims).
		deferMerge := b.attnDefer && zmax > 1 && zmax <= mergeSplitsMax && ak.mergeSplits != nil
		if clusterZ > 1 {
			// The splits merge through their cluster's shared memory
			// (CLUSTER_MERGE in kernels/attention.cu).
			a[20] = 2
			b.launchCluster(foldK, uint32(kvh), uint32(T), uint32(zmax), uint32(decodeNT), 1, uint32(decodeSmem), uint32(clusterZ), a[:]...)
			return
		}
		if deferMerge {
			a[20] = 1
		}
		b.launch(foldK, uint32(kvh), uint32(T), uint32(gridZ), uint32(decodeNT), 1, uint32(decodeSmem), a[:]...)
		if deferMerge {
			mk, nt := ak.mergeSplits, uint32(32)
			if zmax > mergeNarrowMax && ak.mergeWide != nil {
				mk, nt = ak.mergeWide, 256 // MW_NT
			}
			mo := mergeOp{k: mk, nt: nt, fold: ak.oproj, o: o.ptr, part: part, pos: m.pos, T: T, heads: heads, hd: hd, zmax: zmax, chunk: chunk}
			if dynChunk > 0 || !b.holdMerge(mo) {
				b.launchMerge(&mo)
			}
		}
		return
	}
	if prepped {
		// The held QK-norms and RoPEs, and the KV store, in one launch
		// (struct PrepP in kernels/attention.cu).
		var a [15]uint64
		a[0], a[1], a[2], a[3], a[4] = ptr(qq.ptr), ptr(kk.ptr), ptr(vv.ptr), ptr(qn.w), ptr(kn.w)
		a[5], a[6], a[7], a[8], a[9] = ptr(rope.tab.cos), ptr(rope.tab.sin), ptr(m.pos), ptr(m.tokTab), ptr(m.tabs)
		a[10], a[11] = ptr(kc), ptr(vc)
		a[12] = argPair(i32(T), i32(heads))
		a[13] = argPair(i32(kvh), i32(rope.half))
		a[14] = argPair(f32(qn.eps), f32(kn.eps))
		const warps = 4 // PREP_WARPS
		b.launch(ak.prep, blocks(T*(heads+2*kvh), warps), 1, 1, 32*warps, 1, 0, a[:]...)
	} else {
		b.flush()
		b.launch(b.k.kvStore[c.dt], uint32(T), 1, 1, uint32(min(256, max(32, kvh*hd))), 1, 0,
			ptr(kc), ptr(vc), ptr(kk.ptr), ptr(vv.ptr), ptr(m.tokTab), ptr(m.pos), ptr(m.tabs), i32(kvh), i32(hd))
	}
	if usePrefill {
		// Grid (KV heads, tiles): kernels/prefill.cu starts the longest tiles first.
		b.launch(prefillK, uint32(kvh), uint32(m.nTiles), 1, prefillNT, 1, uint32(ak.prefillSmem),
			ptr(kc), ptr(vc), ptr(qq.ptr), ptr(o.ptr), ptr(m.tiles), ptr(m.tokTab), ptr(m.pos), ptr(m.tabs), i32(kvh), f32(scale))
		return
	}
	if b.attnOld {
		b.launch(ak.split, uint32(kvh), uint32(T), uint32(zmax), 128, 1, uint32(ak.splitSmem),
			ptr(kc), ptr(vc), ptr(qq.ptr), ptr(part), ptr(m.tokTab), ptr(m.pos), ptr(m.tabs), i32(kvh), f32(scale), i32(zmax))
		b.launch(ak.combine, uint32(heads), uint32(T), 1, 128, 1, 0, ptr(o.ptr), ptr(part), ptr(m.pos), i32(heads), i32(zmax))
		return
	}
	b.launch(decodeK, uint32(kvh), uint32(T), uint32(zmax), uint32(decodeNT), 1, uint32(decodeSmem),
		ptr(kc), ptr(vc), ptr(qq.ptr), ptr(o.ptr), ptr(part), ptr(cnt), ptr(m.tokTab), ptr(m.pos), ptr(m.tabs),
		i32(kvh), f32(scale), i32(zmax), i32(chunk))
}

// oldSplits is attn_split's grid depth: splits of 128 positions, rounded up
// to a power of two so that decode steps keep the same launch (and graph)
// while the context grows within a bucket.
func oldSplits(maxLen, poolBlocks int) int {
	zNeed := (maxLen + 127) / 128
	zmax := 1
	for zmax < zNeed {
		zmax *= 2
	}
	return min(zmax, max(zNeed, (poolBlocks*backend.BlockSize+127)/128))
}

// decodeSplits picks attn_decode's split size (positions, a power-of-two
// number of 64-position tiles) and grid depth for a batch whose longest
// context is maxLen: enough splits that T·kvh·splits blocks fill the GPU
// once (perSM blocks per SM: 2 for attn_decode, whose K/V stages take
// ~105 KB of shared memory at head dim 128; 3 for attn_decode_deep), and no more, since every split costs a partial write and a
// share of the merge; at most maxSplits per token. Both numbers change only
// when the context crosses a power-of-two bucket, so a growing decode keeps
// its captured graph.
//
// fine (the deep kernels) also allows 3·2ᵏ tiles per split, so that the
// split count can land nearer the target: at 32K on an H200 (513 tiles,
// 8 KV heads, 3 blocks per SM: at most 49 splits) 12 tiles make 43 splits,
// 344 blocks, where powers of two give 16 tiles, 33 splits, 264 blocks (2
// per SM, as attn_decode).
func (b *Backend) decodeSplits(maxLen, T, kvh, poolBlocks, maxSplits, perSM int, fine bool) (chunk, zmax int) {
	target := b.attnBlocks
	if target <= 0 {
		target = perSM * b.smCount
	}
	tiles := (maxLen + 63) / 64
	// Splits per token never exceed per (tiles ≤ tps·per).
	per := min(max(1, target/(kvh*T)), max(1, maxSplits))
	tps := 1
	for tps*per < tiles {
		switch {
		case !fine || tps == 1:
			tps *= 2
		case tps&(tps-1) == 0:
			tps = tps / 2 * 3 // 2ᵏ → 3·2ᵏ⁻¹
		default:
			tps = tps / 3 * 4 // 3·2ᵏ⁻¹ → 2ᵏ⁺¹
		}
	}
	nz := (tiles + tps - 1) / tps
	zmax = 1
	for zmax < nz {
		zmax *= 2
	}
	poolSplits := (poolBlocks + tps - 1) / tps
	return tps * 64, min(zmax, max(nz, poolSplits))
}

// dynUnits picks the folded decode attention's units when they are handed
// out (INFERNIX_CUDA_ATTN_DYN, ATTN_DYN in kernels/attention.cu) for a
// batch whose longest context is maxLen: units of b.attnDyn tiles (doubled
// until attn_merge_splits takes them all), partials' slots for a
// power-of-two bucket of them (so that a growing decode keeps its graph),
// and the blocks a (token, KV head) gets, which fill the GPU once (perSM a
// SM). None (0) where the units would not outnumber the blocks: the static
// splits (decodeSplits) serve there, one split a block.
func (b *Backend) dynUnits(maxLen, T, kvh, poolBlocks, perSM int) (chunk, zmax, blocks int) {
	target := b.attnBlocks
	if target <= 0 {
		target = perSM * b.smCount
	}
	blocks = max(1, target/(kvh*T))
	tiles := (maxLen + 63) / 64
	u := b.attnDyn
	if tiles <= u*blocks {
		return 0, 0, 0
	}
	for (tiles+u-1)/u > mergeSplitsMax {
		u *= 2
	}
	nu := (tiles + u - 1) / u
	zmax = 1
	for zmax < nu {
		zmax *= 2
	}
	poolUnits := (poolBlocks + u - 1) / u
	return u * 64, min(zmax, max(nu, poolUnits)), blocks
}

// clusterKey is a kernel and a cluster size.
type clusterKey struct {
	k  *kernel
	cz int
}

// clusterFits reports whether the device can hold clusters of cz blocks of
// the folded decode attention k (128 threads, smem bytes of dynamic shared
// memory each), asked once per size; sizes past 8 need the kernel's
// non-portable cluster sizes allowed.
func (b *Backend) clusterFits(a *attnKernels, k *kernel, cz, smem int) bool {
	key := clusterKey{k, cz}
	if fit, ok := a.clusterFit[key]; ok {
		return fit
	}
	fit := true
	if cz > 8 {
		if err := b.drv.FuncSetAttribute(k.fn, driver.FuncAttrNonPortableClusterSizeAllowed, 1); err != nil {
			b.logf("cuda: clusters of %d blocks refused (%v); the decode attention merges its splits apart", cz, err)
			fit = false
		}
	}
	if fit {
		n, err := b.drv.MaxActiveClusters(k.fn, 1, 1, uint32(cz), 128, 1, uint32(smem), uint32(cz))
		if err != nil || n < 1 {
			b.logf("cuda: clusters of %d decode-attention blocks do not fit (%d, %v); the splits merge apart", cz, n, err)
			fit = false
		}
	}
	if a.clusterFit == nil {
		a.clusterFit = map[clusterKey]bool{}
	}
	a.clusterFit[key] = fit
	return fit
}

// decodeFor picks the decode attention kernel for INFERNIX_CUDA_ATTN_DEEP
// (deep: 0, 1 or 3) or INFERNIX_CUDA_DECODE_ATTN=tc (or tc2: tc2), its
// dynamic shared memory and blocks per SM; the default kernel where the one
// asked for does not fit or does not exist for the head dim.
func (a *attnKernels) decodeFor(deep int, tc, tc2 bool) (*kernel, int, int) {
	switch {
	case tc && tc2 && a.decodeTC2 != nil:
		return a.decodeTC2, a.decodeSmem, max(2, a.decodeTCPerSM)
	case tc && a.decodeTC != nil:
		return a.decodeTC, a.decodeSmem, max(2, a.decodeTCPerSM)
	case deep == 1 && a.deepPerSM > 0:
		return a.deep, a.deepSmem, a.deepPerSM
	case deep == 3 && a.deep3PerSM > 0:
		return a.deep3, a.deep3Smem, a.deep3PerSM
	}
	return a.decode, a.decodeSmem, 2
}

// attnCounters returns attn_decode's per-(token, KV head) split counters:
// zeroed when allocated, and every launch leaves them zero again.
func (b *Backend) attnCounters(n int) (driver.DevPtr, bool) {
	return b.zeroScratch(scrAttnCnt, uint64(4*n))
}

// usesPrefillAttn reports whether attention over T tokens runs ak's
// tensor-core prefill kernel rather than the decode kernels. The tiles are
// the grid's y dimension (at most 65,535 of at least one token).
func (b *Backend) usesPrefillAttn(ak *attnKernels, T int) bool {
	return ak.prefill != nil && T >= b.prefillMinT() && b.attnMode != "split" && T <= 65535
}

// prefillMinT is the smallest batch that uses the tensor-core kernel.
func (b *Backend) prefillMinT() int {
	if b.prefillMin > 0 {
		return b.prefillMin
	}
	return 17
}

// attnMetadata validates and stages a batch's attention metadata once per
// forward: every layer passes the same batch, which is recognised by content.
func (b *Backend) attnMetadata(ab *backend.AttnBatch, spec backend.KVSpec, qt int) *attnMeta {
	m := &b.attnCache
	T := len(ab.Pos)
	if m.epoch == b.meta.epoch && m.qt == qt && equalI32(m.seq, ab.Seq) && equalI32(m.posH, ab.Pos) && len(m.lens) == len(ab.Blocks) {
		same := true
		off := 0
		for s, bl := range ab.Blocks {
			if int(m.lens[s]) != len(bl) || !equalI32(m.blk[off:off+len(bl)], bl) {
				same = false
				break
			}
			off += len(bl)
		}
		if same {
			return m
		}
	}
	// Validate (the kernels index the cache with these).
	maxLen := 0
	for t := 0; t < T; t++ {
		s, p := ab.Seq[t], ab.Pos[t]
		if s < 0 || int(s) >= len(ab.Blocks) {
			panic(fmt.Sprintf("cuda: Attention token %d of sequence %d; %d block tables", t, s, len(ab.Blocks)))
		}
		if p < 0 || int(p/backend.BlockSize) >= len(ab.Blocks[s]) {
			panic(fmt.Sprintf("cuda: Attention position %d of sequence %d beyond its %d blocks", p, s, len(ab.Blocks[s])))
		}
		if t > 0 && ab.Seq[t-1] == s && ab.Pos[t-1] >= p {
			panic(fmt.Sprintf("cuda: Attention positions of sequence %d do not increase (%d then %d)", s, ab.Pos[t-1], p))
		}
		maxLen = max(maxLen, int(p)+1)
	}
	m.seq = append(m.seq[:0], ab.Seq...)
	m.posH = append(m.posH[:0], ab.Pos...)
	m.blk, m.lens = m.blk[:0], m.lens[:0]
	for _, bl := range ab.Blocks {
		for _, x := range bl {
			if x < 0 || int(x) >= spec.Blocks {
				panic(fmt.Sprintf("cuda: Attention block %d outside the pool of %d", x, spec.Blocks))
			}
		}
		m.blk = append(m.blk, bl...)
		m.lens = append(m.lens, int32(len(bl)))
	}
	// One staged array: tokTab[T], tabs[...], tiles[2·n].
	h := b.hostMeta[:0]
	offs := b.hostOffs[:0]
	off := int32(0)
	for _, bl := range ab.Blocks {
		offs = append(offs, off)
		off += int32(len(bl))
	}
	for t := 0; t < T; t++ {
		h = append(h, offs[ab.Seq[t]])
	}
	h = append(h, m.blk...)
	nTiles := 0
	if qt > 0 {
		for t := 0; t < T; {
			e := t + 1
			for e < T && ab.Seq[e] == ab.Seq[t] && e-t < qt {
				e++
			}
			h = append(h, int32(t), int32(e-t))
			nTiles++
			t = e
		}
	}
	b.hostMeta, b.hostOffs = h, offs
	p, _ := b.stage(h)
	if b.err != nil {
		return nil
	}
	m.epoch, m.qt, m.nTiles, m.maxLen = b.meta.epoch, qt, nTiles, maxLen
	m.tokTab = p
	m.tabs = p + driver.DevPtr(4*T)
	m.tiles = m.tabs + driver.DevPtr(4*len(m.blk))
	m.pos = b.positions(ab.Pos)
	return m
}

// FillKV overwrites every K and V element of cache with pseudo-random
// values in [-scale, scale) of the cache's element type (benchmarks:
// attention over a long context without computing one).
func (b *Backend) FillKV(cache backend.KVCache, seed uint32, scale float32) {
	c := cache.(*kvCache)
	n := int(kvLayerBytes(c.spec) / 2)
	k := b.k.fill[c.dt]
	for l := range c.k {
		b.launch(k, gridFor(n), 1, 1, 256, 1, 0, ptr(c.k[l]), uint64(n), uint64(seed+uint32(2*l)), f32(scale))
		b.launch(k, gridFor(n), 1, 1, 256, 1, 0, ptr(c.v[l]), uint64(n), uint64(seed+uint32(2*l+1)), f32(scale))
	}
}

// distinct reports whether no value repeats (a batch's tokens are all of
// different sequences).
func distinct(seq []int32) bool {
	for i, a := range seq {
		for _, c := range seq[:i] {
			if a == c {
				return false
			}
		}
	}
	return true
}
