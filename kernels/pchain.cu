// A chain of decode products streamed by one persistent grid (an
// experiment, run by the bench's pchain group, not by the engine yet).
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
      if (!PC_CROSS) {
        // The stream stopped at the boundary: request this phase's first
        // chunks only now (it points at them: the limit held it there).
        head = 0;
        for (int d = 0; d < PC_D; d++) pc_issue(ph, p1, gw, W, p + 1, it, ring0 + d * PC_SLOT, lane);
      }
    }
    const int O = __ldg(&ph[p].O), I = __ldg(&ph[p].I), S = __ldg(&ph[p].S), units = __ldg(&ph[p].units);
    const int srcO = __ldg(&ph[p].srcO), srcS = __ldg(&ph[p].srcS);
    const float* src = (const float*)__ldg((const u64*)&ph[p].src);
    float* out = (float*)__ldg((const u64*)&ph[p].out);
    // The input (the previous phase's partials added in slice order) and
    // its sum of squares, added in the same order in every block.
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
    const float inv = 1.f / sqrtf(q / (float)I + 1e-6f);
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
    __syncthreads();  // the block's outputs are written and xs is free
    if (tid == 0) {
      __threadfence();
      atomicAdd(cnt + p, 1u);
    }
  }
  cp_async_wait<0>();
}
