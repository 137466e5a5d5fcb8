// A dense MLP block of one decode token in one launch (INFERNIX_CUDA_MLP=fused,
// engine/backend/cuda/mlp.go): RMSNorm(x) → gate|up → SwiGLU → down → + the
// residual, where the fused products (kernels/gemv.cu) take two launches.
// Why: each launch boundary costs a product its ramp and tail: on the H200
// gate|up streams at 4.10 TB/s and down at 4.33 from their waits, against
// 4.56 for the LM head inside the same step (run 29), and the two together
// are 76 µs of a layer's ~117 at 512 positions. Here the weights of both
// stream as one: block b owns the intermediate rows [j0, j1) (an even share
// of F) and reads their gate and up rows, then the same rows of down
// transposed (wdt: row j is column j of down [I, F], made once per weight
// by transpose_bf16), so no block waits for another's SwiGLU; each block's
// share of down is a partial sum of the whole output, added into acc with
// vector reductions, and the last block to finish writes the product and
// the residual sum and leaves acc zero. The loads of the down rows go out
// before the block's SwiGLU is known, so the stream runs through it.
//
// A block of NW = K·NS warps (NS = I/256: warp w reads columns
// 256·(w mod NS) … of every row it takes, K = NW/NS warps share a column
// slice and split the rows). Items, in a warp's order: phase 1, rows
// r = k, k+K, … of [gate rows j0…j1, up rows j0…j1]; phase 2, rows
// j = k, k+K, … of wdt's j0…j1. Each lane has MLP_U items' 16-byte loads in
// flight in a ring (item q in slot q mod MLP_U), phase 2's first ones
// issued during phase 1's last.
//
// Not bit-identical to the two kernels: the dot products add in another
// order, and the reductions make the sum's order depend on timing.
#ifndef MLP_U
#define MLP_U 8  // loads in flight a lane: a divisor of 32 (phase 1 takes rows 32 at a time)
#endif
static_assert(32 % MLP_U == 0, "MLP_U must divide 32");
#define MLP_TB 8  // the last block's elements a thread requests at once
// The most threads a block: NW ≤ MLP_MAXT/32 (the host's choice, at most
// one block an SM). 512 leaves 128 registers a thread for the ring; 1024
// (two warps a column slice at I = 4096) holds it to 64, which spills at
// MLP_U 8 (NVRTC 11.8).
#ifndef MLP_MAXT
#define MLP_MAXT 512
#endif
// MLP_RED4=1: the partial sums go out as red.global.v4.f32.add (sm_90,
// PTX 8.1); 0: four scalar atomicAdds.
#ifndef MLP_RED4
#define MLP_RED4 1
#endif
// MLP_NORED=1: a diagnostic that times the kernel without its reductions
// into acc: m and the sum come out zero and resid. Never for results.
#ifndef MLP_NORED
#define MLP_NORED 0
#endif

struct MlpP {
  const float* x;      // [I] the residual stream: the RMSNorm's input
  const float* nw;     // [I] the RMSNorm's weight
  float* h;            // [I] x normalised (the norm's output), or null
  const u16* wg;       // [F, I] gate
  const u16* wu;       // [F, I] up
  const u16* wdt;      // [F, I] down transposed
  float* gate;         // [F]
  float* up;           // [F]
  float* act;          // [F] silu(gate)·up; may alias gate or up
  float* m;            // [I] down's product
  const float* resid;  // [I] or null; may alias x or sum
  float* sum;          // [I] resid + m where resid is given
  float* acc;          // [I] zero on entry, left zero
  int* cnt;            // zero on entry, left zero
  int I, F;
  float eps;
  int pad;
};

__device__ __forceinline__ void red_add4(float* p, float4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && MLP_RED4
  asm volatile("red.global.v4.f32.add [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
#else
  atomicAdd(p, v.x);
  atomicAdd(p + 1, v.y);
  atomicAdd(p + 2, v.z);
  atomicAdd(p + 3, v.w);
#endif
}

// The dynamic shared memory mlp_fused needs, in floats (the host computes
// the same: mlpSmemFloats in mlp.go).
__device__ __forceinline__ int mlp_red_floats(int I, int F, int G, int K) {
  const int NS = I >> 8, jmax = (F + G - 1) / G;
  return max(2 * jmax * NS, K * I);
}

extern "C" __global__ void __launch_bounds__(MLP_MAXT, 1) mlp_fused(const MlpP p) {
  STEP_TIMER();
  EXTERN_SMEM(float, sm);
  __shared__ int last;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  const int I = p.I, F = p.F, NS = I >> 8, K = nwarps / NS;
  const int s = warp % NS, k = warp / NS;
  const int G = gridDim.x, b = blockIdx.x;
  const int j0 = (int)((long)b * F / G), j1 = (int)((long)(b + 1) * F / G), J = j1 - j0;
  const int jmax = (F + G - 1) / G;
  float* red = sm;                                 // phase 1: [2·J][NS]; at the end: [K][I]
  float* hs = sm + mlp_red_floats(I, F, G, K);     // [jmax] the block's SwiGLU
  float* ssq = hs + jmax;                          // [NS] Σx² of each column slice
  const int col = s * 256 + lane * 8;
  const int n1 = k < 2 * J ? (2 * J - 1 - k) / K + 1 : 0;
  const int n2 = k < J ? (J - 1 - k) / K + 1 : 0;
  const int n = n1 + n2;
  auto item = [&](int q) -> const u16* {
    if (q < n1) {
      const int r = k + q * K;
      return (r < J ? p.wg + (long)(j0 + r) * I : p.wu + (long)(j0 + r - J) * I) + col;
    }
    return p.wdt + (long)(j0 + k + (q - n1) * K) * I + col;
  };
  uint4 wv[MLP_U];
#pragma unroll
  for (int u = 0; u < MLP_U; u++)
    if (u < n) wv[u] = ld_stream(item(u));
  PDL_ENTRY();
  float xs[8];
  {
    const float4 a = __ldg((const float4*)(p.x + col)), c = __ldg((const float4*)(p.x + col + 4));
    const float4 ga = __ldg((const float4*)(p.nw + col)), gc = __ldg((const float4*)(p.nw + col + 4));
    const float xv[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
    const float g[8] = {ga.x, ga.y, ga.z, ga.w, gc.x, gc.y, gc.z, gc.w};
    float q = 0.f;
#pragma unroll
    for (int e = 0; e < 8; e++) {
      q = fmaf(xv[e], xv[e], q);
      xs[e] = xv[e] * g[e];
    }
    q = warp_sum(q);
    if (k == 0 && lane == 0) ssq[s] = q;
  }
  // Phase 1: each row's slice against x·nw, its sum by slice into red, 32
  // rows at a time: a lane's partial dots of the 32, then one
  // reduce-scatter (the halves exchanged across lane bit 16, 8, … 1: the
  // pairs warp_sum adds, so the same bits) leaves row base + lane's sum in
  // lane `lane`. Why: a warp_sum a row, each in its own branch, made every
  // row wait five dependent shuffles (run 43, H100: 165 µs a layer, 1.8
  // TB/s, against 103 for the two fused products).
  for (int base = 0; base < n1; base += 32) {
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; i++) {
      const int q = base + i;
      d[i] = 0.f;
      if (q < n1) {
        float wf[8];
        unpack_bf16x8(wv[i % MLP_U], wf);
        if (q + MLP_U < n) wv[i % MLP_U] = ld_stream(item(q + MLP_U));
#pragma unroll
        for (int e = 0; e < 8; e++) d[i] = fmaf(xs[e], wf[e], d[i]);
      }
    }
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) {
      const bool hi = (lane & m) != 0;
#pragma unroll
      for (int j = 0; j < m; j++) {
        const float keep = hi ? d[j + m] : d[j], send = hi ? d[j] : d[j + m];
        d[j] = keep + __shfl_xor_sync(0xffffffffu, send, m);
      }
    }
    if (base + lane < n1) red[(k + (base + lane) * K) * NS + s] = d[0];
  }
  __syncthreads();
  float tot = 0.f;
  for (int i = 0; i < NS; i++) tot += ssq[i];
  const float inv = 1.f / sqrtf(tot / (float)I + p.eps);
  for (int t = threadIdx.x; t < J; t += blockDim.x) {
    float gv = 0.f, uv = 0.f;
    for (int i = 0; i < NS; i++) {
      gv += red[t * NS + i];
      uv += red[(J + t) * NS + i];
    }
    gv *= inv;
    uv *= inv;
    const float a = silu(gv) * uv;
    hs[t] = a;
    // In this order: act may alias gate or up.
    p.gate[j0 + t] = gv;
    p.up[j0 + t] = uv;
    p.act[j0 + t] = a;
  }
  if (p.h != 0) {
    for (int i = (int)((long)b * I / G) + threadIdx.x; i < (int)((long)(b + 1) * I / G); i += blockDim.x) p.h[i] = p.x[i] * inv * p.nw[i];
  }
  __syncthreads();
  // Phase 2: the block's rows of down transposed, weighted by its SwiGLU.
  float ad[8];
#pragma unroll
  for (int e = 0; e < 8; e++) ad[e] = 0.f;
  for (int base = n1 / MLP_U * MLP_U; base < n; base += MLP_U) {
#pragma unroll
    for (int u = 0; u < MLP_U; u++) {
      const int q = base + u;
      if (q >= n1 && q < n) {
        float wf[8];
        unpack_bf16x8(wv[u], wf);
        if (q + MLP_U < n) wv[u] = ld_stream(item(q + MLP_U));
        const float a = hs[k + (q - n1) * K];
#pragma unroll
        for (int e = 0; e < 8; e++) ad[e] = fmaf(a, wf[e], ad[e]);
      }
    }
  }
  PDL_LATE();
  // The K warps of a column slice add in k order, then into acc.
  *(float4*)(red + k * I + col) = make_float4(ad[0], ad[1], ad[2], ad[3]);
  *(float4*)(red + k * I + col + 4) = make_float4(ad[4], ad[5], ad[6], ad[7]);
  __syncthreads();
  for (int i = threadIdx.x * 4; i < I; i += blockDim.x * 4) {
    float4 v = *(const float4*)(red + i);
    for (int kk = 1; kk < K; kk++) {
      const float4 w = *(const float4*)(red + kk * I + i);
      v.x += w.x;
      v.y += w.y;
      v.z += w.z;
      v.w += w.w;
    }
    if (!MLP_NORED) red_add4(p.acc + i, v);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(p.cnt, 1) == G - 1;
  __syncthreads();
  if (!last) return;
  // Every block's sums are in: the last one writes the outputs. Every
  // block read x before counting itself, so sum may overwrite it.
  __threadfence();
  // MLP_TB elements a thread requested at once, then written: one at a
  // time, each store would wait for its load before the next load issues.
  for (int i0 = threadIdx.x; i0 < I; i0 += MLP_TB * blockDim.x) {
    float a[MLP_TB], r[MLP_TB];
#pragma unroll
    for (int j = 0; j < MLP_TB; j++) {
      const int i = i0 + j * blockDim.x;
      a[j] = i < I ? __ldcg(p.acc + i) : 0.f;
      r[j] = i < I && p.resid != 0 ? p.resid[i] : 0.f;
    }
#pragma unroll
    for (int j = 0; j < MLP_TB; j++) {
      const int i = i0 + j * blockDim.x;
      if (i < I) {
        p.m[i] = a[j];
        if (p.resid != 0) p.sum[i] = r[j] + a[j];
        p.acc[i] = 0.f;
      }
    }
  }
  if (threadIdx.x == 0) *p.cnt = 0;
}

// out [C, R] = inᵀ for a bf16 in [R, C] (down's weight for mlp_fused),
// through 32×32 tiles; blocks of 32×8 threads, grid (⌈C/32⌉, ⌈R/32⌉).
extern "C" __global__ void transpose_bf16(u16* out, const u16* in, int R, int C) {
  __shared__ u16 t[32][34];
  const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
  PDL_ENTRY();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int r = r0 + i, c = c0 + threadIdx.x;
    if (r < R && c < C) t[i][threadIdx.x] = in[(long)r * C + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int c = c0 + i, r = r0 + threadIdx.x;
    if (c < C && r < R) out[(long)c * R + r] = t[threadIdx.x][i];
  }
}
