// A chain of decode products streamed by one persistent grid: an
// experiment, run by the bench's pchain group (TestPchainBench), not by
// the engine. Measured in run 23 (tests/device/NOTES.md): 3.1–3.5 TB/s
// over Qwen3-8B's products against 3.8 for the fused kernels (gemv.cu),
// because both ways of staging weights in shared memory below read slower
// than the fused kernels' register loads even with no boundary at all
// (the LM head alone: 3.6–3.7 against 4.0–4.1 TB/s); running ahead across
// the boundaries was worth 1.8%. Kept, with its tests, for the next
// design that wants a persistent grid's barriers or a staged stream.
//
// Why: every decode product is its own kernel today, and each kernel
// boundary stops the weight stream: the next kernel's warps issue their
// first loads only once they launch (~1 µs after the last block of the one
// before exits, run 20's step timeline), and every product pays its ramp
// and tail (q|k|v and o_proj read at 3.3 TB/s, the LM head at 4.5). Early
// PDL triggers, L2 prefetches and a chained kernel whose idle blocks loaded
// a few weights before its barriers (runs 14–22) did not keep the stream
// going. Here every warp owns a fixed sequence of weight chunks across all
// the products of the chain and keeps PC_D of them in flight in shared
// memory (cp.async), running ahead into the next products while their
// inputs are not ready yet; only the arithmetic waits at the grid barrier
// between two products. With PC_CROSS=0 a warp requests nothing of a
// product before its barrier: the same kernel with the stream stopped at
// each boundary, to measure what running ahead is worth.
//
// Phase p computes out_p[s][o] = inv_p · Σ_{i in slice s} x_p[i] · w_p[o, i]
// (S_p slices of I_p), where x_p[i] = Σ_s src_p[s][i] (the previous
// phase's partials, or the host's input) and inv_p = 1 / rms(x_p): an
// RMSNorm without scale in every prologue, which keeps values bounded
// along a long chain and costs what the model's norms do. Units of work
// are (row pair, slice); warp gw of W takes units gw, gw + W, …; a unit's
// chunks are 256 columns of both rows (512 bytes each, lane l's 16 bytes
// at 16·l). Every lane reads back only the bytes its own cp.async wrote,
// so waiting for its own copy groups is enough (no warp barrier).
//
// The grid must be resident at once (one block a SM: its shared memory
// allows no second). cnt[p] counts the blocks done with phase p; the host
// zeroes cnt before each launch. A block that waits at a barrier for
// ~2^22 polls (about a second) gives up and sets *stuck (a grid that was not resident at
// once would otherwise hang the device): its results are then garbage. Launches of consecutive phase ranges
// (p0, p1) chain: a launch's first phase reads what the previous launch
// wrote after PDL_WAIT, and weights are requested before it.
#ifndef PC_WARPS
#define PC_WARPS 16
#endif
#ifndef PC_D
#define PC_D 6  // chunk pairs in flight per warp (1 KB each)
#endif
#ifndef PC_CROSS
#define PC_CROSS 1
#endif
#ifndef PC_TMA
#define PC_TMA 0
#endif
#if PC_TMA && defined(__CUDA_ARCH__) && !GF_TMA
#error "PC_TMA=1 needs GF_TMA=1 too (the prelude's bulk copies and mbarriers)"
#endif
#define PC_THREADS (PC_WARPS * 32)
#define PC_SLOT 1024
#define PC_MAXI 12288  // the widest input (floats of shared memory)

struct PcPhase {
  const u16* w;      // [O, I] bf16
  float* out;        // [S, O] partial sums
  const float* src;  // [srcS, srcO] the input's partials
  int O, I, S, units;
  int srcO, srcS, pad[4];
};
static_assert(sizeof(PcPhase) == 64, "the host lays the phase table out in 64-byte entries");

__device__ __forceinline__ u32 pc_load_acquire(const u32* p) {
#if defined(__CUDA_ARCH__)
  u32 v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

// The warp's next chunk to request: phase p (p1: none left), its unit u
// and chunk c of nc, with the phase's fields held.
struct PcIter {
  int p, u, c, nc, I, S, O, units;
  const u16* w;
};

// Moves it to the first phase from it.p on that has a unit for warp gw.
__device__ __forceinline__ void pc_seek(const PcPhase* ph, int p1, int gw, PcIter& it) {
  for (; it.p < p1; it.p++) {
    const int units = __ldg(&ph[it.p].units);
    if (gw < units) {
      it.u = gw, it.c = 0, it.units = units;
      it.I = __ldg(&ph[it.p].I), it.S = __ldg(&ph[it.p].S), it.O = __ldg(&ph[it.p].O);
      it.w = (const u16*)__ldg((const u64*)&ph[it.p].w);
      it.nc = it.I / it.S / 256;
      return;
    }
  }
}

// Requests it's chunk into the slot at saddr (if it is before phase
// limit) and advances; commits a copy group either way, so that every
// warp has exactly PC_D groups younger than the slot it reads next.
__device__ __forceinline__ void pc_issue(const PcPhase* ph, int p1, int gw, int W, int limit, PcIter& it, saddr_t slot, int lane) {
  if (it.p < limit) {
    const int pair = it.u / it.S, s = it.u - pair * it.S;
    const long r0 = 2 * pair, r1 = min(2 * pair + 1, it.O - 1);
    const int col = s * (it.I / it.S) + it.c * 256 + lane * 8;
    cp_async16(slot + lane * 16, it.w + r0 * it.I + col);
    cp_async16(slot + 512 + lane * 16, it.w + r1 * it.I + col);
    if (++it.c == it.nc) {
      it.c = 0;
      it.u += W;
      if (it.u >= it.units) {
        it.p++;
        pc_seek(ph, p1, gw, it);
      }
    }
  }
  cp_async_commit();
}

// Waits (after a launch's first phase) until every block is done with
// phase p − 1, then loads phase p's input into xs: the previous phase's
// partials added in slice order. Returns 1/rms of the input, its squares
// added in the same order in every block.
__device__ __forceinline__ float pc_prologue(const PcPhase* ph, int p, int p0, u32* cnt, u32* stuck, float* xs, float* red) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  if (p > p0) {
    if (tid == 0) {
      for (u32 n = 0; pc_load_acquire(cnt + p - 1) < gridDim.x; n++) {
        if (n == (1u << 22)) {
          atomicAdd(stuck, 1u);
          break;
        }
      }
    }
    __syncthreads();
  }
  const int I = __ldg(&ph[p].I), srcO = __ldg(&ph[p].srcO), srcS = __ldg(&ph[p].srcS);
  const float* src = (const float*)__ldg((const u64*)&ph[p].src);
  float ss = 0.f;
  for (int i = tid * 4; i < I; i += PC_THREADS * 4) {
    float4 v = __ldcg((const float4*)(src + i));
    for (int s = 1; s < srcS; s++) {
      const float4 u = __ldcg((const float4*)(src + (long)s * srcO + i));
      v.x += u.x, v.y += u.y, v.z += u.z, v.w += u.w;
    }
    *(float4*)(xs + i) = v;
    ss = fmaf(v.x, v.x, ss), ss = fmaf(v.y, v.y, ss), ss = fmaf(v.z, v.z, ss), ss = fmaf(v.w, v.w, ss);
  }
  ss = warp_sum(ss);
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  float q = 0.f;
  for (int j = 0; j < PC_WARPS; j++) q += red[j];
  return 1.f / sqrtf(q / (float)I + 1e-6f);
}

// A block counts itself done with phase p once all its threads are.
__device__ __forceinline__ void pc_done(u32* cnt, int p) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(cnt + p, 1u);
  }
}

#if !PC_TMA
extern "C" __global__ void __launch_bounds__(PC_THREADS, 1) pchain(const PcPhase* ph, int p0, int p1, u32* cnt, u32* stuck) {
  EXTERN_SMEM(unsigned char, sm);
  float* xs = (float*)sm;                               // the phase's input, PC_MAXI floats
  unsigned char* ring = sm + PC_MAXI * 4;               // PC_WARPS × PC_D slots
  __shared__ float red[PC_WARPS];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int W = gridDim.x * PC_WARPS, gw = blockIdx.x * PC_WARPS + warp;
  unsigned char* myring = ring + warp * PC_D * PC_SLOT;
  const saddr_t ring0 = smem_addr(myring);
  PcIter it;
  it.p = p0;
  pc_seek(ph, p1, gw, it);
  // Weights never depend on earlier work: the first requests go out
  // before PDL_WAIT.
  for (int d = 0; d < PC_D; d++) pc_issue(ph, p1, gw, W, PC_CROSS ? p1 : p0 + 1, it, ring0 + d * PC_SLOT, lane);
  PDL_ENTRY();
  int head = 0;
  for (int p = p0; p < p1; p++) {
    const float inv = pc_prologue(ph, p, p0, cnt, stuck, xs, red);
    if (!PC_CROSS && p > p0) {
      // The stream stopped at the boundary: request this phase's first
      // chunks only now (it points at them: the limit held it there).
      head = 0;
      for (int d = 0; d < PC_D; d++) pc_issue(ph, p1, gw, W, p + 1, it, ring0 + d * PC_SLOT, lane);
    }
    const int O = __ldg(&ph[p].O), I = __ldg(&ph[p].I), S = __ldg(&ph[p].S), units = __ldg(&ph[p].units);
    float* out = (float*)__ldg((const u64*)&ph[p].out);
    const int nc = I / S / 256;
    for (int u = gw; u < units; u += W) {
      const int pair = u / S, s = u - pair * S;
      const float* xc = xs + s * (I / S) + lane * 8;
      float a0 = 0.f, a1 = 0.f;
      for (int c = 0; c < nc; c++) {
        cp_async_wait<PC_D - 1>();
        unsigned char* sl = myring + head * PC_SLOT;
        const uint4 w0 = *(const uint4*)(sl + lane * 16), w1 = *(const uint4*)(sl + 512 + lane * 16);
        const float4 xa = *(const float4*)(xc + c * 256), xb = *(const float4*)(xc + c * 256 + 4);
        const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
        float f0[8], f1[8];
        unpack_bf16x8(w0, f0);
        unpack_bf16x8(w1, f1);
#pragma unroll
        for (int e = 0; e < 8; e++) {
          a0 = fmaf(xv[e], f0[e], a0);
          a1 = fmaf(xv[e], f1[e], a1);
        }
        pc_issue(ph, p1, gw, W, PC_CROSS ? p1 : p + 1, it, ring0 + head * PC_SLOT, lane);
        head = head + 1 == PC_D ? 0 : head + 1;
      }
      a0 = warp_sum(a0) * inv;
      a1 = warp_sum(a1) * inv;
      if (lane == 0) {
        out[(long)s * O + 2 * pair] = a0;
        if (2 * pair + 1 < O) out[(long)s * O + 2 * pair + 1] = a1;
      }
    }
    pc_done(cnt, p);  // (also: xs is free)
  }
  cp_async_wait<0>();
}
#else
// PC_TMA=1: the weights stream by the copy engine (cp.async.bulk, 1-D
// TMA) into a ring of PC_ST stages a block, each PC_R weight rows of
// PC_KC columns (a slice of I: S = I / PC_KC), one bulk copy of PC_KC·2
// contiguous bytes a row, its bytes counted on the stage's mbarrier. Why:
// the per-warp cp.async ring above read at 3.0–3.6 TB/s where the fused
// kernels read at ~4 (run 23 call b), and run 15's bulk copies (GF_TMA in
// gemv.cu) were 1 KB each (16 rows × 512 columns a stage): here a copy is
// 8 KB and a stage 32 KB, up to 160 KB in flight a SM without any lane's
// load slots. Thread 0 keeps the ring full, running ahead into the next
// phases; the block's warps split a stage's rows (PC_WARPS / PC_R warps a
// row, PC_CPW columns each), add their sums through shared memory in warp
// order, and the stage is refilled once every warp has passed the
// barrier that follows its reads. Units: (row group of PC_R, slice),
// block b taking units b, b + G, …; the host lays out S and units so.
#ifndef PC_R
#define PC_R 4
#endif
#ifndef PC_KC
#define PC_KC 4096
#endif
#ifndef PC_ST
#define PC_ST 5
#endif
#define PC_STAGE (PC_R * PC_KC * 2)
#define PC_WPR (PC_WARPS / PC_R)  // warps a row
#define PC_CPW (PC_KC / PC_WPR)   // columns a warp: a multiple of 256
static_assert(PC_WARPS % PC_R == 0 && PC_CPW % 256 == 0, "a stage's rows split into whole 256-column chunks per warp");

// Thread 0's next unit to request: u of phase p (p1: none left).
struct PcTIter {
  int p, u, units, S, O, I;
  const u16* w;
};

__device__ __forceinline__ void pc_tseek(const PcPhase* ph, int p1, PcTIter& it) {
  for (; it.p < p1; it.p++) {
    const int units = __ldg(&ph[it.p].units);
    if ((int)blockIdx.x < units) {
      it.u = blockIdx.x, it.units = units;
      it.S = __ldg(&ph[it.p].S), it.O = __ldg(&ph[it.p].O), it.I = __ldg(&ph[it.p].I);
      it.w = (const u16*)__ldg((const u64*)&ph[it.p].w);
      return;
    }
  }
}

// Requests it's unit into the stage at dst, counted on bar, and advances.
__device__ __forceinline__ void pc_tissue(const PcPhase* ph, int p1, PcTIter& it, saddr_t dst, saddr_t bar) {
  if (it.p >= p1) return;
  const int g = it.u / it.S, s = it.u - g * it.S;
  const int r0 = g * PC_R, nr = min(PC_R, it.O - r0);
  mbar_expect_tx(bar, nr * PC_KC * 2);
  for (int r = 0; r < nr; r++) tma_load_1d(dst + r * PC_KC * 2, it.w + (long)(r0 + r) * it.I + s * PC_KC, PC_KC * 2, bar);
  it.u += gridDim.x;
  if (it.u >= it.units) {
    it.p++;
    pc_tseek(ph, p1, it);
  }
}

extern "C" __global__ void __launch_bounds__(PC_THREADS, 1) pchain(const PcPhase* ph, int p0, int p1, u32* cnt, u32* stuck) {
  EXTERN_SMEM(unsigned char, sm);
  float* xs = (float*)sm;                  // the phase's input, PC_MAXI floats
  unsigned char* ring = sm + PC_MAXI * 4;  // PC_ST stages
  __shared__ __align__(8) u64 bars[PC_ST];
  __shared__ float red[PC_WARPS];
  __shared__ float part[2][PC_WARPS];  // a stage's warp sums, by stage parity
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  PcTIter it;
  if (tid == 0) {
    for (int st = 0; st < PC_ST; st++) mbar_init(smem_addr(&bars[st]), 1);
    mbar_fence_init();
    // Weights never depend on earlier work: the ring fills before PDL_WAIT.
    it.p = p0;
    pc_tseek(ph, p1, it);
    for (int st = 0; st < PC_ST; st++) pc_tissue(ph, p1, it, smem_addr(ring + st * PC_STAGE), smem_addr(&bars[st]));
  }
  __syncthreads();  // the barriers are initialised before anyone waits on them
  PDL_ENTRY();
  const int row = warp / PC_WPR, q = warp - row * PC_WPR;
  int n = 0;  // stages consumed: stage n is in slot n % PC_ST, its (n / PC_ST)-th use
  for (int p = p0; p < p1; p++) {
    const float inv = pc_prologue(ph, p, p0, cnt, stuck, xs, red);
    const int O = __ldg(&ph[p].O), S = __ldg(&ph[p].S), units = __ldg(&ph[p].units);
    float* out = (float*)__ldg((const u64*)&ph[p].out);
    for (int u = blockIdx.x; u < units; u += gridDim.x, n++) {
      const int g = u / S, s = u - g * S, slot = n % PC_ST;
      mbar_wait(smem_addr(&bars[slot]), (n / PC_ST) & 1);
      const unsigned char* st = ring + slot * PC_STAGE + (row * PC_KC + q * PC_CPW) * 2;
      const float* xc = xs + s * PC_KC + q * PC_CPW + lane * 8;
      float a = 0.f;
#pragma unroll 4
      for (int c = 0; c < PC_CPW / 256; c++) {
        const uint4 wv = *(const uint4*)(st + (c * 256 + lane * 8) * 2);
        const float4 xa = *(const float4*)(xc + c * 256), xb = *(const float4*)(xc + c * 256 + 4);
        const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
        float f[8];
        unpack_bf16x8(wv, f);
#pragma unroll
        for (int e = 0; e < 8; e++) a = fmaf(xv[e], f[e], a);
      }
      a = warp_sum(a);
      if (lane == 0) part[n & 1][warp] = a;
      __syncthreads();  // the stage is read and its sums are in
      if (tid == 0) pc_tissue(ph, p1, it, smem_addr(ring + slot * PC_STAGE), smem_addr(&bars[slot]));
      if (tid < PC_R && g * PC_R + tid < O) {
        float v = 0.f;
        for (int j = 0; j < PC_WPR; j++) v += part[n & 1][tid * PC_WPR + j];
        out[(long)s * O + g * PC_R + tid] = v * inv;
      }
    }
    pc_done(cnt, p);
  }
}
#endif
