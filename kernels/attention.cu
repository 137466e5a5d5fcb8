// Paged attention. Compiled per model with -DHD=<head dim> (a multiple of 8,
// 8…256) and -DG=<query heads per KV head> (≤ 16).
//
// KV cache layout per layer: [block][kvHead][64 slots][HD] bf16, so that one
// (block, head) tile is 64·HD contiguous elements.
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

#define CH 128          // positions per split (one per thread in the score phase)
#define NT 128          // threads per block
#define DG (HD / 8)     // 16-byte groups per row
#define PG (NT / DG)    // position groups in the P·V phase (threads past PG·DG idle there)
#define KV_LD (HD + 8)  // shared-memory row of a K/V tile (padded: conflict-free 16-byte reads)

__device__ __forceinline__ long kv_row(const int* tab, int p, int kvh, int h) {
  return (((long)tab[p >> 6] * kvh + h) * 64 + (p & 63)) * HD;
}

// Split attention, one query token per block row: block (h, t, z) computes,
// (its K and V rows copied to shared memory first with coalesced cp.async,
// dynamic shared memory 2·CH·KV_LD·2 bytes),
// for the G query heads of KV head h and token t, the softmax-weighted sum of
// V over positions [z·CH, min(z·CH + CH, pos[t] + 1)) and writes the
// unnormalised sum, the max score and the sum of exponentials to part
// [t][head][zmax][HD + 2]. attn_combine merges the splits. Blocks past the
// token's length exit at once, so the grid may be sized for the longest
// context (as a captured graph must be).
extern "C" __global__ void __launch_bounds__(NT) attn_split(
    const u16* __restrict__ kc, const u16* __restrict__ vc, const float* __restrict__ q, float* __restrict__ part,
    const int* __restrict__ tokTab, const int* __restrict__ pos, const int* __restrict__ tabs, int kvh, float scale, int zmax) {
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
  extern __shared__ __align__(16) u16 kvs[];
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
      unpack_bf16x8(kr[c], kf);
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
    unpack_bf16x8(u, vf);
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
    float* out = part + (((long)t * heads + (long)h * G + g) * zmax + z) * (HD + 2);
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
  __shared__ float wz[COMBINE_MAXZ];
  __shared__ float red[32];
  const int hh = blockIdx.x, t = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
  const int nz = (pos[t] + CH) / CH;  // ceil((pos + 1) / CH)
  const float* pp = part + ((long)t * heads + hh) * zmax * (HD + 2);
  // M = max over splits.
  float m = NEG_INF;
  for (int z = tid; z < nz; z += blockDim.x) m = fmaxf(m, pp[(long)z * (HD + 2) + HD]);
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
      const float* pz = pp + (long)(z0 + z) * (HD + 2);
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
        for (int z = 0; z < zn; z++) a = fmaf(pp[(long)(z0 + z) * (HD + 2) + d], wz[z], a);
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
