// Matrix-vector products for decode: out[r, o] = Σ_i x[r, i] · w[o, i] for a
// few rows r < T ≤ R of f32 activations x [T, I] and a weight w [O, I].
// Bandwidth-bound: every weight byte is read once with 16-byte loads, the
// activations come from L1. A block of 256 threads owns ROWS consecutive
// outputs and strides over I in chunks of 8 elements; partial sums are
// reduced across the block at the end.

#define GEMV_THREADS 256
#define GEMV_ROWS 4     // outputs per block of the indexed (MoE) kernels
#define GW_WARPS 8      // warps per block
#define GW_RW 2         // outputs per warp
#define GW_BLOCK_ROWS (GW_WARPS * GW_RW)

// Each warp owns GW_RW consecutive outputs and streams their weight rows
// with 16-byte loads (lane l takes elements 8l…8l+7 of every 256-element
// chunk), so a load instruction reads 512 contiguous bytes of a row; partial
// sums are reduced within the warp only (no block synchronisation).
template <int DT, int R>
__device__ __forceinline__ void gemv_impl(float* __restrict__ out, const float* __restrict__ x, const void* __restrict__ w,
                                          int T, int I, int O, int blk) {
  STEP_TIMER();
  PDL_ENTRY();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int o0 = (blk * GW_WARPS + warp) * GW_RW;
  if (o0 >= O) return;
  float acc[R][GW_RW];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int k = 0; k < GW_RW; k++) acc[r][k] = 0.f;
  // Rows past O repeat the last row (loads stay in bounds, results dropped).
  long wrow[GW_RW];
#pragma unroll
  for (int k = 0; k < GW_RW; k++) wrow[k] = (long)min(o0 + k, O - 1) * I;
#pragma unroll 2
  for (int i = lane * 8; i < I; i += 32 * 8) {
    float wf[GW_RW][8];
#pragma unroll
    for (int k = 0; k < GW_RW; k++) load8<DT>(w, wrow[k] + i, wf[k]);
#pragma unroll
    for (int r = 0; r < R; r++) {
      if (r < T) {
        const float4 a = __ldg((const float4*)(x + (long)r * I + i));
        const float4 b = __ldg((const float4*)(x + (long)r * I + i + 4));
        const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int k = 0; k < GW_RW; k++)
#pragma unroll
          for (int e = 0; e < 8; e++) acc[r][k] = fmaf(xv[e], wf[k][e], acc[r][k]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int k = 0; k < GW_RW; k++) {
      const float v = warp_sum(acc[r][k]);
      if (lane == 0 && r < T && o0 + k < O) out[(long)r * O + o0 + k] = v;
    }
}

#define GEMV(DTN, DT, R)                                                                                       \
  extern "C" __global__ void __launch_bounds__(GEMV_THREADS)                                                   \
      gemv_##DTN##_r##R(float* out, const float* x, const void* w, int T, int I, int O) {                      \
    gemv_impl<DT, R>(out, x, w, T, I, O, blockIdx.x);                                                          \
  }
GEMV(bf16, DT_BF16, 1)
GEMV(bf16, DT_BF16, 2)
GEMV(bf16, DT_BF16, 4)
GEMV(bf16, DT_BF16, 8)
GEMV(f16, DT_F16, 1)
GEMV(f16, DT_F16, 2)
GEMV(f16, DT_F16, 4)
GEMV(f16, DT_F16, 8)
GEMV(f32, DT_F32, 1)
GEMV(f32, DT_F32, 2)
GEMV(f32, DT_F32, 4)
GEMV(f32, DT_F32, 8)

// Up to three products of the same activations (q, k and v; gate and up)
// in one launch: blocks [0, nb0) compute out0 = x·w0ᵀ, the next nb1 blocks
// out1, the rest out2. Saves launches and fills the GPU better than three
// small grids.
#define GEMV_MULTI(DTN, DT, R)                                                                                   \
  extern "C" __global__ void __launch_bounds__(GEMV_THREADS) gemv3_##DTN##_r##R(                                 \
      float* out0, const void* w0, int O0, float* out1, const void* w1, int O1, float* out2, const void* w2,     \
      int O2, const float* x, int T, int I, int nb0, int nb1) {                                                  \
    int blk = blockIdx.x;                                                                                        \
    if (blk < nb0) {                                                                                             \
      gemv_impl<DT, R>(out0, x, w0, T, I, O0, blk);                                                              \
    } else if (blk < nb0 + nb1) {                                                                                \
      gemv_impl<DT, R>(out1, x, w1, T, I, O1, blk - nb0);                                                        \
    } else {                                                                                                     \
      gemv_impl<DT, R>(out2, x, w2, T, I, O2, blk - nb0 - nb1);                                                  \
    }                                                                                                            \
  }
GEMV_MULTI(bf16, DT_BF16, 1)
GEMV_MULTI(bf16, DT_BF16, 2)
GEMV_MULTI(bf16, DT_BF16, 4)
GEMV_MULTI(bf16, DT_BF16, 8)

// Any shape (I not a multiple of 8, unaligned rows) and any T: one warp per
// output row, blockIdx.y = input row. Slow; for odd shapes only.
template <int DT>
__device__ __forceinline__ void gemv_scalar_impl(float* out, const float* x, const void* w, int I, int O) {
  STEP_TIMER();
  PDL_ENTRY();
  const int o = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int r = blockIdx.y;
  if (o >= O) return;
  const int lane = threadIdx.x & 31;
  const float* xr = x + (long)r * I;
  const long wr = (long)o * I;
  float s = 0.f;
  for (int i = lane; i < I; i += 32) s = fmaf(xr[i], wget<DT>(w, wr + i), s);
  s = warp_sum(s);
  if (lane == 0) out[(long)r * O + o] = s;
}
extern "C" __global__ void gemv_scalar_bf16(float* out, const float* x, const void* w, int I, int O) { gemv_scalar_impl<DT_BF16>(out, x, w, I, O); }
extern "C" __global__ void gemv_scalar_f16(float* out, const float* x, const void* w, int I, int O) { gemv_scalar_impl<DT_F16>(out, x, w, I, O); }
extern "C" __global__ void gemv_scalar_f32(float* out, const float* x, const void* w, int I, int O) { gemv_scalar_impl<DT_F32>(out, x, w, I, O); }

// Mixture-of-experts products: pair q = blockIdx.y (token q / xdiv, expert
// idx[q]) computes out[q, o] = Σ_i x[q / xdiv, i] · W_e[o, i], where W_e is
// the weight at address ptrs[idx[q]]. xdiv = K for the gate and up
// projections (x = the token's hidden state), 1 for the down projection
// (x = the pair's activation).
template <int DT>
__device__ __forceinline__ void gemv_indexed_impl(float* __restrict__ out, const float* __restrict__ x, const u64* __restrict__ ptrs,
                                                  const int* __restrict__ idx, int xdiv, int I, int O) {
  STEP_TIMER();
  PDL_ENTRY();
  const int q = blockIdx.y;
  const void* w = (const void*)ptrs[idx[q]];
  const float* xr = x + (long)(q / xdiv) * I;
  const int o0 = blockIdx.x * GEMV_ROWS;
  float acc[GEMV_ROWS];
  long wrow[GEMV_ROWS];
#pragma unroll
  for (int k = 0; k < GEMV_ROWS; k++) {
    acc[k] = 0.f;
    wrow[k] = (long)min(o0 + k, O - 1) * I;
  }
  for (int i = threadIdx.x * 8; i < I; i += GEMV_THREADS * 8) {
    float wf[GEMV_ROWS][8];
#pragma unroll
    for (int k = 0; k < GEMV_ROWS; k++) load8<DT>(w, wrow[k] + i, wf[k]);
    const float4 a = __ldg((const float4*)(xr + i));
    const float4 b = __ldg((const float4*)(xr + i + 4));
    const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int k = 0; k < GEMV_ROWS; k++)
#pragma unroll
      for (int e = 0; e < 8; e++) acc[k] = fmaf(xv[e], wf[k][e], acc[k]);
  }
  __shared__ float red[GEMV_THREADS / 32][GEMV_ROWS];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int k = 0; k < GEMV_ROWS; k++) {
    const float v = warp_sum(acc[k]);
    if (lane == 0) red[warp][k] = v;
  }
  __syncthreads();
  if (threadIdx.x < GEMV_ROWS) {
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < GEMV_THREADS / 32; j++) s += red[j][threadIdx.x];
    if (o0 + threadIdx.x < O) out[(long)q * O + o0 + threadIdx.x] = s;
  }
}
// Unaligned fallback: one warp per output row.
template <int DT>
__device__ __forceinline__ void gemv_indexed_scalar_impl(float* out, const float* x, const u64* ptrs, const int* idx, int xdiv, int I, int O) {
  STEP_TIMER();
  PDL_ENTRY();
  const int q = blockIdx.y;
  const int o = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (o >= O) return;
  const void* w = (const void*)ptrs[idx[q]];
  const float* xr = x + (long)(q / xdiv) * I;
  const int lane = threadIdx.x & 31;
  float s = 0.f;
  for (int i = lane; i < I; i += 32) s = fmaf(xr[i], wget<DT>(w, (long)o * I + i), s);
  s = warp_sum(s);
  if (lane == 0) out[(long)q * O + o] = s;
}
#define GEMV_INDEXED(DTN, DT)                                                                                    \
  extern "C" __global__ void __launch_bounds__(GEMV_THREADS)                                                     \
      gemv_indexed_##DTN(float* out, const float* x, const u64* ptrs, const int* idx, int xdiv, int I, int O) {   \
    gemv_indexed_impl<DT>(out, x, ptrs, idx, xdiv, I, O);                                                        \
  }                                                                                                              \
  extern "C" __global__ void gemv_indexed_scalar_##DTN(float* out, const float* x, const u64* ptrs, const int* idx, \
                                                       int xdiv, int I, int O) {                                 \
    gemv_indexed_scalar_impl<DT>(out, x, ptrs, idx, xdiv, I, O);                                                 \
  }
GEMV_INDEXED(bf16, DT_BF16)
GEMV_INDEXED(f16, DT_F16)
GEMV_INDEXED(f32, DT_F32)

// Router: softmax over E logits per token, the top K by probability (ties to
// the lower expert index, as a stable sort would), optionally renormalised to
// sum to one. One warp per token; E ≤ 1024 (one bit per strided element).
extern "C" __global__ void moe_route(const float* logits, int* topIdx, float* topW, int T, int E, int K, int norm) {
  STEP_TIMER();
  PDL_ENTRY();
  const int t = blockIdx.x * blockDim.y + threadIdx.y;
  if (t >= T) return;
  route_topk_warp(logits + (long)t * E, E, K, norm, topIdx + (long)t * K, topW + (long)t * K, threadIdx.x, 0x7fffffff);
}

// out[t, :] = Σ_k w[t, k] · y[t·K + k, :].
extern "C" __global__ void moe_combine(float* out, const float* y, const float* w, int K, int H) {
  STEP_TIMER();
  PDL_ENTRY();
  const int t = blockIdx.x;
  for (int j = threadIdx.x; j < H; j += blockDim.x) {
    float s = 0.f;
    for (int k = 0; k < K; k++) s = fmaf(w[(long)t * K + k], y[((long)t * K + k) * H + j], s);
    out[(long)t * H + j] = s;
  }
}

// The grouped MoE path's combine (INFERNIX_CUDA_MOE_GROUPED): the expert
// outputs y are grouped by expert, rows[t·K + k] naming pair (t, k)'s row,
// and out[t, :] = Σ_k w[t, k] · y[rows[t·K + k], :]. A gather rather than a
// scatter-add: one block owns each output row and sums its k in order, in
// the same fmaf sequence as moe_combine, so the result is deterministic (no
// float atomics) and equal to moe_combine's for equal y rows.
extern "C" __global__ void moe_combine_rows(float* out, const float* y, const float* w, const int* rows, int K, int H) {
  STEP_TIMER();
  PDL_ENTRY();
  const int t = blockIdx.x;
  for (int j = threadIdx.x; j < H; j += blockDim.x) {
    float s = 0.f;
    for (int k = 0; k < K; k++) s = fmaf(w[(long)t * K + k], y[(long)rows[(long)t * K + k] * H + j], s);
    out[(long)t * H + j] = s;
  }
}

// ---------------------------------------------------------------------------
// Fused decode products (bf16 weights, T ≤ R ≤ 8 rows of f32 activations).
// One kernel family covers the decode step's products with what surrounds
// them, so that a decoder layer needs no separate RMSNorm, residual add or
// SwiGLU launches:
//   NORM:  the activations are RMSNorm(x)·nw, computed on the fly: every warp
//          streams the whole x row anyway for its dot products, so it also
//          sums x² and scales its results by 1/rms at the end (no extra
//          memory traffic but the norm weight, which stays in L1). The
//          normalised rows are also written to h (the RMSNorm's output) by
//          the first warps of the grid, so nothing observable changes.
//   MODE_MULTI:  up to three products of the same activations (q, k, v).
//   MODE_SWIGLU: gate and up; a warp computes gate row o and up row o and
//          writes both and aux = silu(gate)·up.
//   MODE_RESID:  one product; also writes sum = aux + out (residual add).
// Weights stream with 16-byte loads, GF_U chunks of 256 elements per lane in
// flight; the first chunks are loaded before PDL_WAIT (weights never depend
// on the previous kernel), hiding this kernel's ramp behind the previous one.
// Parameters come as one struct (more than the 16 scalar slots the backend's
// launch records hold).
//
// Split-K (gemvfw_*, INFERNIX_CUDA_GEMV_WIDE): with few outputs (o_proj and
// down at 4096 rows: 256 blocks, ~16 warps per SM) too few weight bytes are
// in flight per SM to reach the copy bandwidth (run 7: 2.4 TB/s). The wide
// kernels split I into S slices of whole 256-element chunks; block
// j·S + s computes row group j over slice s and writes per-warp sums (and,
// with NORM, the slice's sum of x²) to part; the last of the S blocks of a
// group to finish (an atomic counter per group, reset by that block) adds
// the S partials in slice order and applies the epilogue. The order of the
// additions does not depend on which block finishes last, so results are
// bit-identical between runs, eager or replayed. 1/rms is the same in every
// group: each slice's x² sum is computed by the same lanes in the same order
// in every block of that slice.
// GF_U (16-byte loads in flight per lane and weight row) and GF_RW (outputs
// per warp of the products other than SwiGLU, 1 or 2) may be set at compile
// time (INFERNIX_CUDA_GEMVF, backend gemvfVariant); neither changes any
// result: each lane adds its elements in the same order whatever they are.
#ifndef GF_U
#define GF_U 2  // run 13: 2 beat 1, 3 and 4 (205–214 against 195 tok/s)
#endif
#ifndef GF_UR
#define GF_UR GF_U  // GF_U of the residual products (o_proj, down) alone
#endif
#ifndef GF_RW
#define GF_RW 2
#endif
#ifndef GF_PIPE
#define GF_PIPE 0  // 1: request the next GF_U chunks before adding these (run 13: no faster)
#endif
// GF_KS: warps of a block that share an output group, each over its own
// slice of I, their sums added in slice order through shared memory (1,
// 2, 4 or 8; MULTI products; GF_KSR for the residual ones, default GF_KS).
// Unlike GF_U and GF_RW this changes the order of the additions: results
// differ from KS 1 by rounding, and stay the same from run to run. Why:
// the products with few outputs (q|k|v, o_proj, down: 256–384 blocks) have
// too few warps to keep the memory busy (run 13: 2.3–2.8 TB/s against
// 3.85 for gate|up's 1,536 blocks); KS multiplies their warps. Measured
// (run 13): KS 2 within noise of 1, 4 and 8 slower. Run 17 (processes
// measured in turn, call b): KS 2 +1.5% alone and +3.8% with gate|up looped
// over one wave (INFERNIX_CUDA_GEMV_WAVE), at 512 and 32K: the default
// since.
#ifndef GF_KS
#define GF_KS 2
#endif
#ifndef GF_KSR
#define GF_KSR GF_KS
#endif
// GF_KSS: the same for gate|up (SwiGLU), default 1: run 17 call c put
// gate|up at 3.9 TB/s beside the 4.1 of down, which GF_KS doubled the
// warps of.
#ifndef GF_KSS
#define GF_KSS 1
#endif
// GF_MINB: the one-row (R = 1) plain kernels' minimum resident blocks per
// SM (__launch_bounds__), so that the compiler holds their registers to
// 64K / (256 · GF_MINB). Left to itself it gave q|k|v and the LM head 94
// registers and gate|up 48 (NVRTC 11.8): 2 and 5 blocks a SM, so the
// looped grids kept few warps' loads in flight. At 6 (40 registers) they
// spill at most 32 bytes (NVRTC 11.8: gate|up 24, q|k|v none); at 8 (32)
// up to 108. Measured (run 17 call d, a process
// each, tok/s at 512 / 32K): unbounded 214.1, 214.3, 212.3 / 165.3, 166.3,
// 164.1; 4: 214.3 / 164.7; 6: 226.4 / 172.5; 8: 151.2 / 123.3. 6 is the
// default. The kernels of 2–8 rows keep their registers (at 40 they spill
// 64–880 bytes).
#ifndef GF_MINB
#define GF_MINB 6
#endif
#define GF_MINB_R(R) ((R) == 1 ? GF_MINB : 1)
// GF_L2PF=1: before PDL_WAIT each warp also asks L2 for the rest of its
// weight rows (prefetch.global.L2, a line per lane at a time), so that
// DRAM keeps streaming this product's weights while the previous kernel
// finishes: with a trigger before exit (PDL_TRIGGER 0 or 1,
// ATTN_PDL_TRIGGER) across the whole tail of the previous grid. Changes no
// result. Not yet measured (prepared in run 14's session after its device
// time ran out).
#ifndef GF_L2PF
#define GF_L2PF 0
#endif
// GF_TMA=1: the weights stream into shared memory by the copy engine
// (cp.async.bulk: Hopper's 1-D TMA) rather than through each lane's loads:
// GF_TS stages of GF_TC elements of each of the block's 16 weight rows,
// each stage's bytes counted on its mbarrier; the first GF_TS − 1 stages
// are requested before PDL_WAIT. Why: the products with one wave of blocks
// (o_proj and down: 256 blocks, q|k|v 384) read at 2.3–2.8 TB/s against
// 3.9–4.2 for gate|up and the LM head (run 13), and more loads in flight per
// lane (GF_U, GF_PIPE, GF_KS) did not lift them: bulk copies keep 64 KB a
// block in flight without the lanes' load queues. Only where a warp has two
// rows and the whole of I (not split-K, not GF_KS); elsewhere the loads
// stay. Each lane adds the same elements in the same order: bit-identical.
#ifndef GF_TMA
#define GF_TMA 0
#endif
#ifndef GF_TS
#define GF_TS 4
#endif
#ifndef GF_TC
#define GF_TC 512
#endif
// GF_TIMING=1: every warp of the plain (not split-K) kernels records four
// u64 at part + 4·(its index in the grid): the global timer at entry, after
// its first weights were added (their load's latency), and at exit, and its
// SM. Why: the one-wave products (o_proj, down, q|k|v) read at 2.3–2.8 TB/s
// against 3.7–4.2 for the large ones, and neither more loads in flight,
// more warps, bulk copies nor removing the boundaries between them
// (runs 13–16) lifted them; the timeline shows how much of each kernel is
// ramp (warps starting late, first loads), steady streaming, and tail (the
// last warps finishing after the rest). The bench's
// INFERNIX_BENCH_GEMV_TIMING=1 prints it per product. Changes no result.
#ifndef GF_TIMING
#define GF_TIMING 0
#endif
// GF_XSH=1: a looped product's warp (GemvP.nvb) requests its next share's
// first GF_U chunks as soon as its last loads of this share are in, before
// this share's reduction and epilogue, so that its loads stay in flight
// across the share boundary. Why: the looped grid's warps start together
// and reach each boundary within ~1 µs of one another, so without it the
// whole GPU's stream pauses there for a reduction and a load's latency
// (~1.75 µs on the H200, run 17): gate|up's one boundary is where its rate
// (4.10 TB/s from its wait, run 29) falls below the LM head's inside the
// same step (4.56). Each lane adds the same elements in the same order:
// bit-identical. Not with GF_TMA. Run 36 (H100, a process each between
// defaults rising 174.6 → 177.2 tok/s at 512): alone 172.0 and 173.9, no
// faster (−1.5%); with GF_KSS=2 (gate|up in 4 shares instead of 2) 176.2
// and 177.8, where GF_KSS=2 alone read 170.7: it recovers what more
// shares cost, no more. Off; the H200, whose gate|up falls further below
// its LM head's rate, has not measured it.
#ifndef GF_XSH
#define GF_XSH 0
#endif
#if GF_XSH && GF_TMA
#error "GF_XSH streams through the lanes' loads, not GF_TMA's stages"
#endif
#define GF_MULTI 0
#define GF_SWIGLU 1
#define GF_RESID 2

struct GemvP {
  float* out0;
  float* out1;
  float* out2;
  const u16* w0;
  const u16* w1;
  const u16* w2;
  const float* x;   // [T, I] activations (before the RMSNorm when NORM)
  const float* nw;  // NORM: RMSNorm weight [I]
  float* h;         // NORM: where the normalised activations go (may be null)
  float* aux;       // RESID: residual [T, O]; SWIGLU: silu(gate)·up [T, O]
  float* sum;       // RESID: aux + out [T, O]
  int O0, O1, O2, nb0, nb1, T, I;
  float eps;
  // Wide kernels only: S slices; part holds the groups' counters (ints,
  // GF_CNT_MAX of them whatever the launch: launches of other sizes share
  // the scratch, and a counter must never land on another launch's
  // partial sums) and then GF_SLOT(R) floats per block.
  float* part;
  int S;
  // Plain kernels: how many blocks the product has when more than the grid
  // (gemvf), else 0.
  int nvb;
};
#define GF_SLOT(R) (GW_BLOCK_ROWS * (R) + (R))
#define GF_CNT_MAX 32768

// The split-K tail of gemvf (WIDE): publish this block's per-warp sums,
// count the block, and let the last block of the row group add the S
// partials in slice order and apply the epilogue as gemvf does. blk is the
// group's index within its product (out, O), grp across the launch.
template <int R, int NORM, int MODE>
__device__ __forceinline__ void gemvf_reduce(const GemvP& p, float (&acc)[R][2], float (&ss)[R], int blk, int grp, int s,
                                             int O, float* out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int T = p.T, S = p.S, ngrp = gridDim.x / S;
  int* cnt = (int*)p.part;
  float* parts = p.part + GF_CNT_MAX;
  float* slot = parts + (long)(grp * S + s) * GF_SLOT(R);
#pragma unroll
  for (int r = 0; r < R; r++) {
    const float a0 = warp_sum(acc[r][0]), a1 = warp_sum(acc[r][1]);
    const float q = NORM ? warp_sum(ss[r]) : 0.f;
    if (lane == 0 && r < T) {
      slot[(warp * 2) * R + r] = a0;
      slot[(warp * 2 + 1) * R + r] = a1;
      if (NORM && warp == 0) slot[GW_BLOCK_ROWS * R + r] = q;
    }
  }
  __shared__ int last;
  __shared__ float invs[R];
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(cnt + grp, 1) == S - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float* gp = parts + (long)grp * S * GF_SLOT(R);  // the group's S slots
  if (threadIdx.x < R) {
    float inv = 1.f;
    if (NORM) {
      float q = 0.f;
      for (int j = 0; j < S; j++) q += __ldcg(gp + (long)j * GF_SLOT(R) + GW_BLOCK_ROWS * R + threadIdx.x);
      inv = 1.f / sqrtf(q / (float)p.I + p.eps);
    }
    invs[threadIdx.x] = inv;
  }
  __syncthreads();
  if (MODE == GF_SWIGLU) {
    // Warp w's two rows are gate and up of output blk·GW_WARPS + w.
    for (int idx = threadIdx.x; idx < GW_WARPS * R; idx += GEMV_THREADS) {
      const int w = idx / R, r = idx - w * R, o = blk * GW_WARPS + w;
      if (r >= T || o >= O) continue;
      float gv = 0.f, uv = 0.f;
      for (int j = 0; j < S; j++) {
        gv += __ldcg(gp + (long)j * GF_SLOT(R) + (w * 2) * R + r);
        uv += __ldcg(gp + (long)j * GF_SLOT(R) + (w * 2 + 1) * R + r);
      }
      gv *= invs[r];
      uv *= invs[r];
      const long ix = (long)r * O + o;
      // In this order: aux may alias out0 or out1, and ends as the SwiGLU.
      p.out0[ix] = gv;
      p.out1[ix] = uv;
      p.aux[ix] = silu(gv) * uv;
    }
  } else {
    for (int idx = threadIdx.x; idx < GW_BLOCK_ROWS * R; idx += GEMV_THREADS) {
      const int row = idx / R, r = idx - row * R, o = blk * GW_BLOCK_ROWS + row;
      if (r >= T || o >= O) continue;
      float a = 0.f;
      for (int j = 0; j < S; j++) a += __ldcg(gp + (long)j * GF_SLOT(R) + idx);
      a *= invs[r];
      const long ix = (long)r * O + o;
      out[ix] = a;
      if (MODE == GF_RESID) p.sum[ix] = p.aux[ix] + a;
    }
  }
  if (NORM && p.h != 0) {
    // The normalised rows, spread over the groups' last blocks.
    for (int r = 0; r < T && r < R; r++) {
      for (int i = (grp * GEMV_THREADS + (int)threadIdx.x) * 4; i < p.I; i += ngrp * GEMV_THREADS * 4) {
        const float4 v = *(const float4*)(p.x + (long)r * p.I + i);
        const float4 g = *(const float4*)(p.nw + i);
        const float inv = invs[r];
        *(float4*)(p.h + (long)r * p.I + i) = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
      }
    }
  }
  if (threadIdx.x == 0) cnt[grp] = 0;  // ready for the next launch or graph replay
}

// One lane's 8 weights of each of its rows (w0, and w1 when TWO) at
// element i, against the activations' 8 (RMSNorm'd when NORM, their squares
// summed into ss): the one place the fused products add, so that every way
// of streaming the weights adds in the same order.
template <int R, int NORM, bool TWO>
__device__ __forceinline__ void gemvf_add(const GemvP& p, uint4 w0, uint4 w1, int i, float (&acc)[R][2], float (&ss)[R]) {
  const int T = p.T, I = p.I;
  float wf0[8], wf1[8], g[8];
  unpack_bf16x8(w0, wf0);
  if (TWO) unpack_bf16x8(w1, wf1);
  if (NORM) {
    const float4 a = __ldg((const float4*)(p.nw + i));
    const float4 b = __ldg((const float4*)(p.nw + i + 4));
    g[0] = a.x; g[1] = a.y; g[2] = a.z; g[3] = a.w; g[4] = b.x; g[5] = b.y; g[6] = b.z; g[7] = b.w;
  }
#pragma unroll
  for (int r = 0; r < R; r++) {
    if (r < T) {
      const float4 a = __ldg((const float4*)(p.x + (long)r * I + i));
      const float4 b = __ldg((const float4*)(p.x + (long)r * I + i + 4));
      float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      if (NORM) {
#pragma unroll
        for (int e = 0; e < 8; e++) {
          ss[r] = fmaf(xv[e], xv[e], ss[r]);
          xv[e] *= g[e];
        }
      }
#pragma unroll
      for (int e = 0; e < 8; e++) {
        acc[r][0] = fmaf(xv[e], wf0[e], acc[r][0]);
        if (TWO) acc[r][1] = fmaf(xv[e], wf1[e], acc[r][1]);
      }
    }
  }
}

// Where warp's rows of (virtual) block vb are: its weight rows (wr1 the
// second of a pair, or the first again), its first output row o0 and its
// product (out, O), the slice [k0, k1) of I it reads, and for WIDE the
// slice s and the row group grp.
struct GfRows {
  const u16* w;  // the product's weights
  const u16* wr0;
  const u16* wr1;
  float* out;
  int O, o0, blk, k0, k1, s, grp, kslice;
};
template <int MODE, int WIDE>
__device__ __forceinline__ GfRows gemvf_rows(const GemvP& p, const int vb, const int warp) {
  GfRows w;
  const int I = p.I;
  int blk = vb;
  // The slice [k0, k1) of I this block reads (all of it unless WIDE).
  w.k0 = 0, w.k1 = I, w.s = 0, w.grp = 0;
  if (WIDE) {
    w.s = blk % p.S;
    blk /= p.S;
    w.grp = blk;
    const int ks = ((I + p.S - 1) / p.S + 255) & ~255;
    w.k0 = min(I, w.s * ks);
    w.k1 = min(I, w.k0 + ks);
  }
  w.out = p.out0;
  const u16* wt = p.w0;
  w.O = p.O0;
  if (MODE == GF_MULTI && blk >= p.nb0) {
    blk -= p.nb0;
    if (blk < p.nb1) {
      w.out = p.out1; wt = p.w1; w.O = p.O1;
    } else {
      blk -= p.nb1;
      w.out = p.out2; wt = p.w2; w.O = p.O2;
    }
  }
  w.blk = blk;
  w.w = wt;
  // Outputs per warp: SwiGLU one (its gate and up rows), the split-K
  // kernels two (their reduction slots assume it), the others GF_RW.
  constexpr int RW = MODE == GF_SWIGLU ? 1 : (WIDE ? 2 : GF_RW);
  // Warps per output group (GF_KS): warp = group·KS + slice.
  constexpr int KS = WIDE ? 1 : MODE == GF_SWIGLU ? GF_KSS : (MODE == GF_RESID ? GF_KSR : GF_KS);
  w.kslice = warp % KS;
  w.o0 = (blk * (GW_WARPS / KS) + warp / KS) * RW;
  if (KS > 1) {
    const int ks = ((I + KS - 1) / KS + 255) & ~255;
    w.k0 = min(I, w.kslice * ks);
    w.k1 = min(I, w.k0 + ks);
  }
  // Rows past O repeat the last row: loads stay in bounds, results are
  // dropped, and every warp still sums x² (the h write-back needs no
  // block synchronisation).
  if (MODE == GF_SWIGLU) {
    const long r = (long)min(w.o0, w.O - 1) * I;
    w.wr0 = p.w0 + r;
    w.wr1 = p.w1 + r;
  } else {
    w.wr0 = wt + (long)min(w.o0, w.O - 1) * I;
    w.wr1 = wt + (long)min(w.o0 + RW - 1, w.O - 1) * I;
  }
  return w;
}

// The first U chunks of a warp's weight rows (wr1 when TWO) over [k0, k1)
// into wv.
template <int U, bool TWO>
__device__ __forceinline__ void gemvf_first(const u16* wr0, const u16* wr1, const int k0, const int k1, uint4 (&wv)[U][2]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int u = 0; u < U; u++) {
    const int i = k0 + lane * 8 + u * 256;
    if (i < k1) {
      wv[u][0] = ld_stream(wr0 + i);
      if (TWO) wv[u][1] = ld_stream(wr1 + i);
    }
  }
}

// One (virtual) block vb of the fused product; first: the first vb this
// block computes (gemvf). wx: the lane's weights in flight, which with
// GF_XSH already hold vb's first U chunks unless vb is the first; next:
// the vb this block computes after this one (GF_XSH requests its first
// chunks once this one's loads are in), or −1.
template <int R, int NORM, int MODE, int WIDE, int U>
__device__ __forceinline__ void gemvf_vb(const GemvP& p, const int vb, const bool first, uint4 (&wx)[U][2], const int next) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int T = p.T, I = p.I;
  const u64 tm0 = GF_TIMING ? global_ns() : 0;
  u64 tm1 = 0;
  const GfRows rows = gemvf_rows<MODE, WIDE>(p, vb, warp);
  const int k0 = rows.k0, k1 = rows.k1, s = rows.s, grp = rows.grp, blk = rows.blk, kslice = rows.kslice, o0 = rows.o0;
  const int O = rows.O;
  float* out = rows.out;
  const u16 *wr0 = rows.wr0, *wr1 = rows.wr1;
  constexpr int RW = MODE == GF_SWIGLU ? 1 : (WIDE ? 2 : GF_RW);
  constexpr bool TWO = MODE == GF_SWIGLU || RW == 2;  // two weight rows per warp
  constexpr int KS = WIDE ? 1 : MODE == GF_SWIGLU ? GF_KSS : (MODE == GF_RESID ? GF_KSR : GF_KS);
  float acc[R][2], ss[R];
#pragma unroll
  for (int r = 0; r < R; r++) {
    acc[r][0] = acc[r][1] = 0.f;
    ss[r] = 0.f;
  }
#if GF_TMA
  // (Only with the stages' shared memory: INFERNIX_CUDA_DEFINES=GF_TMA=1
  // alone compiles this without the host reserving it.)
  if (!WIDE && KS == 1 && TWO && dyn_smem_bytes() >= GF_TS * 16 * GF_TC * 2) {
    // Stage s holds GF_TC elements of the block's 16 weight rows (warp
    // wi's rows 2·wi and 2·wi + 1); lanes 0…15 of warp 0 each copy one row.
    EXTERN_SMEM(u16, gsm);
    __shared__ __align__(8) u64 bars[GF_TS];
    const int nch = (k1 - k0 + GF_TC - 1) / GF_TC;
    const u16* myrow = wr0;
    if (warp == 0 && lane < 16) {
      const int wi = lane >> 1, j = lane & 1, o = (blk * GW_WARPS + wi) * RW;
      if (MODE == GF_SWIGLU) {
        myrow = (j ? p.w1 : p.w0) + (long)min(o, O - 1) * I;
      } else {
        myrow = rows.w + (long)min(o + j * (RW - 1), O - 1) * I;
      }
    }
    auto issue = [&](int c) {  // warp 0: chunk c into stage c % GF_TS
      const int kc = k0 + c * GF_TC, n = min(GF_TC, k1 - kc);
      const saddr_t bar = smem_addr(&bars[c % GF_TS]);
      if (lane == 0) mbar_expect_tx(bar, 16 * n * 2);
      __syncwarp();
      if (lane < 16) tma_load_1d(smem_addr(gsm + ((c % GF_TS) * 16 + lane) * GF_TC), myrow + kc, n * 2, bar);
    };
    if (!first) __syncthreads();  // no warp still waits on the last vb's barriers
    if (threadIdx.x == 0) {
      for (int st = 0; st < GF_TS; st++) mbar_init(smem_addr(&bars[st]), 1);
      mbar_fence_init();
    }
    __syncthreads();
    if (warp == 0) {
      for (int c = 0; c < GF_TS - 1 && c < nch; c++) issue(c);
    }
    PDL_ENTRY();
    for (int c = 0; c < nch; c++) {
      __syncthreads();  // every warp is done with chunk c − 1: its stage may be refilled
      if (warp == 0 && c + GF_TS - 1 < nch) issue(c + GF_TS - 1);
      mbar_wait(smem_addr(&bars[c % GF_TS]), (c / GF_TS) & 1);
      const u16* s0 = gsm + ((c % GF_TS) * 16 + warp * 2) * GF_TC;
      const int kc = k0 + c * GF_TC;
#pragma unroll
      for (int u = 0; u < GF_TC / 256; u++) {
        const int e = u * 256 + lane * 8;
        if (kc + e < k1) gemvf_add<R, NORM, TWO>(p, *(const uint4*)(s0 + e), *(const uint4*)(s0 + GF_TC + e), kc + e, acc, ss);
      }
    }
  } else
#endif
  {
    uint4 wl[U][2];
    uint4(&wv)[U][2] = GF_XSH ? wx : wl;  // the default keeps its weights local to the share
    if (!GF_XSH || first) gemvf_first<U, TWO>(wr0, wr1, k0, k1, wv);
    if (GF_L2PF) {
      // 64 elements (128 bytes) a line, from past the chunks just loaded.
      for (int i = k0 + U * 256 + lane * 64; i < k1; i += 32 * 64) {
        prefetch_l2(wr0 + i);
        if (TWO) prefetch_l2(wr1 + i);
      }
    }
    PDL_ENTRY();
    for (int i0 = k0 + lane * 8;;) {
      // GF_PIPE: the next U chunks are requested before this U are used, so
      // a warp always has loads in flight (otherwise it issues, waits, adds).
      uint4 nv[GF_PIPE ? U : 1][2];
      if (GF_PIPE) {
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int i = i0 + 256 * U + u * 256;
          if (i < k1) {
            nv[u][0] = ld_stream(wr0 + i);
            if (TWO) nv[u][1] = ld_stream(wr1 + i);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int i = i0 + u * 256;
        if (i < k1) gemvf_add<R, NORM, TWO>(p, wv[u][0], wv[u][1], i, acc, ss);
      }
      if (GF_TIMING && tm1 == 0) tm1 = global_ns();
      i0 += 256 * U;
      if (i0 >= k1) {
        if (GF_XSH && next >= 0) {
          const GfRows nr = gemvf_rows<MODE, WIDE>(p, next, warp);
          gemvf_first<U, TWO>(nr.wr0, nr.wr1, nr.k0, nr.k1, wv);
        }
        break;
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int i = i0 + u * 256;
        if (i < k1) {
          if (GF_PIPE) {
            wv[u][0] = nv[u][0];
            if (TWO) wv[u][1] = nv[u][1];
          } else {
            wv[u][0] = ld_stream(wr0 + i);
            if (TWO) wv[u][1] = ld_stream(wr1 + i);
          }
        }
      }
    }
  }
  PDL_LATE();
  if (WIDE) {
    gemvf_reduce<R, NORM, MODE>(p, acc, ss, blk, grp, s, O, out);
    return;
  }
  float inv[R];
  if (KS > 1) {
    // The group's slices add up in slice order: the same in every block,
    // so 1/rms is too.
    __shared__ float red[GW_WARPS][R][3];
#pragma unroll
    for (int r = 0; r < R; r++) {
      const float a0 = warp_sum(acc[r][0]), a1 = TWO ? warp_sum(acc[r][1]) : 0.f, q = NORM ? warp_sum(ss[r]) : 0.f;
      if (lane == 0) {
        red[warp][r][0] = a0;
        red[warp][r][1] = a1;
        red[warp][r][2] = q;
      }
    }
    __syncthreads();
    const int first = warp - kslice;
#pragma unroll
    for (int r = 0; r < R; r++) {
      float a0 = 0.f, a1 = 0.f, q = 0.f;
      for (int j = 0; j < KS; j++) {
        a0 += red[first + j][r][0];
        a1 += red[first + j][r][1];
        q += red[first + j][r][2];
      }
      inv[r] = NORM ? 1.f / sqrtf(q / (float)I + p.eps) : 1.f;
      acc[r][0] = a0 * inv[r];
      acc[r][1] = a1 * inv[r];
    }
    __syncthreads();  // red is read: the block's next vb may write it
  } else {
#pragma unroll
    for (int r = 0; r < R; r++) {
      inv[r] = 1.f;
      if (NORM) inv[r] = 1.f / sqrtf(warp_sum(ss[r]) / (float)I + p.eps);
      acc[r][0] = warp_sum(acc[r][0]) * inv[r];
      if (TWO) acc[r][1] = warp_sum(acc[r][1]) * inv[r];
    }
  }
  if (lane == 0 && kslice == 0) {
#pragma unroll
    for (int r = 0; r < R; r++) {
      if (r >= T) break;
      if (MODE == GF_SWIGLU) {
        if (o0 < O) {
          const long ix = (long)r * O + o0;
          const float gv = acc[r][0], uv = acc[r][1];
          // In this order: aux may alias out0 or out1, and ends as the SwiGLU.
          p.out0[ix] = gv;
          p.out1[ix] = uv;
          p.aux[ix] = silu(gv) * uv;
        }
      } else {
#pragma unroll
        for (int k = 0; k < RW; k++) {
          if (o0 + k < O) {
            const long ix = (long)r * O + o0 + k;
            out[ix] = acc[r][k];
            if (MODE == GF_RESID) p.sum[ix] = p.aux[ix] + acc[r][k];
          }
        }
      }
    }
  }
  if (NORM && p.h != 0 && first) {
    // Every warp holds the same 1/rms (same lanes, same order of
    // operations); the first warps of the grid write h as rmsnorm_block would.
    const int gw = blockIdx.x * GW_WARPS + warp, nwarp = gridDim.x * GW_WARPS;
#pragma unroll
    for (int r = 0; r < R; r++) {
      if (r >= T) break;
      for (int i = (gw * 32 + lane) * 4; i < I; i += nwarp * 128) {
        const float4 v = *(const float4*)(p.x + (long)r * I + i);
        const float4 g = *(const float4*)(p.nw + i);
        *(float4*)(p.h + (long)r * I + i) =
            make_float4(v.x * inv[r] * g.x, v.y * inv[r] * g.y, v.z * inv[r] * g.z, v.w * inv[r] * g.w);
      }
    }
  }
  if (GF_TIMING && lane == 0 && p.part != 0) {
    u64* tp = (u64*)p.part + 4 * ((long)vb * GW_WARPS + warp);
    tp[0] = tm0;
    tp[1] = tm1;
    tp[2] = global_ns();
    tp[3] = sm_id();
  }
}

// GemvP.nvb > gridDim.x (the plain kernels; INFERNIX_CUDA_GEMV_WAVE): the
// grid is one wave of resident blocks, each computing blocks blockIdx.x,
// blockIdx.x + gridDim.x, … of the nvb the product has. Why: gate|up
// (1,536 blocks, 8 resident per SM: 1.45 waves) read at 3.6 TB/s against
// 4.2–4.4 for the products of one wave once their first loads are in
// (run 17 call a, GF_TIMING): its blocks ended from 21 to 56 µs, the
// second wave's starting as the first's finished, and the memory idled
// through the last ones. With as many rows per warp in every block the
// warps end together. Each output is computed as in one block: results
// are bit-identical.
template <int R, int NORM, int MODE, int WIDE>
__device__ __forceinline__ void gemvf(const GemvP& p) {
  constexpr int U = MODE == GF_RESID ? GF_UR : GF_U;  // loads in flight a lane and weight row
  if (WIDE) {
    uint4 wv[U][2];
    gemvf_vb<R, NORM, MODE, 1, U>(p, blockIdx.x, true, wv, -1);
    return;
  }
  const int nvb = max(p.nvb, (int)gridDim.x);
  uint4 wv[U][2];  // GF_XSH: live from one share into the next
  for (int vb = blockIdx.x; vb < nvb; vb += gridDim.x) {
    const int next = GF_XSH && vb + (int)gridDim.x < nvb ? vb + (int)gridDim.x : -1;
    gemvf_vb<R, NORM, MODE, 0, U>(p, vb, vb == (int)blockIdx.x, wv, next);
  }
}

// The wide kernels without the norm prologue (o_proj, down) are held to 64
// registers at R ≤ 2, so that 4 blocks (32 warps) fit an SM; with the norm
// that cap spills (NVRTC 11.8), so they keep what they need (~80: 3 blocks).
// The host sizes the split from the register count it reads back.
#define GFW_MINB(N, R) ((N) == 0 && (R) <= 2 ? 4 : 1)
#define GEMVF(M, N, R)                                                                                           \
  extern "C" __global__ void __launch_bounds__(GEMV_THREADS, GF_MINB_R(R)) gemvf_m##M##_n##N##_r##R(const GemvP p) { \
    STEP_TIMER();                                                                                                \
    gemvf<R, N, M, 0>(p);                                                                                        \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(GEMV_THREADS, GFW_MINB(N, R)) gemvfw_m##M##_n##N##_r##R(const GemvP p) { \
    STEP_TIMER();                                                                                                \
    gemvf<R, N, M, 1>(p);                                                                                        \
  }
#define GEMVF_R(M, N) GEMVF(M, N, 1) GEMVF(M, N, 2) GEMVF(M, N, 4) GEMVF(M, N, 8)
GEMVF_R(0, 0)
GEMVF_R(0, 1)
GEMVF_R(1, 0)
GEMVF_R(1, 1)
GEMVF_R(2, 0)
GEMVF_R(2, 1)

// Skinny products on the tensor cores: out[T×O] = x·wᵀ for 8 < T ≤ 8·NT
// tokens (decode batches of many lanes), x in bf16 (the activations
// rounded as cuBLASLt reads them), w bf16 [O×I], f32 sums; I a multiple
// of 32·SK_WARPS. A block computes 16 outputs for every token; its warps
// split I into SK_WARPS slices and each walks its slice 32 columns a step
// with m16n8k16 products, w as A (rows r0 + g and r0 + g + 8) and x as B
// (tokens 8j + g). The mma's k order is permuted so that each lane's
// operands are one 16-byte load: lane (g, t) holds columns 8t … 8t + 7 of
// the step, slots (2t, 2t+1, 2t+8, 2t+9) of the first product taking
// columns 8t … 8t + 3 and of the second 8t + 4 … 8t + 7, the same in A and
// B, so the sum is over the same pairs. The slices' sums add in slice
// order through shared memory: results do not depend on timing. Why: a
// 16-lane decode step took 7.2 ms against ~3.8 ms for its weights at the
// copy bandwidth, and cuBLASLt's skinny products were the suspects.
// Measured (run 22 call d, one bench): 2,272 tok/s at 16 lanes against
// 2,234 and 2,221 with cuBLASLt (+2%, within a call's drift); with four
// token tiles at 32 lanes (128 registers, spilling) 2,743 against 3,250,
// so that form is gone. Run 22's 16-lane step timeline then put the loss
// in q, k and v as three products (27.7 µs a layer for 50 MB): a launch
// now takes up to three products of one x (blocks [0, nb0) the first,
// the next nb1 the second, the rest the third), as gemvf does for T ≤ 8.
// Opt-in (INFERNIX_CUDA_SKINNY=1; Backend.skinny), 9–16 rows.
#define SK_WARPS 8
#ifndef SK_U
#define SK_U 4  // steps (1 KB of weights a warp each) requested at once
#endif
template <int NT>
__device__ __forceinline__ void gemm_skinny(float* __restrict__ out, const u16* __restrict__ x, const u16* __restrict__ w, int T,
                                            int I, int O, int blk) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int r0 = blk * 16;
  const int slice = I / SK_WARPS, k0 = warp * slice + 8 * t, steps = slice / 32;
  // Rows past O repeat the last and tokens past T the last: loads stay in
  // bounds, their results are not written.
  const u16* wa = w + (long)min(r0 + g, O - 1) * I + k0;
  const u16* wb = w + (long)min(r0 + g + 8, O - 1) * I + k0;
  float c[NT][4];
#pragma unroll
  for (int j = 0; j < NT; j++) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.f;
  uint4 wv[SK_U][2];
#pragma unroll
  for (int u = 0; u < SK_U; u++) {
    if (u < steps) {
      wv[u][0] = ld_stream(wa + u * 32);
      wv[u][1] = ld_stream(wb + u * 32);
    }
  }
  PDL_ENTRY();
  const u16* xr[NT];
#pragma unroll
  for (int j = 0; j < NT; j++) xr[j] = x + (long)min(8 * j + g, T - 1) * I + k0;
  for (int s0 = 0; s0 < steps; s0 += SK_U) {
    uint4 xv[SK_U][NT];
#pragma unroll
    for (int u = 0; u < SK_U; u++) {
#pragma unroll
      for (int j = 0; j < NT; j++)
        if (s0 + u < steps) xv[u][j] = *(const uint4*)(xr[j] + (s0 + u) * 32);
    }
#pragma unroll
    for (int u = 0; u < SK_U; u++) {
      if (s0 + u < steps) {
#pragma unroll
        for (int j = 0; j < NT; j++) {
          mma16816<DT_BF16>(c[j], wv[u][0].x, wv[u][1].x, wv[u][0].y, wv[u][1].y, xv[u][j].x, xv[u][j].y);
          mma16816<DT_BF16>(c[j], wv[u][0].z, wv[u][1].z, wv[u][0].w, wv[u][1].w, xv[u][j].z, xv[u][j].w);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < SK_U; u++) {
      const int s = s0 + SK_U + u;
      if (s < steps) {
        wv[u][0] = ld_stream(wa + s * 32);
        wv[u][1] = ld_stream(wb + s * 32);
      }
    }
  }
  PDL_LATE();
  // c[j][e]: row g + 8·(e / 2), token 8j + 2t + e % 2.
  __shared__ float red[SK_WARPS][NT][32][4];
#pragma unroll
  for (int j = 0; j < NT; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) red[warp][j][lane][e] = c[j][e];
  __syncthreads();
  for (int o = threadIdx.x; o < 16 * 8 * NT; o += blockDim.x) {
    const int i = o & 15, n = o >> 4;  // row, token: consecutive threads write consecutive rows
    const int j = n >> 3, nn = n & 7, l = (i & 7) * 4 + (nn >> 1), e = (i >> 3) * 2 + (nn & 1);
    float s = 0.f;
    for (int ws = 0; ws < SK_WARPS; ws++) s += red[ws][j][l][e];
    if (n < T && r0 + i < O) out[(long)n * O + r0 + i] = s;
  }
}
// Up to three products of x in one launch (SkinnyP; nb0 + nb1 + nb2 blocks).
struct SkinnyP {
  float* out[3];
  const u16* w[3];
  const u16* x;
  int O[3];
  int nb0, nb1, T, I;
};
template <int NT> __device__ __forceinline__ void gemm_skinny3(const SkinnyP& p) {
  const int b = blockIdx.x, j = b < p.nb0 ? 0 : b < p.nb0 + p.nb1 ? 1 : 2;
  const int blk = j == 0 ? b : j == 1 ? b - p.nb0 : b - p.nb0 - p.nb1;
  gemm_skinny<NT>(p.out[j], p.x, p.w[j], p.T, p.I, p.O[j], blk);
}
extern "C" __global__ void __launch_bounds__(32 * SK_WARPS, 2) gemm_skinny_n2(const SkinnyP p) {
  STEP_TIMER();
  gemm_skinny3<2>(p);
}
