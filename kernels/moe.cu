// Mixture-of-experts decode in two launches after the router's product
// (engine/backend/cuda moe_fused.go; INFERNIX_CUDA_MOE_FUSED=0 falls back
// to moe_route, the indexed products, SwiGLU and moe_combine: six launches
// and a separate residual add). Why: a Qwen3-30B-A3B layer moves ~75 MB of
// expert weights per token in three products, and at one token the
// unfused path spends as long on its seven small launches and their
// dependent ramps as on the bytes.
//
//   moe_gateup: every block routes its token (softmax over the router's
//     logits, the top K by probability, ties to the lower index, weights
//     renormalised if asked: bit for bit what moe_route computes), then
//     each warp computes one row of its expert's gate and up products and
//     writes act = w_k · silu(gate) · up, the routing weight folded in so
//     that the down product needs no per-expert sums. The shared expert
//     (if any) is one more pair per token, with weight 1; the first of its
//     blocks also computes the shared expert's gate logit z = x · sgw.
//   moe_down: out[t, o] = Σ_k Σ_i D_{e_k}[o, i] · act[t, k, i]
//     + sigmoid(z_t) · Σ_i SD[o, i] · act[t, K, i] (no sigmoid without a
//     gate weight), MOE_KS warps per output row, each over its share of the
//     experts, added in a fixed order (deterministic); with resid, also
//     sum = aux + out (the decoder's residual add as the epilogue).
//
// Experts are bf16 rows of H (gate, up) or inter (down) elements, every
// row 16-byte aligned (the host checks); E ≤ MOE_EMAX, K ≤ MOE_KMAX.

// 16-byte weight loads in flight per lane and row: MOE_UG in moe_gateup
// (two rows a warp), MOE_UD in moe_down. MOE_GU_MINB: moe_gateup's minimum
// resident blocks per SM (__launch_bounds__), so that a token's K·inter/8
// blocks (768 for Qwen3-30B-A3B) fit the GPU in one wave: at 62 registers
// 4 blocks fit an SM and the 768 ran in 1.45 waves. Measured (H100, the
// whole Qwen3-30B-A3B, decode at 512, tok/s one lane / 16 lanes, a process
// each): UG 4, UD 4 (no bound) 277.0, 270.5 / 623.8, 624.7; UG 2 with
// MINB 6 (40 registers, no spill) 286.4 / 632.6; and UD 2 as well 285.1,
// 292.9 / 659.4, 662.7; UG 2 alone 281.2 / 639.3; UD 8 256.6 / 594.4
// (tests/device/NOTES.md, run 32). Also measured and dropped: the routing's
// weights computed by K threads at once and the expert tables read before
// PDL_WAIT (run 32, call d: within the drift).
#ifndef MOE_UG
#define MOE_UG 2
#endif
#ifndef MOE_UD
#define MOE_UD 2
#endif
#ifndef MOE_GU_MINB
#define MOE_GU_MINB 6
#endif
// The host sizes its grids from these (moe_fused.go moeGateUpRows, moeDownRows).
#define MOE_WARPS 8
#define MOE_KS 2  // warps per output row in moe_down
#define MOE_EMAX 1024
#define MOE_KMAX 64

struct MoeP {
  const float* logits;  // [T, E] the router's logits
  const float* x;       // [T, H] the normalised hidden state
  const u64* gate;      // [E] expert addresses: gate and up [inter, H], down [H, inter]
  const u64* up;
  const u64* down;
  const u16* sgate;     // the shared expert ([sinter, H], [H, sinter]), or null
  const u16* sup;
  const u16* sdown;
  const float* sgw;     // the shared expert's gate weight [H] (f32), or null
  float* act;           // [T·(K + S), ldA]: w_k · silu(gate) · up
  int* topIdx;          // [T·K] the chosen experts, in rank order
  float* topW;          // [T·K] their weights
  u64* dsel;            // [T·K] the chosen experts' down weights
  float* z;             // [T] the shared expert's gate logit
  float* out;           // [T, H]
  const float* aux;     // resid: the residual [T, H]
  float* sum;           // resid: aux + out [T, H] (may be aux)
  int* plan;            // grouped: moe_plan's layout (below)
  float* y;             // grouped: [T·(K + S), H] each pair's down product
  int T, E, K, H, inter, sinter, ldA, norm, nbR, nbS, resid, pad;
};

// lane's share of the dot products of weight rows w0 and w1 (n elements,
// 16-byte aligned) with x: elements lane·8 + 256·j, MOE_UG loads of each row
// in flight.
__device__ __forceinline__ void moe_dot2(const u16* w0, const u16* w1, const float* x, int n, int lane, float& a0, float& a1) {
  for (int i0 = lane * 8; i0 < n; i0 += 256 * MOE_UG) {
    uint4 wv[MOE_UG][2];
#pragma unroll
    for (int u = 0; u < MOE_UG; u++) {
      const int i = i0 + u * 256;
      if (i < n) {
        wv[u][0] = ld_stream(w0 + i);
        wv[u][1] = ld_stream(w1 + i);
      }
    }
#pragma unroll
    for (int u = 0; u < MOE_UG; u++) {
      const int i = i0 + u * 256;
      if (i < n) {
        float g[8], h[8];
        unpack_bf16x8(wv[u][0], g);
        unpack_bf16x8(wv[u][1], h);
        const float4 xa = __ldg((const float4*)(x + i));
        const float4 xb = __ldg((const float4*)(x + i + 4));
        const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
        for (int e = 0; e < 8; e++) {
          a0 = fmaf(xv[e], g[e], a0);
          a1 = fmaf(xv[e], h[e], a1);
        }
      }
    }
  }
}

// The top K of token t's E logits and their weights into sel and sw
// (shared memory), as moe_route computes them: the same maximum and sum
// (warp 0, lanes strided, the same reductions), the k-th choice the logit
// of rank k in (value descending, index ascending) order, which is what
// moe_route's repeated arg-max with ties to the lower index picks.
__device__ __forceinline__ void moe_route_block(const MoeP& p, int t, int* sel, float* sw) {
  __shared__ __align__(16) float sl[MOE_EMAX];
  __shared__ float ms[2];
  const int E = p.E, K = p.K, E4 = (E + 3) & ~3;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int j = threadIdx.x; j < E4; j += blockDim.x) sl[j] = j < E ? p.logits[(long)t * E + j] : NEG_INF;
  if ((int)threadIdx.x < K) sel[threadIdx.x] = 0;  // a valid expert whatever the logits (NaN)
  __syncthreads();
  for (int j = threadIdx.x; j < E; j += blockDim.x) {
    const float v = sl[j];
    int rank = 0;
    for (int i = 0; i < E4; i += 4) {
      const float4 u = *(const float4*)(sl + i);
      rank += (u.x > v || (u.x == v && i < j)) + (u.y > v || (u.y == v && i + 1 < j)) +
              (u.z > v || (u.z == v && i + 2 < j)) + (u.w > v || (u.w == v && i + 3 < j));
    }
    if (rank < K) sel[rank] = j;
  }
  if (warp == 0) {
    float m, s;
    route_softmax_warp(sl, E, lane, m, s);
    if (lane == 0) ms[0] = m, ms[1] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float top = 0.f;
    for (int k = 0; k < K; k++) {
      const float pk = expf(sl[sel[k]] - ms[0]) / ms[1];
      top += pk;
      sw[k] = pk;
    }
    if (p.norm)
      for (int k = 0; k < K; k++) sw[k] /= top;
  }
  __syncthreads();
}

extern "C" __global__ void __launch_bounds__(256, MOE_GU_MINB) moe_gateup(const MoeP p) {
  STEP_TIMER();
  const int S = p.sgate != 0;
  const int per = p.K * p.nbR + S * p.nbS;
  const int t = blockIdx.x / per, r = blockIdx.x - t * per;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool shared = r >= p.K * p.nbR;
  const int k = shared ? p.K : r / p.nbR;
  const int rb = shared ? r - p.K * p.nbR : r - k * p.nbR;
  const int inter = shared ? p.sinter : p.inter, H = p.H;
  const int o = rb * MOE_WARPS + warp;
  const float* xr = p.x + (long)t * H;
  __shared__ int sel[MOE_KMAX];
  __shared__ float sw[MOE_KMAX];
  PDL_ENTRY();
  const u16 *wg, *wu;
  float wk = 1.f;
  if (!shared) {
    moe_route_block(p, t, sel, sw);
    const int e = sel[k];
    wk = sw[k];
    wg = (const u16*)p.gate[e];
    wu = (const u16*)p.up[e];
    if (rb == 0 && threadIdx.x == 0) {
      p.topIdx[(long)t * p.K + k] = e;
      p.topW[(long)t * p.K + k] = wk;
      p.dsel[(long)t * p.K + k] = p.down[e];
    }
  } else {
    wg = p.sgate;
    wu = p.sup;
    if (rb == 0 && p.sgw != 0) {
      // z = x · sgw: the warps' slices of H, added in warp order.
      __shared__ float zp[MOE_WARPS];
      float a = 0.f;
      for (int i = threadIdx.x; i < H; i += blockDim.x) a = fmaf(xr[i], p.sgw[i], a);
      a = warp_sum(a);
      if (lane == 0) zp[warp] = a;
      __syncthreads();
      if (threadIdx.x == 0) {
        float zz = 0.f;
        for (int w = 0; w < MOE_WARPS; w++) zz += zp[w];
        p.z[t] = zz;
      }
    }
  }
  // Rows past inter repeat the last (loads in bounds, results dropped).
  const long ro = (long)min(o, inter - 1) * H;
  float a0 = 0.f, a1 = 0.f;
  moe_dot2(wg + ro, wu + ro, xr, H, lane, a0, a1);
  a0 = warp_sum(a0);
  a1 = warp_sum(a1);
  if (lane == 0 && o < inter) p.act[((long)t * (p.K + S) + k) * p.ldA + o] = wk * (silu(a0) * a1);
}

extern "C" __global__ void __launch_bounds__(256) moe_down(const MoeP p) {
  STEP_TIMER();
  constexpr int RPB = MOE_WARPS / MOE_KS;  // output rows per block
  const int H = p.H, K = p.K, S = p.sdown != 0;
  const int nbD = (H + RPB - 1) / RPB;
  const int t = blockIdx.x / nbD, rb = blockIdx.x - t * nbD;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int slice = warp % MOE_KS, o = rb * RPB + warp / MOE_KS;
  const long oc = min(o, H - 1);
  __shared__ const u16* rows[MOE_KMAX];
  __shared__ float red[MOE_WARPS][2];
  PDL_ENTRY();
  const int inter = p.inter;
  for (int k = threadIdx.x; k < K; k += blockDim.x) rows[k] = (const u16*)p.dsel[(long)t * K + k];
  __syncthreads();
  const float* actT = p.act + (long)t * (K + S) * p.ldA;
  // This warp's experts are k = slice, slice + MOE_KS, …; its chunks of 8
  // elements n = (kk, j) run over them, kk-th expert, j-th chunk.
  const int nc = inter / 8;
  const int nk = (K - slice + MOE_KS - 1) / MOE_KS;
  const int total = nk * nc;
  float acc = 0.f;
  for (int n0 = lane; n0 < total; n0 += 32 * MOE_UD) {
    uint4 wv[MOE_UD];
    const float* ap[MOE_UD];
#pragma unroll
    for (int u = 0; u < MOE_UD; u++) {
      const int n = n0 + 32 * u;
      if (n < total) {
        const int kk = n / nc, j = n - kk * nc, kx = slice + kk * MOE_KS;
        wv[u] = ld_stream(rows[kx] + oc * inter + j * 8);
        ap[u] = actT + (long)kx * p.ldA + j * 8;
      }
    }
#pragma unroll
    for (int u = 0; u < MOE_UD; u++) {
      if (n0 + 32 * u < total) {
        float w[8];
        unpack_bf16x8(wv[u], w);
        const float4 xa = __ldg((const float4*)ap[u]);
        const float4 xb = __ldg((const float4*)(ap[u] + 4));
        const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
        for (int e = 0; e < 8; e++) acc = fmaf(xv[e], w[e], acc);
      }
    }
  }
  float accS = 0.f;
  if (S) {
    const int ncs = p.sinter / 8;
    const u16* sr = p.sdown + oc * p.sinter;
    const float* as = actT + (long)K * p.ldA;
    for (int n0 = slice * 32 + lane; n0 < ncs; n0 += MOE_KS * 32 * MOE_UD) {
      uint4 wv[MOE_UD];
#pragma unroll
      for (int u = 0; u < MOE_UD; u++) {
        const int n = n0 + MOE_KS * 32 * u;
        if (n < ncs) wv[u] = ld_stream(sr + n * 8);
      }
#pragma unroll
      for (int u = 0; u < MOE_UD; u++) {
        const int n = n0 + MOE_KS * 32 * u;
        if (n < ncs) {
          float w[8];
          unpack_bf16x8(wv[u], w);
          const float4 xa = __ldg((const float4*)(as + n * 8));
          const float4 xb = __ldg((const float4*)(as + n * 8 + 4));
          const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
          for (int e = 0; e < 8; e++) accS = fmaf(xv[e], w[e], accS);
        }
      }
    }
  }
  acc = warp_sum(acc);
  accS = warp_sum(accS);
  if (lane == 0) {
    red[warp][0] = acc;
    red[warp][1] = accS;
  }
  __syncthreads();
  if (slice == 0 && lane == 0 && o < H) {
    float a = 0.f, as = 0.f;
#pragma unroll
    for (int s = 0; s < MOE_KS; s++) {
      a += red[warp + s][0];
      as += red[warp + s][1];
    }
    float y = a;
    if (S) y = a + (p.sgw != 0 ? 1.f / (1.f + expf(-p.z[t])) : 1.f) * as;
    const long ix = (long)t * H + o;
    p.out[ix] = y;
    if (p.resid) p.sum[ix] = p.aux[ix] + y;
  }
}

// ---------------------------------------------------------------------------
// Grouped decode, for several tokens at once (moe_fused.go moeFusedRun, from
// moeGroupT tokens):
// with T tokens choosing K experts each, the token-by-token kernels above
// read an expert once per token that chose it, so at 16 lanes a layer reads
// T·K = 128 experts' weights where ~80 distinct ones would do. Here:
//
//   moe_plan (one block): routes every token (each warp one token, bit for
//     bit as moe_route_block and moe_route), then sorts the T·K choices by
//     (expert, token): plan[0] = A, the experts chosen; plan[1 + a] the
//     a-th of them (ascending), plan[1 + MS + a] where its pairs start
//     (a ≤ A; MS = min(T·K, E)); plan[2 + 2·MS + j] the pairs q = t·K + k
//     in that order.
//   moe_gateup_g: work items (chosen expert, 8 rows), each warp one row
//     whose gate and up weights it loads once for up to MOE_GTB tokens at
//     a time; act as moe_gateup writes it. The shared expert's rows are
//     items over all T tokens.
//   moe_down_g: work items (chosen expert, 8 output rows): y[q, o] =
//     D_e[o, :] · act[q] for the expert's pairs q (the shared expert's pair
//     of token t is T·K + t).
//   moe_combine_g: out[t, o] = Σ_k y[t·K + k, o] (k ascending)
//     + sigmoid(z_t) · y[T·K + t, o]; with resid, sum = aux + out.
//
// moe_gateup_g and moe_down_g run a looped grid sized on the host for the
// most items possible; blocks past the plan's items exit.
#ifndef MOE_GTB
#define MOE_GTB 4  // tokens a weight row is loaded for at once
#endif
#define MOE_PLAN_MAXQ 256  // T·K the grouped path takes (the host checks)
// moe_gateup_g's minimum resident blocks per SM: 4 (64 registers, no
// spill) against 3 at its natural 74, 16 lanes 982–988 tok/s against
// 955–975 (H100, run 33).
#ifndef MOE_GG_MINB
#define MOE_GG_MINB 4
#endif

// Token t's top K by a single warp into topIdx and topW (route.cuh, as
// moe_route): K·(E/32) steps a lane where moe_route_block's ranks take
// E²/4 over its 256 threads, so one warp routes a token of Qwen3-Next's 512
// experts in ~260 steps instead of ~2,000. Where every logit is NaN the
// choice is expert 0, as moe_route_block makes it.
__device__ __forceinline__ void moe_route_warp(const MoeP& p, int t, int lane) {
  route_topk_warp(p.logits + (long)t * p.E, p.E, p.K, p.norm, p.topIdx + (long)t * p.K, p.topW + (long)t * p.K, lane, 0);
}

extern "C" __global__ void __launch_bounds__(256) moe_plan(const MoeP p) {
  STEP_TIMER();
  __shared__ int ch[MOE_PLAN_MAXQ];     // the expert of pair q
  __shared__ int first[MOE_PLAN_MAXQ];  // 1 where q is its expert's lowest pair
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int T = p.T, K = p.K, Q = T * K, MS = min(Q, p.E);
  PDL_ENTRY();
  for (int t = warp; t < T; t += MOE_WARPS) moe_route_warp(p, t, lane);
  __syncthreads();
  for (int q = threadIdx.x; q < Q; q += blockDim.x) ch[q] = p.topIdx[q];
  __syncthreads();
  for (int q = threadIdx.x; q < Q; q += blockDim.x) {
    const int e = ch[q];
    int f = 1;
    for (int r = 0; r < q; r++) f &= ch[r] != e;
    first[q] = f;
  }
  __syncthreads();
  int* slotE = p.plan + 1;
  int* slotOff = p.plan + 1 + MS;
  int* pairs = p.plan + 2 + 2 * MS;
  for (int q = threadIdx.x; q < Q; q += blockDim.x) {
    const int e = ch[q];
    int pos = 0, slot = 0;
    for (int r = 0; r < Q; r++) {
      const int er = ch[r];
      pos += er < e || (er == e && r < q);
      slot += first[r] && er < e;
    }
    pairs[pos] = q;
    if (first[q]) {
      slotE[slot] = e;
      slotOff[slot] = pos;
    }
  }
  if (threadIdx.x == 0) {
    int A = 0;
    for (int q = 0; q < Q; q++) A += first[q];
    p.plan[0] = A;
    slotOff[A] = Q;
  }
}

// A grouped item's weight rows and pairs: item w of A·nb routed items then
// the shared expert's nb.
struct MoeItem {
  const u16* w0;  // the rows' matrix (gate, or down)
  const u16* w1;  // up (moe_gateup_g)
  int rb, n, k0;  // row block; pairs; the shared expert: k0 = 1
  const int* pairs;
};

__device__ __forceinline__ MoeItem moe_item(const MoeP& p, int w, int A, int nb, const u64* m0, const u64* m1,
                                            const u16* s0, const u16* s1) {
  MoeItem it;
  const int MS = min(p.T * p.K, p.E);
  if (w < A * nb) {
    const int a = w / nb;
    const int e = p.plan[1 + a], off = p.plan[1 + MS + a];
    it.rb = w - a * nb;
    it.w0 = (const u16*)m0[e];
    it.w1 = m1 != 0 ? (const u16*)m1[e] : 0;
    it.n = p.plan[1 + MS + a + 1] - off;
    it.pairs = p.plan + 2 + 2 * MS + off;
    it.k0 = 0;
  } else {
    it.rb = w - A * nb;
    it.w0 = s0;
    it.w1 = s1;
    it.n = p.T;
    it.pairs = 0;
    it.k0 = 1;
  }
  return it;
}

// Pair j of an item: its token, its act row (t·(K + S) + k) and its y row.
__device__ __forceinline__ void moe_pair(const MoeP& p, const MoeItem& it, int j, int& t, int& arow, int& yrow) {
  const int S = p.sgate != 0;
  if (it.pairs != 0) {
    const int q = it.pairs[j];
    t = q / p.K;
    arow = t * (p.K + S) + (q - t * p.K);
    yrow = q;
  } else {
    t = j;
    arow = t * (p.K + S) + p.K;
    yrow = p.T * p.K + t;
  }
}

// The pairs j0 … j0 + MOE_GTB − 1 of an item (moe_pair's three indices
// each; zeros past the item's end); returns how many there are.
__device__ __forceinline__ int moe_pairs(const MoeP& p, const MoeItem& it, int j0, int (&t)[MOE_GTB],
                                         int (&arow)[MOE_GTB], int (&yrow)[MOE_GTB]) {
  const int nj = min(MOE_GTB, it.n - j0);
#pragma unroll
  for (int u = 0; u < MOE_GTB; u++) {
    t[u] = arow[u] = yrow[u] = 0;
    if (u < nj) moe_pair(p, it, j0 + u, t[u], arow[u], yrow[u]);
  }
  return nj;
}

extern "C" __global__ void __launch_bounds__(256, MOE_GG_MINB) moe_gateup_g(const MoeP p) {
  STEP_TIMER();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int S = p.sgate != 0, H = p.H;
  PDL_ENTRY();
  const int A = p.plan[0];
  const int items = A * p.nbR + S * p.nbS;
  for (int w = blockIdx.x; w < items; w += gridDim.x) {
    const MoeItem it = moe_item(p, w, A, p.nbR, p.gate, p.up, p.sgate, p.sup);
    const bool shared = it.k0 != 0;
    const int inter = shared ? p.sinter : p.inter;
    const int o = it.rb * MOE_WARPS + warp;
    if (shared && it.rb == 0 && p.sgw != 0) {
      // z = x · sgw for every token: warp t's tokens, lanes strided (another
      // order of the sum than moe_gateup's, so z may differ in its last bits).
      for (int t = warp; t < p.T; t += MOE_WARPS) {
        float a = 0.f;
        for (int i = lane; i < H; i += 32) a = fmaf(p.x[(long)t * H + i], p.sgw[i], a);
        a = warp_sum(a);
        if (lane == 0) p.z[t] = a;
      }
    }
    const long ro = (long)min(o, inter - 1) * H;
    const u16 *wg = it.w0 + ro, *wu = it.w1 + ro;
    for (int j0 = 0; j0 < it.n; j0 += MOE_GTB) {
      int tt[MOE_GTB], ar[MOE_GTB], yr[MOE_GTB];
      const int nj = moe_pairs(p, it, j0, tt, ar, yr);
      float wk[MOE_GTB];
#pragma unroll
      for (int u = 0; u < MOE_GTB; u++) wk[u] = (u < nj && !shared) ? p.topW[yr[u]] : 1.f;
      float a0[MOE_GTB], a1[MOE_GTB];
#pragma unroll
      for (int u = 0; u < MOE_GTB; u++) a0[u] = a1[u] = 0.f;
      for (int i = lane * 8; i < H; i += 256) {
        float g[8], h[8];
        unpack_bf16x8(ld_stream(wg + i), g);
        unpack_bf16x8(ld_stream(wu + i), h);
#pragma unroll
        for (int u = 0; u < MOE_GTB; u++) {
          if (u < nj) {
            const float* xr = p.x + (long)tt[u] * H + i;
            const float4 xa = __ldg((const float4*)xr);
            const float4 xb = __ldg((const float4*)(xr + 4));
            const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
            for (int e = 0; e < 8; e++) {
              a0[u] = fmaf(xv[e], g[e], a0[u]);
              a1[u] = fmaf(xv[e], h[e], a1[u]);
            }
          }
        }
      }
#pragma unroll
      for (int u = 0; u < MOE_GTB; u++) {
        if (u < nj) {
          const float g0 = warp_sum(a0[u]), u0 = warp_sum(a1[u]);
          if (lane == 0 && o < inter) p.act[(long)ar[u] * p.ldA + o] = wk[u] * (silu(g0) * u0);
        }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(256) moe_down_g(const MoeP p) {
  STEP_TIMER();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int S = p.sdown != 0, H = p.H;
  const int nbD = (H + MOE_WARPS - 1) / MOE_WARPS;
  PDL_ENTRY();
  const int A = p.plan[0];
  const int items = (A + S) * nbD;
  for (int w = blockIdx.x; w < items; w += gridDim.x) {
    const MoeItem it = moe_item(p, w, A, nbD, p.down, 0, p.sdown, 0);
    const int inter = it.k0 ? p.sinter : p.inter;
    const int o = it.rb * MOE_WARPS + warp;
    const u16* wd = it.w0 + (long)min(o, H - 1) * inter;
    for (int j0 = 0; j0 < it.n; j0 += MOE_GTB) {
      int tt[MOE_GTB], ar[MOE_GTB], yr[MOE_GTB];
      const int nj = moe_pairs(p, it, j0, tt, ar, yr);
      float acc[MOE_GTB];
#pragma unroll
      for (int u = 0; u < MOE_GTB; u++) acc[u] = 0.f;
      for (int i = lane * 8; i < inter; i += 256) {
        float wv[8];
        unpack_bf16x8(ld_stream(wd + i), wv);
#pragma unroll
        for (int u = 0; u < MOE_GTB; u++) {
          if (u < nj) {
            const float* ap = p.act + (long)ar[u] * p.ldA + i;
            const float4 xa = __ldg((const float4*)ap);
            const float4 xb = __ldg((const float4*)(ap + 4));
            const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
            for (int e = 0; e < 8; e++) acc[u] = fmaf(xv[e], wv[e], acc[u]);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < MOE_GTB; u++) {
        if (u < nj) {
          const float v = warp_sum(acc[u]);
          if (lane == 0 && o < H) p.y[(long)yr[u] * H + o] = v;
        }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(256) moe_combine_g(const MoeP p) {
  STEP_TIMER();
  const int H = p.H, K = p.K, S = p.sdown != 0;
  const long ix = (long)blockIdx.x * blockDim.x + threadIdx.x;
  PDL_ENTRY();
  if (ix >= (long)p.T * H) return;
  const int t = (int)(ix / H), o = (int)(ix - (long)t * H);
  float a = 0.f;
  for (int k = 0; k < K; k++) a += p.y[((long)t * K + k) * H + o];
  float y = a;
  if (S) y = a + (p.sgw != 0 ? 1.f / (1.f + expf(-p.z[t])) : 1.f) * p.y[((long)p.T * K + t) * H + o];
  p.out[ix] = y;
  if (p.resid) p.sum[ix] = p.aux[ix] + y;
}
