// Paged attention. Compiled per model with -DHD=<head dim> (a multiple of 8,
// 8…256), -DG=<query heads per KV head> (≤ 16) and -DKVDT=<the cache's
// element type> (DT_BF16, the default, or DT_F16: INFERNIX_CUDA_KV).
//
// KV cache layout per layer: [block][kvHead][64 slots][HD] 16-bit floats, so
// that one (block, head) tile is 64·HD contiguous elements. f16 keeps 3 more
// mantissa bits than bf16 in the same bytes; values are stored saturated to
// ±65504 (f32_to_f16 in the prelude): K is bounded by the QK-norm where a
// model has one, V is not normalised, and a saturated element beats an
// infinite one, which would poison every output that reads its row.
//
// Metadata (device, per forward): pos[t] is token t's position; its sequence's
// block table starts at tabs[tokTab[t]]; block j of a sequence holds
// positions 64j … 64j+63.

#ifndef HD
#error "HD (head dim) must be defined"
#endif
#ifndef G
#error "G (query heads per KV head) must be defined"
#endif
#ifndef KVDT
#define KVDT DT_BF16
#endif
// ATTN_PDL_TRIGGER: PDL_TRIGGER (prelude.cuh) for this module alone, so
// that the decode attention may let the next kernel (the o-projection)
// launch after its main loop, while its partials merge, when the other
// modules trigger at exit.
#ifdef ATTN_PDL_TRIGGER
#undef PDL_TRIGGER
#define PDL_TRIGGER ATTN_PDL_TRIGGER
#endif

#define CH 128          // positions per split (one per thread in the score phase)
#define NT 128          // threads per block
#define DG (HD / 8)     // 16-byte groups per row
#define PG (NT / DG)    // position groups in the P·V phase (threads past PG·DG idle there)
#define KV_LD (HD + 8)  // shared-memory row of a K/V tile (padded: conflict-free 16-byte reads)
// OW_PAD: the padding of the tensor-core decode attention's rows of its
// warps' output sums (ow), so that a warp's float2 stores of 8 rows hit
// distinct banks; 0 (as before run 20): 128-float rows, 8-way conflicts
// in the 1.6 µs between a 32K split's last tile and its exit.
#ifndef OW_PAD
#define OW_PAD 8
#endif
// A split's partial in part: HD sums, then its max and its sum of
// exponentials, padded so that every row starts 16-byte aligned (the merge
// copies the sums with cp.async).
#define PART_LD (HD + 4)

__device__ __forceinline__ long kv_row(const int* tab, int p, int kvh, int h) {
  return (((long)tab[p >> 6] * kvh + h) * 64 + (p & 63)) * HD;
}

// Split attention, one query token per block row: block (h, t, z) computes,
// (its K and V rows copied to shared memory first with coalesced cp.async,
// dynamic shared memory 2·CH·KV_LD·2 bytes),
// for the G query heads of KV head h and token t, the softmax-weighted sum of
// V over positions [z·CH, min(z·CH + CH, pos[t] + 1)) and writes the
// unnormalised sum, the max score and the sum of exponentials to part
// [t][head][zmax][PART_LD]. attn_combine merges the splits. Blocks past the
// token's length exit at once, so the grid may be sized for the longest
// context (as a captured graph must be).
extern "C" __global__ void __launch_bounds__(NT) attn_split(
    const u16* __restrict__ kc, const u16* __restrict__ vc, const float* __restrict__ q, float* __restrict__ part,
    const int* __restrict__ tokTab, const int* __restrict__ pos, const int* __restrict__ tabs, int kvh, float scale, int zmax) {
  STEP_TIMER();
  PDL_ENTRY();
  const int h = blockIdx.x, t = blockIdx.y, z = blockIdx.z;
  const int len = pos[t] + 1;
  const int start = z * CH;
  if (start >= len) return;
  const int n = min(CH, len - start);
  const int heads = kvh * G;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  __shared__ __align__(16) float qs[G][HD];
  __shared__ float ps[G][CH];
  __shared__ float wred[G][NT / 32];
  EXTERN_SMEM(u16, kvs);
  u16* ks = kvs;
  u16* vs = kvs + CH * KV_LD;
  // The P·V reduction reuses the K tile (dead after the scores).
  float(*pv)[HD] = (float(*)[HD])kvs;

  const int* tab = tabs + tokTab[t];
  for (int c = tid; c < n * DG; c += NT) {
    const int row = c / DG, col = (c % DG) * 8;
    const long g = kv_row(tab, start + row, kvh, h) + col;
    cp_async16(smem_addr(ks + row * KV_LD + col), kc + g);
    cp_async16(smem_addr(vs + row * KV_LD + col), vc + g);
  }
  cp_async_commit();
  const float* qrow = q + ((long)t * heads + (long)h * G) * HD;
  for (int i = tid; i < G * HD; i += NT) qs[i / HD][i % HD] = qrow[i] * scale;
  cp_async_wait<0>();
  __syncthreads();

  // Scores: thread tid takes position start + tid.
  float s[G];
#pragma unroll
  for (int g = 0; g < G; g++) s[g] = NEG_INF;
  if (tid < n) {
    const uint4* kr = (const uint4*)(ks + tid * KV_LD);
#pragma unroll
    for (int g = 0; g < G; g++) s[g] = 0.f;
#pragma unroll 4
    for (int c = 0; c < DG; c++) {
      float kf[8];
      kv_unpack8<KVDT>(kr[c], kf);
#pragma unroll
      for (int g = 0; g < G; g++) {
        const float4 qa = *(const float4*)&qs[g][c * 8];
        const float4 qb = *(const float4*)&qs[g][c * 8 + 4];
        s[g] += qa.x * kf[0] + qa.y * kf[1] + qa.z * kf[2] + qa.w * kf[3] + qb.x * kf[4] + qb.y * kf[5] + qb.z * kf[6] + qb.w * kf[7];
      }
    }
  }
  // Max over the split, per head.
#pragma unroll
  for (int g = 0; g < G; g++) {
    const float m = warp_max(s[g]);
    if (lane == 0) wred[g][warp] = m;
  }
  __syncthreads();
  float mx[G];
#pragma unroll
  for (int g = 0; g < G; g++) {
    float m = wred[g][0];
#pragma unroll
    for (int j = 1; j < NT / 32; j++) m = fmaxf(m, wred[g][j]);
    mx[g] = m;
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < G; g++) {
    const float e = tid < n ? expf(s[g] - mx[g]) : 0.f;
    ps[g][tid] = e;
    const float sm = warp_sum(e);
    if (lane == 0) wred[g][warp] = sm;
  }
  __syncthreads();

  // P·V: thread (pg, dg) sums positions pg, pg + PG, … over dims dg·8 … dg·8+7.
  const int dg = tid % DG, pg = tid / DG;
  float acc[G][8];
#pragma unroll
  for (int g = 0; g < G; g++)
#pragma unroll
    for (int e = 0; e < 8; e++) acc[g][e] = 0.f;
  for (int j = pg < PG ? pg : n; j < n; j += PG) {
    const uint4 u = *(const uint4*)(vs + j * KV_LD + dg * 8);
    float vf[8];
    kv_unpack8<KVDT>(u, vf);
#pragma unroll
    for (int g = 0; g < G; g++) {
      const float w = ps[g][j];
#pragma unroll
      for (int e = 0; e < 8; e++) acc[g][e] = fmaf(w, vf[e], acc[g][e]);
    }
  }
  // Reduce over position groups, one head at a time.
#pragma unroll
  for (int g = 0; g < G; g++) {
    float l = 0.f;
#pragma unroll
    for (int j = 0; j < NT / 32; j++) l += wred[g][j];
    if (pg < PG) {
#pragma unroll
      for (int e = 0; e < 8; e++) pv[pg][dg * 8 + e] = acc[g][e];
    }
    __syncthreads();
    float* out = part + (((long)t * heads + (long)h * G + g) * zmax + z) * PART_LD;
    for (int d = tid; d < HD; d += NT) {
      float sum = 0.f;
#pragma unroll 8
      for (int k = 0; k < PG; k++) sum += pv[k][d];
      out[d] = sum;
    }
    if (tid == 0) {
      out[HD] = mx[g];
      out[HD + 1] = l;
    }
    __syncthreads();
  }
}

// Merges the splits of attn_split: out[t, head·HD + d] for every query head.
// Grid (heads, T); blockDim a multiple of 32 (≤ 256). The split weights
// exp(m_z − M) are computed once per block into shared memory; contexts of
// more than COMBINE_MAXZ splits take several passes.
#define COMBINE_MAXZ 1024
extern "C" __global__ void attn_combine(float* __restrict__ out, const float* __restrict__ part, const int* __restrict__ pos,
                                        int heads, int zmax) {
  STEP_TIMER();
  PDL_ENTRY();
  __shared__ float wz[COMBINE_MAXZ];
  __shared__ float red[32];
  const int hh = blockIdx.x, t = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
  const int nz = (pos[t] + CH) / CH;  // ceil((pos + 1) / CH)
  const float* pp = part + ((long)t * heads + hh) * zmax * PART_LD;
  // M = max over splits.
  float m = NEG_INF;
  for (int z = tid; z < nz; z += blockDim.x) m = fmaxf(m, pp[(long)z * PART_LD + HD]);
  m = warp_max(m);
  if (lane == 0) red[warp] = m;
  __syncthreads();
  if (tid == 0) {
    float v = red[0];
    for (int i = 1; i < nw; i++) v = fmaxf(v, red[i]);
    red[0] = v;
  }
  __syncthreads();
  const float M = red[0];
  __syncthreads();
  float acc[(HD + 31) / 32];
#pragma unroll
  for (int i = 0; i < (HD + 31) / 32; i++) acc[i] = 0.f;
  float L = 0.f;
  for (int z0 = 0; z0 < nz; z0 += COMBINE_MAXZ) {
    const int zn = min(COMBINE_MAXZ, nz - z0);
    float l = 0.f;
    for (int z = tid; z < zn; z += blockDim.x) {
      const float* pz = pp + (long)(z0 + z) * PART_LD;
      const float w = expf(pz[HD] - M);
      wz[z] = w;
      l += pz[HD + 1] * w;
    }
    l = warp_sum(l);
    if (lane == 0) red[warp] = l;
    __syncthreads();
    for (int i = 0; i < nw; i++) L += red[i];
#pragma unroll
    for (int i = 0; i < (HD + 31) / 32; i++) {
      const int d = tid + i * 32 * nw;
      if (i * 32 * nw < HD && d < HD) {
        float a = acc[i];
        for (int z = 0; z < zn; z++) a = fmaf(pp[(long)(z0 + z) * PART_LD + d], wz[z], a);
        acc[i] = a;
      }
    }
    __syncthreads();
  }
  const float inv = 1.f / L;
#pragma unroll
  for (int i = 0; i < (HD + 31) / 32; i++) {
    const int d = tid + i * 32 * nw;
    if (i * 32 * nw < HD && d < HD) out[((long)t * heads + hh) * HD + d] = acc[i] * inv;
  }
}

// ---------------------------------------------------------------------------
// Decode attention, flash-decoding style. Block (h, t, z) takes the G query
// heads of KV head h for token t over positions [z·chunk, min((z+1)·chunk,
// pos[t]+1)); chunk is a multiple of TP (the host picks it from the context
// length and the SM count so that one launch fills the GPU once). It streams
// the range in tiles of TP positions (one cache block: contiguous K and V
// rows), DSTAGES deep with cp.async, with an online softmax. A token whose
// range is one split writes its output directly; otherwise each split writes
// (unnormalised sum, max, sum of exponentials) to part, and the last split
// of (t, h) to finish — found with an atomic counter per (t, h), which it
// resets to zero for the next launch or graph replay — merges them. So one
// launch replaces attn_split + attn_combine. The merge keeps G·nz split
// weights in the K/V stages' shared memory: the host keeps nz ≤ MERGE_CAP/G.
#define TP 64
// DSTAGES: K/V tile stages of attn_decode, attn_decode_tc and deep3 (the
// host may set it: INFERNIX_CUDA_ATTN_STAGES, so that with 2 stages three
// tensor-core blocks share an SM instead of two).
#ifndef DSTAGES
#if HD <= 128
#define DSTAGES 3
#else
#define DSTAGES 2
#endif
#endif
// attn_decode_deep (INFERNIX_CUDA_ATTN_DEEP): the same computation with
// 256 threads (4 per tile position in the score phase, 16 position groups
// in P·V at head dim 128), so that each tile's arithmetic and barriers take
// half the time, and, where the head dim is a multiple of 64, unpadded K/V
// rows with the 16-byte columns XOR-swizzled by row (conflict-free like the
// padding, 6% less shared memory per stage): at head dim 128 a 2-stage block
// takes ~71 KB, so 3 blocks (24 warps) share an SM instead of 2 blocks of 4
// warps. Run 7 measured attn_decode at 2.1 TB/s at 32K: per tile, a block
// spends longer computing than its prefetched tiles take to land.
#define DNT_DEEP 256
#define DSTAGES_DEEP 2
#define DSWZ_DEEP (DG % 8 == 0)

// Where 16-byte column c of tile row r sits within the row.
template <int SWZ> __device__ __forceinline__ int kv_col(int r, int c) { return SWZ ? (c ^ (r & 7)) : c; }

// Copies the K and V rows of positions [p0, min(p0 + TP, end)) into stage
// st; ZERO also zeroes the V rows past end (attn_decode_tc multiplies them
// by P = 0, and 0 · a stale non-finite value is not 0).
template <int NTD, int SWZ, bool ZERO = false>
__device__ __forceinline__ void decode_load(u16* st, const u16* __restrict__ kc, const u16* __restrict__ vc, const int* tab,
                                            int p0, int end, int kvh, int h) {
  constexpr int LD = SWZ ? HD : KV_LD;
  const int rows = min(TP, end - p0);
  const long base = ((long)tab[p0 >> 6] * kvh + h) * 64 * HD;  // p0 is a multiple of 64
  for (int c = threadIdx.x; c < (ZERO ? TP : rows) * DG; c += NTD) {
    const int row = c / DG, cg = c % DG, col = kv_col<SWZ>(row, cg) * 8;
    if (!ZERO || row < rows) {
      cp_async16(smem_addr(st + row * LD + col), kc + base + (long)row * HD + cg * 8);
      cp_async16(smem_addr(st + TP * LD + row * LD + col), vc + base + (long)row * HD + cg * 8);
    } else {
      *(uint4*)(st + TP * LD + row * LD + col) = make_uint4(0, 0, 0, 0);
    }
  }
}

// decode_load for attn_decode_tc where NT is a multiple of DG (head dims
// 16, 32, 64, 128): thread tid always copies 16-byte column tid % DG of rows
// tid / DG + i·(NT / DG), so its shared and global offsets are fixed and a
// tile costs it one table lookup and 2·TP·DG/NT copies at constant offsets
// (the general loop spends most of its instructions on index arithmetic;
// run 14 profiled the kernel as issue-bound at 32K). sk: the shared address
// of this thread's first K element in the stage; zv its first V element
// (generic); off: this thread's element offset within a (block, head) tile.
// Same copies, same zeroing as decode_load<NT, 0, true>.
#define TC_FAST (NT % DG == 0 && TP % (NT / DG) == 0)
__device__ __forceinline__ void tc_load(saddr_t sk, u16* zv, const u16* __restrict__ kc, const u16* __restrict__ vc, const int* tab,
                                        int p0, int end, int kvh, int h, int off, int r0) {
  constexpr int RS = NT / DG;  // rows per pass
  const int rows = min(TP, end - p0);
  const long base = ((long)META(tab + (p0 >> 6)) * kvh + h) * 64 * HD + off;  // p0 is a multiple of 64
  const u16* gk = kc + base;
  const u16* gv = vc + base;
#pragma unroll
  for (int i = 0; i < TP / RS; i++) {
    if (r0 + i * RS < rows) {
      cp_async16(sk + i * RS * KV_LD * 2, gk + i * RS * HD);
      cp_async16(sk + (TP + i * RS) * KV_LD * 2, gv + i * RS * HD);
    } else {
      *(uint4*)(zv + i * RS * KV_LD) = make_uint4(0, 0, 0, 0);
    }
  }
}

// ATTN_TIMING=1 (INFERNIX_CUDA_DEFINES; the bench's
// INFERNIX_BENCH_ATTN_TIMING): thread 0 of every block of the folded
// decode attention records 16 u64 at DecodePrepP.timeline + 16·(its index
// in the grid): the global timer at entry, after PDL_WAIT, after its first
// tile, after its main loop and at exit; its SM with bit 32 set when it
// merged the splits of its head; its tiles; the head's splits; then the
// timer when its count returned, and, when it merged, when the split
// weights were ready and when the sums were added. Why: at 32K
// the decode attention takes ~41 µs a layer in the step (3.3 TB/s against
// 4.2 for the copy), and run 14's profile put a quarter of it in ramp and
// tail without saying which: late blocks, uneven splits, or the merge that
// the rest of the GPU waits for. Changes no result.
#ifndef ATTN_TIMING
#define ATTN_TIMING 0
#endif

// The end of a split decode block (attn_decode, attn_decode_tc) that has
// written its partial: publish and count it; the last split of (t, h)
// merges them all into out. smem: the block's dead K/V stages (G·nz floats
// at least; the host keeps nz ≤ MERGE_CAP/G), smemFloats of them.
// DM_UNROLL: splits whose partials each thread requests at once in the
// merge (its MI outputs each); a merge of nz splits takes about nz/DM_UNROLL
// L2 round trips while the rest of the GPU may be idle.
#ifndef DM_UNROLL
#define DM_UNROLL 8  // run 14: 8 against 2, 166.6 against 164.4 tok/s at 32K
#endif
// DM_ASYNC=1 (attn_decode_tc): the merging block copies the splits' sums
// into its dead stages with cp.async (as many splits at a time as fit),
// requested before it reads the splits' maxima and sums of exponentials
// (each once, into shared memory), so that the sums take one round trip
// instead of nz/DM_UNROLL. The same additions in the same order as the
// loads from L2: bit-identical. Why: run 18's timeline of the folded decode
// attention (ATTN_TIMING) put the merge at 5.3 µs of a 10.1 µs launch at
// 640 positions (11 splits) and 8.1 of 46.5 at 32K (33 splits), while the
// rest of the GPU waits for it. Measured (run 18 calls b, c; a process
// each, with ATTN_NEWROW): the sums' phase 2.8 → 1.6–1.9 µs at 32K, but the
// weights' grew as much (their loads queue behind the copies), the merge
// 8.1–8.6 µs either way; decode 226.2, 226.9, 225.2 / 173.6, 172.1, 171.4
// tok/s (512 / 32K) against 226.9, 227.9, 226.5 / 172.6, 172.9, 173.0
// without. Off by default. (A merge by tickets, where the split whose last
// tile landed last keeps its own partial and copies the others' once each
// flagged its own, took 10.4 µs at 32K and 1.5–2% of the decode rate: 0a9a70e,
// backed out. The merge moves ~67 KB into one SM at 32K, 20–30 GB/s.)
#ifndef DM_ASYNC
#define DM_ASYNC 0
#endif
#ifndef DM_ZC_MAX
#define DM_ZC_MAX 1024  // the most splits copied at a time (the CPU emulation sets few)
#endif
// ATTN_NEWROW=1 (attn_decode_tc_prep): the split holding the new position
// requests its tiles before storing it (see there). Why: that split's
// blocks started their loads after the k prep and store (two dependent
// round trips), and, finishing last, they are the ones that merge: run 18
// measured a median of 4.1 µs from the wait to the first tile at 640
// positions. Bit-identical. Measured with DM_ASYNC (above): the launch's
// span 10.6 → 9.9–10.1 µs at 640, no difference in the decode rate.
// Off by default.
#ifndef ATTN_NEWROW
#define ATTN_NEWROW 0
#endif
// ATTN_EARLY=1 (attn_decode_tc_prep): the splits that do not hold the new
// position (all of them with ATTN_NEWROW) request their first tiles before
// PDL_WAIT. Safe because only the previous kernel (the q|k|v product) may
// still run when this one starts: every kernel lets the next launch only
// after its own PDL_WAIT, so the kernel before that one has completed, and
// the cache's old positions, the block tables and the positions were
// written earlier still (by earlier steps, or copied before the step).
// Why: run 18 measured 4.1 µs from the wait to the first tile at 640
// positions and 8.0 at 32K, the GPU's bandwidth idle meanwhile.
// Bit-identical (the same loads, issued sooner). Measured (run 19 calls
// b, c): the timeline's first tile 3.87 → 3.23 µs at 640, 7.65 → 5.57 at
// 32K, the launch's last exit 43.33 → 40.93 µs at 32K (from the first
// block's wait); but the step no faster: a process each, 175.8, 175.4,
// 176.6, 175.3, 175.3 tok/s at 32K with it against 177.7, 176.8 without
// (the early loads seem to slow the q|k|v product's tail as much). Off.
#ifndef ATTN_EARLY
#define ATTN_EARLY 0
#endif
// ATTN_ACC=1 (with ATTN_DYN; the host sets it for INFERNIX_CUDA_ATTN_ACC):
// a block that takes more units than one adds them all into one running
// state and writes one partial, at its own slot (blockIdx.z), instead of
// a partial per unit; attn_merge_splits then merges min(units, zmax)
// slots, zmax being the launch's blocks a (token, KV head). Why: run 26
// measured ATTN_DYN's units ending together at 32K (the last block within
// 5 µs of the first, against ~8 for the static splits), but each unit's
// finalize (the warps' states through shared memory, the partial, two
// barriers) cost ~0.9 µs, more than the balance gained. Which block adds
// which unit depends on the order the blocks ask: results differ from the
// static splits' by rounding, and from run to run. Off by default.
#ifndef ATTN_ACC
#define ATTN_ACC 0
#endif
// DEFER_LATE=1: with the merge deferred (DecodePrepP.deferMerge), the
// attention's blocks let attn_merge_splits launch once their loop ends
// (PDL_LATE's place) instead of at exit, so the merge's small blocks are
// resident, waiting, when the last split completes. MS_TRIGGER=0:
// attn_merge_splits lets the next kernel (o_proj's product) launch right
// after its wait, so that product's blocks load their first weights while
// the merge runs (its 32-thread blocks leave the SMs nearly free).
// Neither changes a result; without MS_TRIGGER the merge follows
// PDL_TRIGGER.
#ifndef DEFER_LATE
#define DEFER_LATE 0
#endif
// ATTN_DYN=1 (attn_decode_tc_prep with the merge deferred; the host sets
// it for INFERNIX_CUDA_ATTN_DYN): the grid's depth is a number of blocks
// per (token, KV head), not of splits, and a split ("unit", chunk
// positions) goes to whichever block asks first. Block 0 takes the last
// unit (it stores the new position first, as the last split does), blocks
// 1… the units before it in order, and where units remain (more than the
// blocks) each block asks the (token, KV head)'s counter for the next when
// it requests its current unit's first tile, so that its tiles stream on
// from one unit to the next without a pause; the partial of each unit is
// written where its split's would be, from the same tiles added in the
// same order, so the results are the static splits' bit for bit whatever
// block took a unit. The count that takes the last ask (every block asks
// once more than it gets) puts the counter back to zero. Why: at 32K
// positions the static splits' loops end over ~10 µs (run 19: p10 32.2,
// p50 37.3, last 41.6 µs), the lateness following the SM and changing from
// launch to launch, so no static split evens it. Needs chunk ≥ (DSTAGES −
// 1)·TP where units outnumber blocks (the host's choice), so that a
// block's first unit holds the tiles it requests before its first
// barrier.
#ifndef ATTN_DYN
#define ATTN_DYN 0
#endif
#if ATTN_DYN && (ATTN_NEWROW || ATTN_EARLY)
#error "ATTN_DYN goes without ATTN_NEWROW and ATTN_EARLY"
#endif

// One head's split weights exp(m_z − M) into wz[z] and, in every lane,
// Σ_z l_z·w_z, from the partials at pp (a warp; each lane takes splits
// lane, lane + 32, … in order): the order decode_merge and
// attn_merge_splits share, so that their results are the same bits.
__device__ __forceinline__ float split_weights(const float* pp, int nz, float* wz) {
  const int lane = threadIdx.x & 31;
  float m = NEG_INF;
  for (int zz = lane; zz < nz; zz += 32) m = fmaxf(m, __ldcg(pp + (long)zz * PART_LD + HD));
  m = warp_max(m);
  float l = 0.f;
  for (int zz = lane; zz < nz; zz += 32) {
    const float* pz = pp + (long)zz * PART_LD;
    const float w = expf(__ldcg(pz + HD) - m);
    wz[zz] = w;
    l += __ldcg(pz + HD + 1) * w;
  }
  return warp_sum(l);
}

// tm (ATTN_TIMING, thread 0): the global timer when the count returned,
// when the split weights were ready, and when the sums were added.
template <int NTD, bool ASYNC = false>
__device__ __forceinline__ bool decode_merge(float* out, float* part, int* cnt, float* smem, int t, int h, int heads, int kvh,
                                             int zmax, int nz, int smemFloats = 0, u64* tm = 0) {
  __shared__ float Ls[G];
  __shared__ int last;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Publish this split, then count it; the last split of (t, h) merges.
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(cnt + t * kvh + h, 1) == nz - 1;
  __syncthreads();
  if (ATTN_TIMING && tm && tid == 0) tm[0] = global_ns();
  if (!last) return false;
  __threadfence();
  const float* ph = part + ((long)t * heads + h * G) * zmax * PART_LD;  // head h·G's partials
  // Other blocks' partials are read through L2 (__ldcg, cp.async.cg):
  // never from L1. The split weights exp(m_z − M) go to shared memory (the
  // dead K/V stages; the host keeps G·nz within them, MERGE_CAP), then each
  // thread accumulates its MI outputs with the splits outermost.
  float* wz = smem;  // [G][nz]
  // ASYNC: the sums of splits [z0, z0 + zc) at ps, [zc][G][HD]; ml the
  // maxima and sums of exponentials, [G][nz][2].
  const int wn = (G * nz + 3) & ~3;
  float* ml = smem + wn;
  float* ps = ml + 2 * wn;
  const int zc = ASYNC ? min(min(nz, DM_ZC_MAX), (smemFloats - 3 * wn) / (G * HD)) : 0;
  const bool as = ASYNC && zc >= 1;  // else too many splits for the stages: loads as without ASYNC
  auto issue = [&](int z0) {
    const int n = min(zc, nz - z0) * G * (HD / 4);
    for (int i = tid; i < n; i += NTD) {
      const int c = i % (HD / 4), r = i / (HD / 4), g = r % G, zl = r / G;
      cp_async16(smem_addr(ps + r * HD + c * 4), ph + ((long)g * zmax + z0 + zl) * PART_LD + c * 4);
    }
    cp_async_commit();
  };
  if (as) issue(0);
  for (int g = warp; g < G; g += NTD / 32) {
    const float* pp = ph + (long)g * zmax * PART_LD;
    float l;
    if (as) {  // split_weights with each split's max and sum read once
      float m = NEG_INF;
      for (int zz = lane; zz < nz; zz += 32) {
        const float2 v = __ldcg((const float2*)(pp + (long)zz * PART_LD + HD));
        ml[2 * (g * nz + zz)] = v.x;
        ml[2 * (g * nz + zz) + 1] = v.y;
        m = fmaxf(m, v.x);
      }
      m = warp_max(m);
      l = 0.f;
      for (int zz = lane; zz < nz; zz += 32) {
        const float w = expf(ml[2 * (g * nz + zz)] - m);
        wz[g * nz + zz] = w;
        l += ml[2 * (g * nz + zz) + 1] * w;
      }
      l = warp_sum(l);
    } else {
      l = split_weights(pp, nz, wz + g * nz);
    }
    if (lane == 0) Ls[g] = l;
  }
  __syncthreads();
  if (ATTN_TIMING && tm && tid == 0) tm[1] = global_ns();
  constexpr int MI = (G * HD + NTD - 1) / NTD;
  float a[MI];
#pragma unroll
  for (int k = 0; k < MI; k++) a[k] = 0.f;
  if (as) {
    for (int z0 = 0; z0 < nz; z0 += zc) {
      if (z0 > 0) {
        __syncthreads();  // the previous splits' sums are read before they are replaced
        issue(z0);
      }
      cp_async_wait<0>();
      __syncthreads();
      const int zn = min(zc, nz - z0);
#pragma unroll
      for (int k = 0; k < MI; k++) {
        const int i = min(tid + k * NTD, G * HD - 1);  // past the end: repeats the last output, not written
        const int g = i / HD, d = i - g * HD;
        const float* pk = ps + g * HD + d;
        const float* wk = wz + g * nz + z0;
#pragma unroll 4
        for (int zl = 0; zl < zn; zl++) a[k] = fmaf(pk[zl * G * HD], wk[zl], a[k]);
      }
    }
  } else {
    const float* pb[MI];
    int wb[MI];
#pragma unroll
    for (int k = 0; k < MI; k++) {
      const int i = min(tid + k * NTD, G * HD - 1);  // past the end: repeats the last output, not written
      const int g = i / HD, d = i - g * HD;
      pb[k] = ph + (long)g * zmax * PART_LD + d;
      wb[k] = g * nz;
    }
#pragma unroll DM_UNROLL
    for (int zz = 0; zz < nz; zz++) {
#pragma unroll
      for (int k = 0; k < MI; k++) a[k] = fmaf(__ldcg(pb[k] + (long)zz * PART_LD), wz[wb[k] + zz], a[k]);
    }
  }
  if (ATTN_TIMING && tm && tid == 0) tm[2] = global_ns();
#pragma unroll
  for (int k = 0; k < MI; k++) {
    const int i = tid + k * NTD;
    if (i < G * HD) {
      const int g = i / HD, d = i - g * HD;
      out[((long)t * heads + h * G + g) * HD + d] = a[k] / Ls[g];
    }
  }
  if (tid == 0) cnt[t * kvh + h] = 0;
  return true;
}

// The decode kernel body: NTD threads (a multiple of TP), ST stages, SWZ
// swizzled unpadded rows (else padded), KT the cache's element type (a
// template parameter rather than KVDT alone, so that the CPU emulation can
// run both in one binary). attn_decode is <NT, DSTAGES, 0, KVDT>.
template <int NTD, int ST, int SWZ, int KT>
__device__ __forceinline__ void attn_decode_impl(const u16* __restrict__ kc, const u16* __restrict__ vc, const float* __restrict__ q,
                                                 float* out, float* part, int* cnt, const int* __restrict__ tokTab,
                                                 const int* __restrict__ pos, const int* __restrict__ tabs, int kvh, float scale,
                                                 int zmax, int chunk) {
  constexpr int LD = SWZ ? HD : KV_LD;  // shared-memory row of a K/V tile
  constexpr int STG = 2 * TP * LD;      // elements of one stage (K tile, then V tile)
  constexpr int QS = NTD / TP;          // threads per position in the score phase
  constexpr int PGD = NTD / DG;         // position groups in P·V (threads past PGD·DG idle there)
  static_assert(NTD % TP == 0 && NTD % 32 == 0, "threads");
  STEP_TIMER();
  PDL_ENTRY();
  const int h = blockIdx.x, t = blockIdx.y, z = blockIdx.z;
  const int len = pos[t] + 1;
  const int start = z * chunk;
  if (start >= len) return;
  const int end = min(start + chunk, len);
  const int ntiles = (end - start + TP - 1) / TP;
  const int nz = (len + chunk - 1) / chunk;
  const int heads = kvh * G;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  __shared__ __align__(16) float qs[G][HD];
  __shared__ float sc[QS][G][TP];  // partial dot products of the scores
  __shared__ float ps[G][TP];      // exp(score − running max) of the tile
  __shared__ float wred[G][NTD / 32];
  EXTERN_SMEM(u16, kvs);

  const int* tab = tabs + tokTab[t];
#pragma unroll
  for (int i = 0; i < ST - 1; i++) {
    if (i < ntiles) decode_load<NTD, SWZ>(kvs + i * STG, kc, vc, tab, start + i * TP, end, kvh, h);
    cp_async_commit();
  }
  const float* qrow = q + ((long)t * heads + (long)h * G) * HD;
  for (int i = tid; i < G * HD; i += NTD) qs[i / HD][i % HD] = qrow[i] * scale;

  float mrun[G], lsum[G], acc[G][8];
#pragma unroll
  for (int g = 0; g < G; g++) {
    mrun[g] = NEG_INF;
    lsum[g] = 0.f;
#pragma unroll
    for (int e = 0; e < 8; e++) acc[g][e] = 0.f;
  }
  const int sp = tid % TP, sh = tid / TP;  // score phase: position, part of the head dim
  const int dg = tid % DG, pg = tid / DG;  // P·V phase: 16-byte column group, position group

  for (int it = 0; it < ntiles; it++) {
    if (it + ST - 1 < ntiles)
      decode_load<NTD, SWZ>(kvs + ((it + ST - 1) % ST) * STG, kc, vc, tab, start + (it + ST - 1) * TP, end, kvh, h);
    cp_async_commit();
    cp_async_wait<ST - 1>();  // tile it has landed (groups complete in order)
    __syncthreads();
    const u16* ks = kvs + (it % ST) * STG;
    const u16* vs = ks + TP * LD;
    const int n = min(TP, end - (start + it * TP));
    {
      // Within a warp every lane reads another row at the same column:
      // the padded or swizzled rows make that conflict-free.
      float s[G];
#pragma unroll
      for (int g = 0; g < G; g++) s[g] = 0.f;
      if (sp < n) {
        const uint4* kr = (const uint4*)(ks + sp * LD);
#pragma unroll 4
        for (int c = sh; c < DG; c += QS) {
          float kf[8];
          kv_unpack8<KT>(kr[kv_col<SWZ>(sp, c)], kf);
#pragma unroll
          for (int g = 0; g < G; g++) {
            const float4 qa = *(const float4*)&qs[g][c * 8];
            const float4 qb = *(const float4*)&qs[g][c * 8 + 4];
            s[g] += qa.x * kf[0] + qa.y * kf[1] + qa.z * kf[2] + qa.w * kf[3] + qb.x * kf[4] + qb.y * kf[5] + qb.z * kf[6] +
                    qb.w * kf[7];
          }
        }
      }
#pragma unroll
      for (int g = 0; g < G; g++) sc[sh][g][sp] = s[g];
    }
    __syncthreads();
    float sv[G];
#pragma unroll
    for (int g = 0; g < G; g++) sv[g] = NEG_INF;
    if (tid < TP) {
#pragma unroll
      for (int g = 0; g < G; g++) {
        if (tid < n) {
          float v = sc[0][g][tid];
#pragma unroll
          for (int k = 1; k < QS; k++) v += sc[k][g][tid];
          sv[g] = v;
        }
        const float m = warp_max(sv[g]);
        if (lane == 0) wred[g][warp] = m;
      }
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < G; g++) {
      float tm = wred[g][0];
#pragma unroll
      for (int j = 1; j < TP / 32; j++) tm = fmaxf(tm, wred[g][j]);
      const float mn = fmaxf(mrun[g], tm);
      const float alpha = expf(mrun[g] - mn);  // 0 on the first tile
      mrun[g] = mn;
      lsum[g] *= alpha;
#pragma unroll
      for (int e = 0; e < 8; e++) acc[g][e] *= alpha;
      if (tid < TP) {
        const float e = tid < n ? expf(sv[g] - mn) : 0.f;
        ps[g][tid] = e;
        lsum[g] += e;
      }
    }
    __syncthreads();
    for (int j = pg < PGD ? pg : n; j < n; j += PGD) {
      const uint4 u = *(const uint4*)(vs + j * LD + kv_col<SWZ>(j, dg) * 8);
      float vf[8];
      kv_unpack8<KT>(u, vf);
#pragma unroll
      for (int g = 0; g < G; g++) {
        const float w = ps[g][j];
#pragma unroll
        for (int e = 0; e < 8; e++) acc[g][e] = fmaf(w, vf[e], acc[g][e]);
      }
    }
    __syncthreads();  // the next prefetch overwrites this stage; ps and sc are rewritten
  }
  cp_async_wait<0>();
  PDL_LATE();
  // Sums of exponentials over the block (only the first TP threads hold any).
#pragma unroll
  for (int g = 0; g < G; g++) {
    const float l = warp_sum(lsum[g]);
    if (lane == 0) wred[g][warp] = l;
  }
  __syncthreads();
  const bool single = nz == 1;
  float* pv = (float*)kvs;  // [PGD][HD]: the K/V stages are dead now
#pragma unroll
  for (int g = 0; g < G; g++) {
    float L = 0.f;
#pragma unroll
    for (int j = 0; j < NTD / 32; j++) L += wred[g][j];
    if (pg < PGD) {
#pragma unroll
      for (int e = 0; e < 8; e++) pv[pg * HD + dg * 8 + e] = acc[g][e];
    }
    __syncthreads();
    const int hh = h * G + g;
    float* pz = part + (((long)t * heads + hh) * zmax + z) * PART_LD;
    for (int d = tid; d < HD; d += NTD) {
      float s = 0.f;
#pragma unroll 8
      for (int k = 0; k < PGD; k++) s += pv[k * HD + d];
      if (single) {
        out[((long)t * heads + hh) * HD + d] = s / L;
      } else {
        pz[d] = s;
      }
    }
    if (!single && tid == 0) {
      pz[HD] = mrun[g];
      pz[HD + 1] = L;
    }
    __syncthreads();
  }
  if (single) return;
  decode_merge<NTD>(out, part, cnt, (float*)kvs, t, h, heads, kvh, zmax, nz);
}

#define ATTN_DECODE_ARGS                                                                                                 \
  const u16 *__restrict__ kc, const u16 *__restrict__ vc, const float *__restrict__ q, float *out, float *part, int *cnt, \
      const int *__restrict__ tokTab, const int *__restrict__ pos, const int *__restrict__ tabs, int kvh, float scale,   \
      int zmax, int chunk
extern "C" __global__ void __launch_bounds__(NT) attn_decode(ATTN_DECODE_ARGS) {
  attn_decode_impl<NT, DSTAGES, 0, KVDT>(kc, vc, q, out, part, cnt, tokTab, pos, tabs, kvh, scale, zmax, chunk);
}
// At most 80 registers where G ≤ 4 (3 blocks of 256 threads per SM, as
// many as the 2-stage tiles allow at head dim 128); larger groups keep what
// they need.
#define DEEP_MINB (G <= 4 && HD <= 128 ? 3 : 1)
extern "C" __global__ void __launch_bounds__(DNT_DEEP, DEEP_MINB) attn_decode_deep(ATTN_DECODE_ARGS) {
  attn_decode_impl<DNT_DEEP, DSTAGES_DEEP, DSWZ_DEEP, KVDT>(kc, vc, q, out, part, cnt, tokTab, pos, tabs, kvh, scale, zmax, chunk);
}
// Three stages up to head dim 128 (2 blocks per SM there): the deeper
// pipeline against the third block, for the bench to decide.
extern "C" __global__ void __launch_bounds__(DNT_DEEP) attn_decode_deep3(ATTN_DECODE_ARGS) {
  attn_decode_impl<DNT_DEEP, DSTAGES, DSWZ_DEEP, KVDT>(kc, vc, q, out, part, cnt, tokTab, pos, tabs, kvh, scale, zmax, chunk);
}

// ---------------------------------------------------------------------------
// The per-head preparation of q and k for attention (attn_prep, and
// attn_decode_tc_prep where it is folded into the decode attention): one
// warp's row of HD values in v (lane + 32·e), RMSNorm'd with nw (null:
// none), then rotated (rotate-half RoPE) with the cos and sin rows c and s
// of the token's position (c null or half 0: none). buf is HD floats of the
// warp's shared memory; on return v holds the result and buf is free.
#define PE ((HD + 31) / 32)
__device__ __forceinline__ void prep_row(float (&v)[PE], const float* nw, float eps, const float* c, const float* s, int half,
                                         float* buf) {
  const int lane = threadIdx.x & 31;
  if (nw != 0) {
    float ss = 0.f;
#pragma unroll
    for (int e = 0; e < PE; e++) ss += v[e] * v[e];
    ss = warp_sum(ss);
    const float inv = 1.f / sqrtf(ss / (float)HD + eps);
#pragma unroll
    for (int e = 0; e < PE; e++) {
      const int j = lane + 32 * e;
      if (j < HD) v[e] = v[e] * inv * META(nw + j);
    }
  }
  if (c != 0 && half > 0) {
#pragma unroll
    for (int e = 0; e < PE; e++) {
      const int j = lane + 32 * e;
      if (j < HD) buf[j] = v[e];
    }
    __syncwarp();
#pragma unroll
    for (int e = 0; e < PE; e++) {
      const int j = lane + 32 * e;
      if (j < half) {
        v[e] = buf[j] * META_ROPE(c + j) - buf[j + half] * META_ROPE(s + j);
      } else if (j < 2 * half) {
        const int i = j - half;
        v[e] = buf[j] * META_ROPE(c + i) + buf[i] * META_ROPE(s + i);
      }
    }
    __syncwarp();
  }
}

// One warp's row of HD floats into v (zero past HD).
__device__ __forceinline__ void load_row(float (&v)[PE], const float* row) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int e = 0; e < PE; e++) {
    const int j = lane + 32 * e;
    v[e] = j < HD ? row[j] : 0.f;
  }
}

// ---------------------------------------------------------------------------
// What comes between the q/k/v products and attention, in one launch: per
// head, the RMSNorm of q and k (qw/kw null: none), rotate-half RoPE at pos[t]
// (cosT null: none), q and k written back in place, and k and v stored as
// KVDT into the paged cache (as kv_store). One warp per (token, head) row of
// q, k and v; rows of HD elements.
struct PrepP {
  float* q;
  float* k;
  const float* v;
  const float* qw;
  const float* kw;
  const float* cosT;
  const float* sinT;
  const int* pos;
  const int* tokTab;
  const int* tabs;
  u16* kc;
  u16* vc;
  int T, heads, kvh, half;
  float qeps, keps;
};

#define PREP_WARPS 4

// attn_decode_tc (INFERNIX_CUDA_DECODE_ATTN=tc): attn_decode's grid, splits
// and merge with the products on the tensor cores, as prefill.cu computes
// them. The G query heads of token t are the rows of one 16-row mma tile
// (rows past G are zero and never written), Q and P in the cache's type.
// Each of the block's 4 warps takes 16 positions of every 64-position tile
// with its own running max and sums (split within the block), and the block
// combines the four before writing its partial: in log2 units inside, its
// max converted to natural units for the merge. attn_decode spends more time
// in its f32 dot products than its tiles take to arrive (run 7: 2.1 TB/s at
// 32K); here a tile costs each warp 2·HD/16 + HD/8 mma.
#if HD % 16 == 0 && HD <= 128 && G <= 16
#define TCW (NT / 32)

// attn_decode_tc_prep: attn_decode_tc with attn_prep folded in, for a batch
// whose tokens are all of different sequences (the host checks), so that
// no block reads a position another block of the launch stores. Every
// block prepares its G query heads itself from the raw q (in shared
// memory; the splits of a head compute the same values); the last split of
// (t, h), the one whose range holds position pos[t], prepares k and v,
// stores them into the cache (and k back into its row) before loading its
// first tile; the block that writes the output (the merging one, or the
// only split) writes the prepared q back over the raw one, after every
// other split of (t, h) has read it. Results are attn_prep's then
// attn_decode_tc's, bit for bit.
struct DecodePrepP {
  u16* kc;
  u16* vc;
  float* q;
  float* out;
  float* part;
  int* cnt;
  const int* tokTab;
  const int* pos;
  const int* tabs;
  float* k;
  const float* v;
  const float* qw;
  const float* kw;
  const float* cosT;
  const float* sinT;
  int kvh, zmax, chunk, half;
  float scale, qeps, keps;
  // ATTN_TIMING=1: where each block records its timeline (or 0).
  u64* timeline;
  // Not 0: q is not written back (not even a one-split token's), and the
  // last split does not merge. 1: the splits only write their partials;
  // attn_merge_splits merges them next (INFERNIX_CUDA_ATTN_DEFER). 2
  // (CLUSTER_MERGE): the launch's clusters span the grid's depth, and the
  // splits merge through their shared memory.
  int deferMerge;
};

// CLUSTER_MERGE (DecodePrepP.deferMerge == 2; INFERNIX_CUDA_ATTN_CLUSTER):
// the splits of token t and KV head h are the blocks of one cluster (the
// host launches clusters of gridDim.z blocks along z, so a block's rank is
// its split), and each block, idle splits included, writes an equal slice
// of the G·HD outputs. An active split pushes its partial into the owners'
// shared memory (cluster_push): for owner r, the sums of r's slice, then
// its G maxima (log2 units) and G sums of exponentials, at row z of r's
// receive area (crecv, over the prepared q, which every block has read
// before it arrives at the first barrier phase). After the second phase
// each block merges its slice from its own shared memory (cluster_gather).
// Why: at 640 positions attn_merge_splits is a launch of its own, ~1 µs
// after the attention's last block and ~2.5 µs long (run 20's step
// timeline) for 11 partials of 2 KB a head. Measured (run 21): in the
// step's timeline the attention then adds 10.2–10.5 µs a layer instead of
// 7.9 + 3.5 (its span 9.2–9.6 µs against 6.7: the barrier after the last
// split and the merge), the step 4,355–4,364 µs against 4,415; but a
// process each reads the same decode rate (225.0, 228.3, 224.8 tok/s at
// 512 against 225.3, 228.5, 224.9, 224.9). So opt-in. A first version
// that read the partials from the others' shared memory (two barriers
// after the loop) measured the same. The weights are the deferred merge's (exp of each max
// less the greatest), in log2 units: results differ from
// attn_merge_splits by rounding only (1.9e-5 in TestAttnPrepFold's logits).
#define CLUSTER_MAXZ 16
// The receive area's floats: csz rows of ceil(G·HD/csz) + 2G.
#define CRECV (G * HD + CLUSTER_MAXZ * (1 + 2 * G))
__device__ __forceinline__ int cluster_slice() { return (G * HD + (int)gridDim.z - 1) / (int)gridDim.z; }
// Output i = (g, d) of split z: o (and, at d = 0, g's max m and sum l).
__device__ __forceinline__ void cluster_push(float* crecv, int i, int g, int d, int z, float o, float m, float l) {
  const int per = cluster_slice(), rld = per + 2 * G;
  const int r = i / per;
  const saddr_t base = smem_addr(crecv) + z * rld * 4;
  st_cluster_f32(base + (i - r * per) * 4, r, o);
  if (d == 0) {
    for (int rr = 0; rr < (int)gridDim.z; rr++) {
      st_cluster_f32(base + (per + g) * 4, rr, m);
      st_cluster_f32(base + (per + G + g) * 4, rr, l);
    }
  }
}
__device__ __forceinline__ void cluster_gather(float* out, const float* crecv, int t, int h, int heads, int nz) {
  cluster_arrive();  // this block's pushes are done
  cluster_wait();    // and every other block's
  const int per = cluster_slice(), rld = per + 2 * G, rank = blockIdx.z;
  for (int j = threadIdx.x; j < per; j += blockDim.x) {
    const int i = rank * per + j;
    if (i >= G * HD) break;
    const int g = i / HD;
    float M = NEG_INF;
    for (int z = 0; z < nz; z++) M = fmaxf(M, crecv[z * rld + per + g]);
    float L = 0.f, O = 0.f;
    for (int z = 0; z < nz; z++) {
      const float f = exp2f(crecv[z * rld + per + g] - M);
      L = fmaf(f, crecv[z * rld + per + G + g], L);
      O = fmaf(f, crecv[z * rld + j], O);
    }
    out[((long)t * heads + (long)h * G + g) * HD + (i - g * HD)] = O / L;
  }
}

// ST (attn_decode_tc2, INFERNIX_CUDA_DECODE_ATTN=tc2; G ≤ 8): the same
// attention with the products transposed, Sᵀ = K·Qᵀ and Oᵀ = Vᵀ·Pᵀ: the
// tile's 16 positions of a warp (and the head dims) are the mma's M, the
// G query heads its N of 8, so that a tile costs each warp HD/16 mma for
// each product instead of HD/8 (the padding is half of N instead of three
// quarters of M), the output accumulators half the registers, and P goes
// from the Sᵀ accumulators to the B operand through movmatrix. Each
// lane's two heads reduce their max and sum over the 8 lanes of their
// column. Adds in another order than the default: results differ by
// rounding. Prepared in run 15 after the device time ran out.
template <int KT, bool PREP = false, bool ST = false>
__device__ __forceinline__ void attn_decode_tc_impl(const u16* kc, const u16* vc, const float* q, float* out, float* part, int* cnt,
                                                    const int* __restrict__ tokTab, const int* __restrict__ pos,
                                                    const int* __restrict__ tabs, int kvh, float scale, int zmax, int chunk,
                                                    const DecodePrepP* pp = 0) {
  STEP_TIMER();
  constexpr int STG = 2 * TP * KV_LD;
  const u64 at0 = ATTN_TIMING ? global_ns() : 0;
  // ATTN_EARLY (the fold): the splits' first tiles are requested before
  // PDL_WAIT (below), so the wait comes after them.
  constexpr bool preWait = PREP && ATTN_EARLY;
  if (!preWait) PDL_ENTRY();
  constexpr bool DYN = PREP && !ST && ATTN_DYN && G <= 8;  // (the warps' states of a unit fit in a stage)
  const int h = blockIdx.x, t = blockIdx.y, z = blockIdx.z;
  const int len = META(pos + t) + 1;
  const int nz = (len + chunk - 1) / chunk;
  // The block's (first) split: z, or with ATTN_DYN the unit it starts
  // with (the last for block 0; past the units: none).
  const int zu = !DYN ? z : z >= nz ? nz : z == 0 ? nz - 1 : z - 1;
  const int start = zu * chunk;
  const int end = min(start + chunk, len);
  const int ntiles = (end - start + TP - 1) / TP;
  const int heads = kvh * G;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gq = lane >> 2, tq = lane & 3;  // mma fragment coordinates
  EXTERN_SMEM(u16, kvs);
  __shared__ float qprep[PREP ? CRECV : 1];  // CLUSTER_MERGE: then its receive area
  __shared__ float kbuf[PREP ? HD : 1];

  const int* tab = tabs + META(tokTab + t);
  // This thread's fixed column and first row in every tile (TC_FAST).
  const int cg = tid % DG, r0 = tid / DG;
  const saddr_t sk0 = smem_addr(kvs) + (r0 * KV_LD + cg * 8) * 2;
  u16* const zv0 = kvs + (TP + r0) * KV_LD + cg * 8;
  const int off = r0 * HD + cg * 8;
  // With PREP, the split that holds the new position stores it. Without
  // ATTN_NEWROW it does so before it loads its tiles; with it, it loads
  // them at once like the other splits, all but the new row, which it
  // writes into the stage from the values it stores (nkv).
  const bool newrow = PREP && ATTN_NEWROW && zu == nz - 1;
  __shared__ u16 nkv[PREP && ATTN_NEWROW ? 2 * HD : 1];
  auto load_at = [&](int st, int p0, int e) {  // the tile of positions p0… (before e) into stage st
    if (TC_FAST) {
      tc_load(sk0 + st * STG * 2, zv0 + st * STG, kc, vc, tab, p0, e, kvh, h, off, r0);
    } else {
      decode_load<NT, 0, true>(kvs + st * STG, kc, vc, tab, p0, e, kvh, h);
    }
  };
  auto load = [&](int it) {  // tile it of the split into its stage
    const int e = newrow && it == ntiles - 1 ? end - 1 : end;  // the new position is end − 1
    load_at(it % DSTAGES, start + it * TP, e);
  };
  const bool early = !PREP || ATTN_NEWROW || zu != nz - 1;
  if (preWait) {
    if (early && start < len) {
#pragma unroll
      for (int i = 0; i < DSTAGES - 1; i++) {
        if (i < ntiles) load(i);
        cp_async_commit();
      }
    }
    PDL_ENTRY();
  }
  const u64 at1 = ATTN_TIMING ? global_ns() : 0;
  u64 at2 = 0, atm[3] = {0, 0, 0};
  // The splits merge through the cluster's shared memory (CLUSTER_MERGE).
  const bool clm = PREP && pp->deferMerge == 2;
  if (start >= len) {
    if (clm) {  // idle splits merge a slice too
      cluster_arrive();
      cluster_wait();
      cluster_gather(out, qprep, t, h, heads, nz);
    }
    return;
  }
  // ATTN_DYN's stream of units: dunit holds the block's units by their
  // place in its sequence (mod 4; the first is zu), each written by thread
  // 0 (publish) before a barrier that precedes its first read. Thread 0
  // asks for the next unit when the first tile of one is requested, and
  // in the main loop publishes the answer an iteration later (the loader
  // needs it only after the unit's other tiles, at least one more), so
  // that the block's barrier never waits on the atomic's round trip (run
  // 26: ~0.9 µs a unit when published in the same iteration). The loader
  // (issue) moves to the next unit once every tile of one is requested,
  // the tiles' stages following the stream (ls).
  __shared__ int dunit[DYN ? 4 : 1];
  int* const ctr = cnt + (long)t * kvh + h;
  const bool grabs = DYN && nz > (int)gridDim.z;
  int ask = 0, askAt = 0;  // thread 0: what its last ask returned, and which unit of the sequence it names (0: none waiting)
  bool inLoop = false, askNew = false;  // askNew: the ask was made in this iteration of the main loop
  if (grabs && tid == 0) ask = atomicAdd(ctr, 1), askAt = 1;
  int lk = 0, lu = zu, lp = start, le = end, lnt = ntiles, lt = 0, ls = 0;
  auto unit_at = [&](int k) { return grabs ? dunit[k & 3] : -1; };  // the block's k-th unit (k ≥ 1), or −1
  auto issue = [&]() {                                                  // the stream's next tile, and its group
    if (lu >= 0 && lt == lnt) {
      lu = unit_at(++lk);
      if (lu >= 0) {
        lp = lu * chunk, le = min(lp + chunk, len), lnt = (le - lp + TP - 1) / TP, lt = 0;
        if (tid == 0) ask = atomicAdd(ctr, 1), askAt = lk + 1, askNew = inLoop;
      }
    }
    if (lu >= 0) load_at(ls % DSTAGES, lp + TP * lt++, le);
    cp_async_commit();
    ls++;
  };
  auto publish = [&]() {
    if (grabs && tid == 0 && askAt != 0) {
      if (askNew) {  // the next iteration's
        askNew = false;
        return;
      }
      if (ask == nz - 1) atomicExch(ctr, 0);  // the launch's last ask of this counter
      const int u = (int)gridDim.z - 1 + ask;
      dunit[askAt & 3] = u <= nz - 2 ? u : -1;
      askAt = 0;
    }
  };
  if (early && !preWait) {
#pragma unroll
    for (int i = 0; i < DSTAGES - 1; i++) {
      if (DYN) {
        issue();
        continue;
      }
      if (i < ntiles) load(i);
      cp_async_commit();
    }
  }
  if (PREP) {
    const long cs = (long)(len - 1) * pp->half;
    const float* c = pp->cosT == 0 ? 0 : pp->cosT + cs;
    const float* sn = pp->sinT + cs;
    for (int g = warp; g < G; g += TCW) {
      float v[PE];
      load_row(v, q + ((long)t * heads + (long)h * G + g) * HD);
      prep_row(v, pp->qw, pp->qeps, c, sn, pp->half, qprep + g * HD);
#pragma unroll
      for (int e = 0; e < PE; e++) {
        const int j = lane + 32 * e;
        if (j < HD) qprep[g * HD + j] = v[e];
      }
    }
    if (zu == nz - 1 && warp < 2) {
      // Warp 0: k (prepared, and written back to its row); warp 1: v.
      float* row = (warp == 0 ? pp->k : (float*)pp->v) + ((long)t * kvh + h) * HD;
      float v[PE];
      load_row(v, row);
      if (warp == 0) prep_row(v, pp->kw, pp->keps, c, sn, pp->half, kbuf);
      const long blk = META(tab + ((len - 1) >> 6));
      u16* dst = (warp == 0 ? pp->kc : pp->vc) + ((blk * kvh + h) * 64 + ((len - 1) & 63)) * HD;
#pragma unroll
      for (int e = 0; e < PE; e++) {
        const int j = lane + 32 * e;
        if (j < HD) {
          const u16 x = kv_enc<KT>(v[e]);
          dst[j] = x;
          if (newrow) nkv[warp * HD + j] = x;
          if (warp == 0) row[j] = v[e];
        }
      }
    }
    if (DYN) publish();
    __syncthreads();  // qprep, and the stored position, before they are read
  }
  if (!early) {
#pragma unroll
    for (int i = 0; i < DSTAGES - 1; i++) {
      if (DYN) {
        issue();
        continue;
      }
      if (i < ntiles) load(i);
      cp_async_commit();
    }
  }
  // Q fragments: rows gq and gq + 8 are heads h·G + row (zero past G).
  const float* qrow = PREP ? qprep : q + ((long)t * heads + (long)h * G) * HD;
  u32 qa[HD / 16][4];
#pragma unroll
  for (int ks = 0; ks < HD / 16; ks++) {
    if (ST) {
      // B = Qᵀ: lane (gq, tq) holds head gq's dims 2tq, 2tq+1 (and + 8).
      const int c = ks * 16 + 2 * tq;
      float x0 = 0.f, x1 = 0.f, x2 = 0.f, x3 = 0.f;
      if (gq < G) x0 = qrow[gq * HD + c], x1 = qrow[gq * HD + c + 1], x2 = qrow[gq * HD + c + 8], x3 = qrow[gq * HD + c + 9];
      qa[ks][0] = pack_kt<KT>(x0, x1);
      qa[ks][1] = pack_kt<KT>(x2, x3);
      continue;
    }
    const int c = ks * 16 + 2 * tq;
    float x[4][2] = {{0.f, 0.f}, {0.f, 0.f}, {0.f, 0.f}, {0.f, 0.f}};
    if (gq < G) {
      x[0][0] = qrow[gq * HD + c], x[0][1] = qrow[gq * HD + c + 1];
      x[2][0] = qrow[gq * HD + c + 8], x[2][1] = qrow[gq * HD + c + 9];
    }
    if (gq + 8 < G) {
      x[1][0] = qrow[(gq + 8) * HD + c], x[1][1] = qrow[(gq + 8) * HD + c + 1];
      x[3][0] = qrow[(gq + 8) * HD + c + 8], x[3][1] = qrow[(gq + 8) * HD + c + 9];
    }
#pragma unroll
    for (int i = 0; i < 4; i++) qa[ks][i] = pack_kt<KT>(x[i][0], x[i][1]);
  }
  if (clm) cluster_arrive();  // qprep read: the others may push into it
  constexpr int NO = ST ? HD / 16 : HD / 8;  // output accumulator tiles
  float o[NO][4];
#pragma unroll
  for (int nd = 0; nd < NO; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f};
  const float sl2 = scale * 1.4426950408889634f;  // scores in log2 units
  // Shared addresses of this lane's ldmatrix rows in stage 0: K rows of the
  // warp's positions, V rows (transposed loads) likewise.
  const saddr_t kf = smem_addr(kvs) + ((warp * 16 + (lane & 7)) * KV_LD + (lane >> 3) * 8) * 2;
  const saddr_t vf = smem_addr(kvs) + ((TP + warp * 16 + (lane & 15)) * KV_LD + (lane >> 4) * 8) * 2;
  // ST: the A operands. K (Sᵀ's A, positions × dims): matrix i = lane/8 is
  // rows (i & 1)·8…, dims (i >> 1)·8…; V (Oᵀ's A, dims × positions, loaded
  // transposed): matrix i is positions (i >> 1)·8…, dims (i & 1)·8….
  const saddr_t ka = smem_addr(kvs) + ((warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * KV_LD + (lane >> 4) * 8) * 2;
  const saddr_t va = smem_addr(kvs) + ((TP + warp * 16 + ((lane >> 4) & 1) * 8 + (lane & 7)) * KV_LD + ((lane >> 3) & 1) * 8) * 2;

  // One tile of the stage at byte offset so into o, m and l (not ST):
  // this warp's 16 positions p0…, those from end on masked.
  auto tile = [&](u32 so, int p0, int end) {
    // S = Q·Kᵀ over the warp's 16 positions: two n-tiles of 8.
    float s[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; kk += 2) {
        u32 b0, b1, b2, b3;
        ldsm_x4(kf + so + (nt * 8 * KV_LD + kk * 16) * 2, b0, b1, b2, b3);
        mma16816<KT>(s[nt], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], b0, b1);
        if (kk + 1 < HD / 16) mma16816<KT>(s[nt], qa[kk + 1][0], qa[kk + 1][1], qa[kk + 1][2], qa[kk + 1][3], b2, b3);
      }
    }
    // Positions past the split's end are masked (only a split's last tile
    // has any); then the online softmax.
    if (p0 + 16 <= end) {
#pragma unroll
      for (int nt = 0; nt < 2; nt++) {
#pragma unroll
        for (int e = 0; e < 4; e++) s[nt][e] *= sl2;
      }
    } else {
#pragma unroll
      for (int nt = 0; nt < 2; nt++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int kp = p0 + nt * 8 + 2 * tq + (e & 1);
          s[nt][e] = kp < end ? s[nt][e] * sl2 : NEG_INF;
        }
      }
    }
    online_softmax<2, NO, true>(s, m, l, o);
    // O += P·V: the two n-tiles of P are one 16-wide k step.
    const u32 a0 = pack_kt<KT>(s[0][0], s[0][1]), a1 = pack_kt<KT>(s[0][2], s[0][3]);
    const u32 a2 = pack_kt<KT>(s[1][0], s[1][1]), a3 = pack_kt<KT>(s[1][2], s[1][3]);
#pragma unroll
    for (int nd = 0; nd < NO; nd += 2) {
      u32 b0, b1, b2, b3;
      ldsm_x4_t(vf + so + nd * 8 * 2, b0, b1, b2, b3);
      mma16816<KT>(o[nd], a0, a1, a2, a3, b0, b1);
      mma16816<KT>(o[nd + 1], a0, a1, a2, a3, b2, b3);
    }
  };

  // ATTN_TIMING's record of the block (at3: its loop's end; tiles: how
  // many it added).
  auto record = [&](u64 at3, bool merged, int tiles) {
    if (ATTN_TIMING && PREP && tid == 0 && pp->timeline != 0) {
      u64* tp = pp->timeline + 16 * (((long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x);
      tp[0] = at0;
      tp[1] = at1;
      tp[2] = at2;
      tp[3] = at3;
      tp[4] = global_ns();
      tp[5] = sm_id() | (u64)merged << 32;
      tp[6] = tiles;
      tp[7] = nz;
      tp[8] = atm[0];
      tp[9] = atm[1];
      tp[10] = atm[2];
    }
  };
  if (DYN) {
    // The units' tiles as one stream (issue keeps DSTAGES − 1 ahead); at
    // a unit's last tile its partial, through the stage that tile left
    // (the next load into it is the next iteration's), as the static
    // splits write theirs below.
    int ck = 0, cu = zu, cp0 = start, ce = end, cn = ntiles, ct = 0, cs = 0;
    inLoop = true;
    for (;;) {
      if (ct == cn) {
        cu = unit_at(++ck);
        if (cu < 0) break;
        cp0 = cu * chunk, ce = min(cp0 + chunk, len), cn = (ce - cp0 + TP - 1) / TP, ct = 0;
      }
      issue();
      cp_async_wait<DSTAGES - 1>();
      __syncthreads();
      tile((cs % DSTAGES) * STG * 2, cp0 + ct * TP + warp * 16, ce);
      publish();
      __syncthreads();
      if (ATTN_TIMING && cs == 0) at2 = global_ns();
      ct++, cs++;
      if (ct < cn) continue;
      // ATTN_ACC: the next unit (the loader has read its number already:
      // it runs DSTAGES − 1 tiles ahead and a unit has at least as many)
      // adds into the same state.
      if (ATTN_ACC && grabs && unit_at(ck + 1) >= 0) continue;
#pragma unroll
      for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
      }
      // The warps' rows of the G heads only: mw, lw [TCW][16], ow [TCW][G][OW_LD].
      float* mw = (float*)(kvs + ((cs - 1) % DSTAGES) * STG);
      float* lw = mw + TCW * 16;
      float* ow = lw + TCW * 16;
      constexpr int OW_LD = HD + OW_PAD;
      static_assert(!DYN || 2 * TCW * 16 + TCW * G * OW_LD <= STG / 2, "ATTN_DYN: a unit's warp states fit in a stage");
      if (tq == 0) {
        mw[warp * 16 + gq] = m[0], mw[warp * 16 + gq + 8] = m[1];
        lw[warp * 16 + gq] = l[0], lw[warp * 16 + gq + 8] = l[1];
      }
#pragma unroll
      for (int nd = 0; nd < NO; nd++) {
        const int c = nd * 8 + 2 * tq;
        if (gq < G) *(float2*)(ow + (warp * G + gq) * OW_LD + c) = make_float2(o[nd][0], o[nd][1]);
        if (gq + 8 < G) *(float2*)(ow + (warp * G + gq + 8) * OW_LD + c) = make_float2(o[nd][2], o[nd][3]);
      }
      __syncthreads();
      for (int i = tid; i < G * HD; i += NT) {
        const int g = i / HD, d = i - g * HD;
        float M = NEG_INF;
#pragma unroll
        for (int w = 0; w < TCW; w++) M = fmaxf(M, mw[w * 16 + g]);
        float L = 0.f, O = 0.f;
#pragma unroll
        for (int w = 0; w < TCW; w++) {
          const float mv = mw[w * 16 + g];
          const float f = mv == NEG_INF ? 0.f : exp2f(mv - M);
          L = fmaf(f, lw[w * 16 + g], L);
          O = fmaf(f, ow[(w * G + g) * OW_LD + d], O);
        }
        const int hh = h * G + g;
        // ATTN_ACC with one block a (token, KV head): it added every unit.
        if (nz == 1 || ATTN_ACC && grabs && gridDim.z == 1) {
          out[((long)t * heads + hh) * HD + d] = O / L;
        } else {
          float* pz = part + (((long)t * heads + hh) * zmax + (ATTN_ACC && grabs ? (int)blockIdx.z : cu)) * PART_LD;
          pz[d] = O;
          if (d == 0) {
            pz[HD] = M * 0.6931471805599453f;  // natural units, as attn_decode's partials
            pz[HD + 1] = L;
          }
        }
      }
      __syncthreads();  // the stage is read before the next load into it
#pragma unroll
      for (int nd = 0; nd < NO; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
      m[0] = m[1] = NEG_INF, l[0] = l[1] = 0.f;
    }
    cp_async_wait<0>();
    const u64 at3 = ATTN_TIMING ? global_ns() : 0;
    PDL_LATE();
    record(at3, false, cs);
    return;
  }
  for (int it = 0; it < ntiles; it++) {
    if (it + DSTAGES - 1 < ntiles) load(it + DSTAGES - 1);
    cp_async_commit();
    cp_async_wait<DSTAGES - 1>();  // tile it has landed (groups complete in order)
    __syncthreads();
    if (newrow && it == ntiles - 1) {  // the new position's K and V rows, as stored
      u16* sg = kvs + (it % DSTAGES) * STG;
      const int r = end - 1 - (start + it * TP);
      for (int j = tid; j < 2 * HD; j += NT) sg[(j < HD ? r : TP + r) * KV_LD + j % HD] = nkv[j];
      __syncthreads();
    }
    // This warp's 16 positions of the stage, at fixed offsets from kf, vf.
    const u32 so = (it % DSTAGES) * STG * 2;
    const int p0 = start + it * TP + warp * 16;
    if (ST) {
      // Sᵀ: lane (gq, tq) holds positions gq (e < 2) and gq + 8 of heads
      // 2tq + (e & 1).
      float st[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int ks = 0; ks < HD / 16; ks++) {
        u32 a0, a1, a2, a3;
        ldsm_x4(ka + so + ks * 16 * 2, a0, a1, a2, a3);
        mma16816<KT>(st, a0, a1, a2, a3, qa[ks][0], qa[ks][1]);
      }
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int kp = p0 + gq + 8 * (e >> 1);
        st[e] = p0 + 16 <= end || kp < end ? st[e] * sl2 : NEG_INF;
      }
      float corr[2];
#pragma unroll
      for (int j = 0; j < 2; j++) {
        float mx = fmaxf(st[j], st[2 + j]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        const float mn = fmaxf(m[j], mx);
        corr[j] = mn == NEG_INF ? 1.f : exp2f(m[j] - mn);
        m[j] = mn;
      }
      if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
        l[0] *= corr[0];
        l[1] *= corr[1];
#pragma unroll
        for (int nd = 0; nd < NO; nd++) {
          o[nd][0] *= corr[0];
          o[nd][1] *= corr[1];
          o[nd][2] *= corr[0];
          o[nd][3] *= corr[1];
        }
      }
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float pe = m[e & 1] == NEG_INF ? 0.f : exp2f(st[e] - m[e & 1]);
        st[e] = pe;
        l[e & 1] += pe;
      }
      // Pᵀ as the B operand (positions × heads): the accumulators' 8×8
      // halves transposed.
      const u32 b0 = movm_t(pack_kt<KT>(st[0], st[1])), b1 = movm_t(pack_kt<KT>(st[2], st[3]));
#pragma unroll
      for (int nd = 0; nd < NO; nd++) {
        u32 a0, a1, a2, a3;
        ldsm_x4_t(va + so + nd * 16 * 2, a0, a1, a2, a3);
        mma16816<KT>(o[nd], a0, a1, a2, a3, b0, b1);
      }
      __syncthreads();  // the stage is overwritten by the load issued next iteration
      continue;
    }
    tile(so, p0, end);
    __syncthreads();  // the stage is overwritten by the load issued next iteration
    if (ATTN_TIMING && it == 0) at2 = global_ns();
  }
  cp_async_wait<0>();
  const u64 at3 = ATTN_TIMING ? global_ns() : 0;
  if (PREP && DEFER_LATE && pp->deferMerge) {
    PDL_LAUNCH();
  } else {
    PDL_LATE();
  }
#pragma unroll
  for (int i = 0; i < 2; i++) {
    if (ST) {  // a head's sum is spread over its column's 8 lanes
      l[i] += __shfl_xor_sync(0xffffffffu, l[i], 4);
      l[i] += __shfl_xor_sync(0xffffffffu, l[i], 8);
      l[i] += __shfl_xor_sync(0xffffffffu, l[i], 16);
    } else {
      l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
      l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
  }
  // The four warps' states through the dead stages: mw, lw [TCW][16],
  // ow [TCW][16][OW_LD]; then output (g, d) = Σ_w 2^(m_w − M) o_w / Σ_w 2^(m_w − M) l_w.
  __syncthreads();
  float* mw = (float*)kvs;
  float* lw = mw + TCW * 16;
  float* ow = lw + TCW * 16;
  constexpr int OW_LD = HD + OW_PAD;
  if (ST) {
    // Heads 2tq and 2tq + 1; output dims 16·nd + gq (+ 8).
    if (gq == 0) {
      mw[warp * 16 + 2 * tq] = m[0], mw[warp * 16 + 2 * tq + 1] = m[1];
      lw[warp * 16 + 2 * tq] = l[0], lw[warp * 16 + 2 * tq + 1] = l[1];
    }
#pragma unroll
    for (int nd = 0; nd < NO; nd++) {
#pragma unroll
      for (int e = 0; e < 4; e++) ow[(warp * 16 + 2 * tq + (e & 1)) * OW_LD + nd * 16 + gq + 8 * (e >> 1)] = o[nd][e];
    }
  } else {
    if (tq == 0) {
      mw[warp * 16 + gq] = m[0], mw[warp * 16 + gq + 8] = m[1];
      lw[warp * 16 + gq] = l[0], lw[warp * 16 + gq + 8] = l[1];
    }
#pragma unroll
    for (int nd = 0; nd < NO; nd++) {
      const int c = nd * 8 + 2 * tq;  // even: 8-byte aligned pairs
      *(float2*)(ow + (warp * 16 + gq) * OW_LD + c) = make_float2(o[nd][0], o[nd][1]);
      *(float2*)(ow + (warp * 16 + gq + 8) * OW_LD + c) = make_float2(o[nd][2], o[nd][3]);
    }
  }
  __syncthreads();
  if (clm) cluster_wait();  // every block of the cluster has read its qprep
  const bool single = nz == 1;
  for (int i = tid; i < G * HD; i += NT) {
    const int g = i / HD, d = i - g * HD;
    float M = NEG_INF;
#pragma unroll
    for (int w = 0; w < TCW; w++) M = fmaxf(M, mw[w * 16 + g]);
    float L = 0.f, O = 0.f;
#pragma unroll
    for (int w = 0; w < TCW; w++) {
      const float mv = mw[w * 16 + g];
      const float f = mv == NEG_INF ? 0.f : exp2f(mv - M);
      L = fmaf(f, lw[w * 16 + g], L);
      O = fmaf(f, ow[(w * 16 + g) * OW_LD + d], O);
    }
    const int hh = h * G + g;
    if (clm) {
      cluster_push(qprep, i, g, d, z, O, M, L);
    } else if (single) {
      out[((long)t * heads + hh) * HD + d] = O / L;
    } else {
      float* pz = part + (((long)t * heads + hh) * zmax + z) * PART_LD;
      pz[d] = O;
      if (d == 0) {
        pz[HD] = M * 0.6931471805599453f;  // natural units, as attn_decode's partials
        pz[HD + 1] = L;
      }
    }
  }
  if (clm) cluster_gather(out, qprep, t, h, heads, nz);
  bool wrote = single && !clm;
  if (!single && !(PREP && pp->deferMerge)) {
    __syncthreads();  // mw, lw and ow are read before the merge reuses the stages
    wrote = decode_merge<NT, DM_ASYNC != 0>(out, part, cnt, (float*)kvs, t, h, heads, kvh, zmax, nz, DSTAGES * STG / 2, atm);
  }
  if (PREP && wrote && !pp->deferMerge) {
    // Every other split of (t, h) has counted, so has read the raw q.
    float* qd = (float*)q + ((long)t * heads + (long)h * G) * HD;
    for (int i = tid; i < G * HD; i += NT) qd[i] = qprep[i];
  }
  record(at3, wrote && !single, ntiles);
}

extern "C" __global__ void __launch_bounds__(NT) attn_decode_tc(ATTN_DECODE_ARGS) {
  attn_decode_tc_impl<KVDT>(kc, vc, q, out, part, cnt, tokTab, pos, tabs, kvh, scale, zmax, chunk);
}

extern "C" __global__ void __launch_bounds__(NT) attn_decode_tc_prep(const DecodePrepP p) {
  attn_decode_tc_impl<KVDT, true>(p.kc, p.vc, p.q, p.out, p.part, p.cnt, p.tokTab, p.pos, p.tabs, p.kvh, p.scale, p.zmax, p.chunk,
                                  &p);
}
// attn_merge_splits (the default; INFERNIX_CUDA_ATTN_DEFER=0: the last
// split merges, decode_merge): the merge of the folded
// decode attention's splits as a kernel of its own, one warp per (query
// head, token, 32 dims), launched after attn_decode_tc_prep with
// deferMerge set: the same weights and additions in the same order as
// decode_merge (bit-identical), spread over heads·T·HD/32 warps instead of
// the last split of each KV head, without the count's fence and atomic,
// and with every load of a warp requested at once (up to MS_BATCH splits'
// sums, and where nz ≤ 64 every split's max and sum of exponentials). Why:
// run 18 measured the in-kernel merge at 5.3 µs of the 10.2 µs launch at
// 640 positions and 8.0 of 47.6 at 32K (two dependent round trips before
// it starts, then ~67 KB read into one SM); here a kernel boundary (hidden
// in part by PDL) and about one round trip. Measured (run 19, a process
// each): 229.9, 229.0 / 176.2, 176.3 tok/s at 512 / 32K against 227.7,
// 227.4, 225.5 / 172.9, 172.8, 171.4 with the in-kernel merge. Tokens whose range is one
// split were written by the attention and are skipped. The host keeps
// zmax ≤ MS_MAXZ.
#define MS_MAXZ 1024
// A token's split weights wz[z] = exp(m_z − max) and their sum of
// exponentials l (returned; every lane has it) where it has nz ≤ 64
// splits: a lane holds splits lane and lane + 32's maxima and sums (mz,
// lz; NEG_INF and 0 past nz). attn_merge_splits's order, which attn_oproj
// shares.
__device__ __forceinline__ float warp_split_weights(const float (&mz)[2], const float (&lz)[2], int nz, float* wz) {
  const int lane = threadIdx.x & 31;
  const float m = warp_max(fmaxf(fmaxf(NEG_INF, mz[0]), mz[1]));
  float l = 0.f;
#pragma unroll
  for (int j = 0; j < 2; j++) {
    const int zz = lane + 32 * j;
    if (zz < nz) {
      const float w = expf(mz[j] - m);
      wz[zz] = w;
      l += lz[j] * w;
    }
  }
  return warp_sum(l);
}
// Σ_z pv_z · wz[z] over a token's nz splits in split order, for one dim:
// pv holds the first B splits' sums (requested earlier), the others are
// requested B at a time from pd (a split's row every PART_LD).
template <int B>
__device__ __forceinline__ float merge_dim(float (&pv)[B], const float* pd, const float* wz, int nz) {
  float a = 0.f;
#pragma unroll
  for (int i = 0; i < B; i++) {
    if (i < nz) a = fmaf(pv[i], wz[i], a);
  }
  for (int z0 = B; z0 < nz; z0 += B) {
#pragma unroll
    for (int i = 0; i < B; i++) pv[i] = z0 + i < nz ? __ldcg(pd + (long)(z0 + i) * PART_LD) : 0.f;
#pragma unroll
    for (int i = 0; i < B; i++) {
      if (z0 + i < nz) a = fmaf(pv[i], wz[z0 + i], a);
    }
  }
  return a;
}
// MS_BATCH: the splits whose sums a lane requests at once; more wait for
// another round trip. 64 (run 20; it was 32): 32K positions make 33
// splits, whose 33rd took a second round trip of its own.
#ifndef MS_BATCH
#define MS_BATCH 64
#endif
// MS_SPEC=1: attn_merge_splits requests the partials of all zmax slots at
// once, before it reads the token's position (which says how many of them
// this step's splits wrote), so that the position's load, from DRAM at
// every layer (KEEP_META above), is not a link of the merge's chain. The
// slots past the token's splits hold stale values, never added:
// bit-identical. The default since run 28 (with KEEP_META=2).
#ifndef MS_SPEC
#define MS_SPEC 1
#endif
extern "C" __global__ void __launch_bounds__(32) attn_merge_splits(float* __restrict__ out, const float* __restrict__ part,
                                                                   const int* __restrict__ pos, int heads, int zmax, int chunk) {
  STEP_TIMER();
#ifdef MS_TRIGGER
  PDL_WAIT();
  step_waited();
  if (MS_TRIGGER == 0) PDL_LAUNCH();
#else
  PDL_ENTRY();
#endif
  __shared__ float wz[MS_MAXZ];
  const int hh = blockIdx.x, t = blockIdx.y, lane = threadIdx.x, d = blockIdx.z * 32 + lane;
  const float* pp = part + ((long)t * heads + hh) * zmax * PART_LD;
  const float* pd = pp + min(d, HD - 1);  // lanes past HD repeat the last dim, not written
  // MS_SPEC: every slot's partial (zmax) is requested before the position
  // that says how many hold this step's splits; the others are never used.
  const int zs = MS_SPEC ? zmax : 0;
  float pv[MS_BATCH];  // the first splits' sums of dim d
  float mz[2], lz[2];  // with nz ≤ 64: a lane's splits' maxima and sums of exponentials
  if (MS_SPEC) {
#pragma unroll
    for (int i = 0; i < MS_BATCH; i++) pv[i] = i < zs ? __ldcg(pd + (long)i * PART_LD) : 0.f;
#pragma unroll
    for (int j = 0; j < 2; j++) {
      const int zz = lane + 32 * j;
      mz[j] = zz < zs ? __ldcg(pp + (long)zz * PART_LD + HD) : NEG_INF;
      lz[j] = zz < zs ? __ldcg(pp + (long)zz * PART_LD + HD + 1) : 0.f;
    }
  }
  int nz = (META(pos + t) + chunk) / chunk;  // ceil((pos + 1) / chunk)
  if (ATTN_ACC) nz = min(nz, zmax);              // units past the blocks were added into their slots
  if (nz == 1) return;
  if (!MS_SPEC) {
#pragma unroll
    for (int i = 0; i < MS_BATCH; i++) pv[i] = i < nz ? __ldcg(pd + (long)i * PART_LD) : 0.f;
  }
  // split_weights, with every split's max and sum requested at once where
  // nz ≤ 64 (the same order: a lane's splits lane, lane + 32).
  float l;
  if (nz <= 64) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
      const int zz = lane + 32 * j;
      if (MS_SPEC) {
        mz[j] = zz < nz ? mz[j] : NEG_INF;
        lz[j] = zz < nz ? lz[j] : 0.f;
      } else {
        mz[j] = zz < nz ? __ldcg(pp + (long)zz * PART_LD + HD) : NEG_INF;
        lz[j] = zz < nz ? __ldcg(pp + (long)zz * PART_LD + HD + 1) : 0.f;
      }
    }
    l = warp_split_weights(mz, lz, nz, wz);
  } else {
    l = split_weights(pp, nz, wz);
  }
  __syncwarp();
  const float a = merge_dim(pv, pd, wz, nz);
  if (d < HD) out[((long)t * heads + hh) * HD + d] = a / l;
}

// attn_merge_wide: attn_merge_splits for launches of more than 64 splits'
// slots (zmax; ATTN_DYN's units at long contexts: 257 of 2 tiles at 32K),
// one block of MW_NT threads per (query head, token, 32 dims). Every
// thread requests, at once, its warp's share of the splits' sums of dim
// blockIdx.z·32 + lane (nz/8 in order, up to MS_BATCH a round) and every
// MW_NT-th split's max and sum of exponentials; the block reduces the
// maxima and the sums (warps in order), each warp adds its share with the
// weights, and warp 0 adds the eight shares in order. Where
// attn_merge_splits would take a round trip per 32 splits for the weights
// and per MS_BATCH for the sums, this takes about one. The additions run
// in another order than attn_merge_splits's: results differ by rounding;
// a launch's results depend only on nz, so a token gets the same bits
// whichever block took its units.
#define MW_NT 256
extern "C" __global__ void __launch_bounds__(MW_NT) attn_merge_wide(float* __restrict__ out, const float* __restrict__ part,
                                                                    const int* __restrict__ pos, int heads, int zmax, int chunk) {
  STEP_TIMER();
  PDL_ENTRY();
  constexpr int NW = MW_NT / 32, ZT = (MS_MAXZ + MW_NT - 1) / MW_NT;
  __shared__ float wz[MS_MAXZ];
  __shared__ float red[NW][32];
  __shared__ float rm[NW], rl[NW];
  const int hh = blockIdx.x, t = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int d = blockIdx.z * 32 + lane;
  int nz = (META(pos + t) + chunk) / chunk;  // ceil((pos + 1) / chunk)
  if (ATTN_ACC) nz = min(nz, zmax);              // (attn_merge_splits)
  if (nz == 1) return;
  const float* pp = part + ((long)t * heads + hh) * zmax * PART_LD;
  const float* pd = pp + min(d, HD - 1);  // lanes past HD repeat the last dim, not written
  const int q = (nz + NW - 1) / NW, z0 = warp * q, z1 = min(z0 + q, nz);
  float pv[MS_BATCH];
#pragma unroll
  for (int i = 0; i < MS_BATCH; i++) pv[i] = z0 + i < z1 ? __ldcg(pd + (long)(z0 + i) * PART_LD) : 0.f;
  float mz[ZT], lz[ZT], m = NEG_INF;
#pragma unroll
  for (int j = 0; j < ZT; j++) {
    const int z = tid + MW_NT * j;
    mz[j] = z < nz ? __ldcg(pp + (long)z * PART_LD + HD) : NEG_INF;
    lz[j] = z < nz ? __ldcg(pp + (long)z * PART_LD + HD + 1) : 0.f;
    m = fmaxf(m, mz[j]);
  }
  m = warp_max(m);
  if (lane == 0) rm[warp] = m;
  __syncthreads();
  float M = rm[0];
#pragma unroll
  for (int w = 1; w < NW; w++) M = fmaxf(M, rm[w]);
  float l = 0.f;
#pragma unroll
  for (int j = 0; j < ZT; j++) {
    const int z = tid + MW_NT * j;
    if (z < nz) {
      const float w = expf(mz[j] - M);
      wz[z] = w;
      l += lz[j] * w;
    }
  }
  l = warp_sum(l);
  if (lane == 0) rl[warp] = l;
  __syncthreads();  // wz and rl
  float a = 0.f;
#pragma unroll
  for (int i = 0; i < MS_BATCH; i++) {
    if (z0 + i < z1) a = fmaf(pv[i], wz[z0 + i], a);
  }
  for (int zb = z0 + MS_BATCH; zb < z1; zb += MS_BATCH) {
#pragma unroll
    for (int i = 0; i < MS_BATCH; i++) pv[i] = zb + i < z1 ? __ldcg(pd + (long)(zb + i) * PART_LD) : 0.f;
#pragma unroll
    for (int i = 0; i < MS_BATCH; i++) {
      if (zb + i < z1) a = fmaf(pv[i], wz[zb + i], a);
    }
  }
  red[warp][lane] = a;
  __syncthreads();
  if (warp == 0) {
    float L = rl[0], A = red[0][lane];
#pragma unroll
    for (int w = 1; w < NW; w++) L += rl[w], A += red[w][lane];
    if (d < HD) out[((long)t * heads + hh) * HD + d] = A / L;
  }
}

// attn_oproj (INFERNIX_CUDA_OPROJ=fold, engine/backend/cuda/oproj.go): the
// merge of one decode token's attention splits folded into the output
// projection that reads it, out = W·o (+ resid), W [O, heads·HD] bf16.
// Why: at short contexts the decode attention, attn_merge_splits and o_proj
// are three launches whose boundaries and dependent round trips cost
// more than the merge's work (run 29, 640 positions, µs a layer: merge
// 3.3, o_proj 10.3 for 7.35 of bytes). Block (r, h) owns output rows
// [r·OP_ROWS, r·OP_ROWS + OP_ROWS) and query head h: it requests its first
// OP_U rows' weights before its PDL wait (weights never depend on the
// attention), merges head h's splits as attn_merge_splits does (the same
// operations in the same order: the same bits; block r = 0 writes them to
// o), takes the dot products of its rows' HD columns with the merged head,
// and stores them to scr[h][row]. The last of a row group's heads blocks
// to count itself adds the heads' shares in head order (so the result does
// not depend on timing) and writes out and resid + out. A warp owns 32
// rows; DG lanes read a row's HD columns (16 bytes each), so a load
// instruction covers 32/DG rows and a lane makes DG loads, one per row
// band; the DG partial dots of a row meet by a reduce-scatter across
// those lanes (log₂ DG shuffle rounds of halving width), which leaves one
// row's sum in each lane. Tokens whose context is one split were written
// to o by the attention: the block reads them there. zmax ≤ OP_MAXZ.
#define OP_ROWS 128  // output rows a block: 4 warps of 32
#define OP_MAXZ 64
#ifndef OP_U
#define OP_U 4  // 16-byte weight loads in flight a lane (of DG)
#endif
#define OP_ZB 16  // splits' sums a thread requests at once
#define OP_HB 32  // heads' shares the last block's threads request at once
// OP_MINB: blocks an SM holds at once (registers ≤ 64K / (128·OP_MINB)):
// 8 lets Qwen3-8B's 1,024 blocks (32 row groups × 32 heads) run in one
// wave on 132 SMs.
#ifndef OP_MINB
#define OP_MINB 8
#endif
struct OProjP {
  const u16* w;        // [O, heads·HD]
  const float* part;   // the attention's partials, [heads][zmax][PART_LD] (one token)
  const int* pos;      // [1] the token's position
  float* o;            // [heads·HD] the attention's output
  float* out;          // [O] W·o
  const float* resid;  // [O] or null; may alias sum
  float* sum;          // [O] resid + out
  float* scr;          // [heads][O] each head's share
  int* cnt;            // [O / OP_ROWS] zero on entry, left zero (the host keeps a fixed count of them first in its scratch)
  int heads, zmax;
  int chunk, O;
  int hfirst;  // 1: blockIdx.x is the head and y the row group (a row group's heads launch together)
  int pad;
};
// Timing probes (wrong results; for the step timeline only): OP_NOMERGE=1
// takes o as it is instead of merging the splits, OP_NOTAIL=1 ends every
// block after its shares are stored (no counter, no sum of the heads).
#ifndef OP_NOMERGE
#define OP_NOMERGE 0
#endif
#ifndef OP_NOTAIL
#define OP_NOTAIL 0
#endif
extern "C" __global__ void __launch_bounds__(NT, OP_MINB) attn_oproj(const OProjP p) {
  STEP_TIMER();
  constexpr int RPI = 32 / DG;  // rows a load instruction covers
  __shared__ float wz[OP_MAXZ];
  __shared__ __align__(16) float ah[HD];
  __shared__ float lsum;
  __shared__ int last;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int rg = p.hfirst ? blockIdx.y : blockIdx.x, h = p.hfirst ? blockIdx.x : blockIdx.y;
  const int heads = p.heads, O = p.O, zmax = p.zmax;
  const long I = (long)heads * HD;
  const int c8 = (lane % DG) * 8, band = lane / DG;
  const int row0 = rg * OP_ROWS + warp * 32 + band;  // the lane's row of load i: row0 + i·RPI
  const u16* wp = p.w + (long)row0 * I + (long)h * HD + c8;
  uint4 wv[OP_U];
#pragma unroll
  for (int u = 0; u < OP_U; u++)
    if (u < DG) wv[u] = ld_stream(wp + (long)u * RPI * I);
  PDL_ENTRY();
  // The merge of head h (attn_merge_splits with MS_SPEC: every slot's
  // partial requested before the position that says how many are used).
  const float* pp = p.part + (long)h * zmax * PART_LD;
  const float* pd = pp + min(tid, HD - 1);
  float pv[OP_ZB];
#pragma unroll
  for (int i = 0; i < OP_ZB; i++) pv[i] = i < zmax ? __ldcg(pd + (long)i * PART_LD) : 0.f;
  float mz[2], lz[2];
  if (warp == 0) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
      const int zz = lane + 32 * j;
      mz[j] = zz < zmax ? __ldcg(pp + (long)zz * PART_LD + HD) : NEG_INF;
      lz[j] = zz < zmax ? __ldcg(pp + (long)zz * PART_LD + HD + 1) : 0.f;
    }
  }
  const float o1 = tid < HD ? __ldcg(p.o + (long)h * HD + tid) : 0.f;  // where one split wrote o
  const int nz = OP_NOMERGE ? 1 : (META(p.pos) + p.chunk) / p.chunk;
  if (nz > 1 && warp == 0) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
      const int zz = lane + 32 * j;
      mz[j] = zz < nz ? mz[j] : NEG_INF;
      lz[j] = zz < nz ? lz[j] : 0.f;
    }
    const float l = warp_split_weights(mz, lz, nz, wz);
    if (lane == 0) lsum = l;
  }
  __syncthreads();
  if (tid < HD) {
    float v = o1;
    if (nz > 1) {
      v = merge_dim(pv, pd, wz, nz) / lsum;
      if (rg == 0) p.o[(long)h * HD + tid] = v;
    }
    ah[tid] = v;
  }
  __syncthreads();
  float xa[8];
  {
    const float4 a = *(const float4*)(ah + c8), b = *(const float4*)(ah + c8 + 4);
    xa[0] = a.x, xa[1] = a.y, xa[2] = a.z, xa[3] = a.w, xa[4] = b.x, xa[5] = b.y, xa[6] = b.z, xa[7] = b.w;
  }
  float d[DG];
#pragma unroll
  for (int i = 0; i < DG; i++) {
    float wf[8];
    unpack_bf16x8(wv[i % OP_U], wf);
    if (i + OP_U < DG) wv[i % OP_U] = ld_stream(wp + (long)(i + OP_U) * RPI * I);
    float s = 0.f;
#pragma unroll
    for (int e = 0; e < 8; e++) s = fmaf(xa[e], wf[e], s);
    d[i] = s;
  }
  // Reduce-scatter over the DG lanes of a band: after the round of width
  // m, lane bit m says which half of the remaining 2m sums the lane keeps.
#pragma unroll
  for (int m = DG / 2; m >= 1; m >>= 1) {
    const bool hi = (lane & m) != 0;
#pragma unroll
    for (int j = 0; j < m; j++) {
      const float keep = hi ? d[j + m] : d[j], send = hi ? d[j] : d[j + m];
      d[j] = keep + __shfl_xor_sync(0xffffffffu, send, m);
    }
  }
  // Lane l % DG now holds row band + (l % DG)·RPI of the warp's 32.
  p.scr[(long)h * O + row0 + (lane % DG) * RPI] = d[0];
  if (OP_NOTAIL) return;
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(p.cnt + rg, 1) == heads - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int r = tid; r < OP_ROWS; r += NT) {
    const int row = rg * OP_ROWS + r;
    float s = 0.f;
    // OP_HB shares requested at once, added in head order: a loop of one
    // load an iteration would wait a round trip to L2 for each head.
    for (int h0 = 0; h0 < heads; h0 += OP_HB) {
      float v[OP_HB];
#pragma unroll
      for (int i = 0; i < OP_HB; i++) v[i] = h0 + i < heads ? __ldcg(p.scr + (long)(h0 + i) * O + row) : 0.f;
#pragma unroll
      for (int i = 0; i < OP_HB; i++) {
        if (h0 + i < heads) s += v[i];
      }
    }
    p.out[row] = s;
    if (p.resid != 0) p.sum[row] = p.resid[row] + s;
  }
  if (tid == 0) p.cnt[rg] = 0;
}

#if G <= 8
extern "C" __global__ void __launch_bounds__(NT) attn_decode_tc2(ATTN_DECODE_ARGS) {
  attn_decode_tc_impl<KVDT, false, true>(kc, vc, q, out, part, cnt, tokTab, pos, tabs, kvh, scale, zmax, chunk);
}
extern "C" __global__ void __launch_bounds__(NT) attn_decode_tc2_prep(const DecodePrepP p) {
  attn_decode_tc_impl<KVDT, true, true>(p.kc, p.vc, p.q, p.out, p.part, p.cnt, p.tokTab, p.pos, p.tabs, p.kvh, p.scale, p.zmax,
                                        p.chunk, &p);
}
#endif
#endif

// KT: the cache's element type (KVDT; a parameter for the CPU emulation).
template <int KT>
__device__ __forceinline__ void attn_prep_impl(const PrepP& p) {
  STEP_TIMER();
  PDL_ENTRY();
  __shared__ float buf[PREP_WARPS][HD];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int wi = blockIdx.x * PREP_WARPS + warp;
  const int nq = p.T * p.heads, nk = p.T * p.kvh;
  if (wi >= nq + 2 * nk) return;
  int kind, t, hh;  // kind 0: q, 1: k, 2: v
  if (wi < nq) {
    kind = 0;
    t = wi / p.heads;
    hh = wi - t * p.heads;
  } else {
    wi -= nq;
    kind = 1;
    if (wi >= nk) {
      wi -= nk;
      kind = 2;
    }
    t = wi / p.kvh;
    hh = wi - t * p.kvh;
  }
  float* row = kind == 0 ? p.q + ((long)t * p.heads + hh) * HD : (kind == 1 ? p.k : (float*)p.v) + ((long)t * p.kvh + hh) * HD;
  float v[PE];
  load_row(v, row);
  if (kind < 2) {
    const long pp = (long)p.pos[t] * p.half;
    prep_row(v, kind == 0 ? p.qw : p.kw, kind == 0 ? p.qeps : p.keps, p.cosT == 0 ? 0 : p.cosT + pp, p.sinT + pp, p.half,
             buf[warp]);
#pragma unroll
    for (int e = 0; e < PE; e++) {
      const int j = lane + 32 * e;
      if (j < HD) row[j] = v[e];
    }
  }
  if (kind > 0) {
    const int ps = p.pos[t];
    const long blk = p.tabs[p.tokTab[t] + (ps >> 6)];
    u16* dst = (kind == 1 ? p.kc : p.vc) + ((blk * p.kvh + hh) * 64 + (ps & 63)) * HD;
#pragma unroll
    for (int e = 0; e < PE; e++) {
      const int j = lane + 32 * e;
      if (j < HD) dst[j] = kv_enc<KT>(v[e]);
    }
  }
}

extern "C" __global__ void __launch_bounds__(PREP_WARPS * 32) attn_prep(const PrepP p) { attn_prep_impl<KVDT>(p); }
