// Kernels of the hybrid models' linear-attention (Gated DeltaNet) layers and
// of their gated full attention (backend.Recurrent, engine/backend/cuda
// recurrent.go). Activations are f32 row-major.
//
// A batch is split into runs, one per sequence (its tokens are contiguous):
// the backend stages, per forward, runs[4·r] = {lo, hi, slot, fresh} (token
// range, state slot, 1 when the run starts at position 0 and so from zero
// state) and, after the nruns runs, each token's run index. Grids are one-
// dimensional (the CPU emulation of the tests runs them so).

struct RunInfo {
  int lo, hi, slot, fresh;
};
__device__ __forceinline__ RunInfo run_info(const int* runs, int r) {
  return RunInfo{runs[4 * r], runs[4 * r + 1], runs[4 * r + 2], runs[4 * r + 3]};
}

// The K-1 conv inputs before a run's first token come from the slot's conv
// state (rows slot·S … slot·S+S-1 of C values, oldest first), or are zero
// for a fresh run. in(u) is the input u tokens after the run's start.
__device__ __forceinline__ float conv_in(const float* x, const float* state, const RunInfo& ri, int u, int c, int C, int S) {
  if (u >= 0) return x[(long)(ri.lo + u) * C + c];
  if (ri.fresh) return 0.f;
  return state[((long)ri.slot * S + S + u) * C + c];
}

// keep_last leaves in channel c of the run's conv state its last S inputs
// after n tokens, oldest first, reading all of them before writing any (so
// the old rows it still needs are intact); S ≤ 16.
__device__ __forceinline__ void keep_last(float* state, const float* x, const RunInfo& ri, int n, int c, int C, int S) {
  float keep[16];
#pragma unroll
  for (int i = 0; i < 16; i++)
    if (i < S) keep[i] = conv_in(x, state, ri, n - S + i, c, C, S);
#pragma unroll
  for (int i = 0; i < 16; i++)
    if (i < S) state[((long)ri.slot * S + i) * C + c] = keep[i];
}

// out[t, c] = silu(Σ_j w[c, j] · in(t - S + j, c)), S = K - 1. Grid:
// T · ceil(C / 256) blocks of 256 threads; w is f32 [C, K]. With own (every
// run one token: decode) the thread also moves its (run, channel) state on
// by the token, after reading all of it, and conv1d_state is not needed.
extern "C" __global__ void conv1d_silu(float* out, const float* x, const float* w, float* state, const int* runs,
                                       int nruns, int T, int C, int K, int own) {
  STEP_TIMER();
  PDL_ENTRY();
  const int per = (C + 255) / 256;
  const int t = blockIdx.x / per;
  const int c = (blockIdx.x % per) * 256 + threadIdx.x;
  if (t >= T || c >= C) return;
  const RunInfo ri = run_info(runs, runs[4 * nruns + t]);
  const int S = K - 1, u = t - ri.lo;
  float acc = 0.f;
  for (int j = 0; j < K; j++) acc += w[(long)c * K + j] * conv_in(x, state, ri, u - S + j, c, C, S);
  out[(long)t * C + c] = silu(acc);
  if (own) keep_last(state, x, ri, 1, c, C, S);
}

// The conv state after each run (keep_last), once conv1d_silu has read the
// old one. Grid: nruns · ceil(C / 256) blocks of 256.
extern "C" __global__ void conv1d_state(float* state, const float* x, const int* runs, int nruns, int C, int K) {
  STEP_TIMER();
  PDL_ENTRY();
  const int per = (C + 255) / 256;
  const int r = blockIdx.x / per;
  const int c = (blockIdx.x % per) * 256 + threadIdx.x;
  if (r >= nruns || c >= C) return;
  const RunInfo ri = run_info(runs, r);
  keep_last(state, x, ri, ri.hi - ri.lo, c, C, K - 1);
}

// The gated delta rule, token by token, for one (run, value head, block of
// rows of the state). The state of a value head is held transposed (VD rows
// of KD: row y is column y of transformers' KD×VD matrix), so each row
// evolves on its own given the token's q, k, v[y], decay and beta:
//   m = k·row, d = β(v[y] − e·m), row ← e·row + d·k, o[y] = q·row
// with k and q L2-normalised (q also by KD^-½), e = exp(−exp(A_log) ·
// softplus(a + dt_bias)), β = sigmoid(b), as the CPU backend's recurrent
// form. TPR threads share a row, each holding CPT = KD / TPR of its values
// in registers (and the same columns of q and k, whose norms the TPR threads
// of a row complete among themselves), so a token needs no block-wide
// synchronisation; the next token's inputs are requested before the current
// one is computed.
template <int KD, int NT = 128> struct GdnShape {
  static constexpr int TPR = KD > 32 ? KD / 32 : 1; // a power of two (the host checks KD)
  static constexpr int CPT = KD / TPR;              // ≤ 32, a multiple of 4 (the state's float4 rows)
  static constexpr int RB = NT / TPR;               // rows per block of NT threads
};

struct GdnP {
  float* out;          // [T, VH·VD]
  const float* qkv;    // [T, 2·KH·KD + VH·VD]: q heads, k heads, v heads (the conv output)
  const float* a;      // [T, VH]
  const float* b;      // [T, VH]
  const float* a_log;  // [VH]
  const float* dt_bias;// [VH]
  float* state;        // [slots·VH·VD, KD]
  const int* runs;
  int nruns, kh, vh, vd;
};

template <int KD> struct GdnIn {
  float q[GdnShape<KD>::CPT], k[GdnShape<KD>::CPT];
  float v, a, b;
};

template <int KD>
__device__ __forceinline__ void gdn_load(GdnIn<KD>& in, const GdnP& p, long t, int kh, int h, int y, int part, bool active) {
  constexpr int CPT = GdnShape<KD>::CPT;
  const int kd = p.kh * KD, C = 2 * kd + p.vh * p.vd;
  const float* row = p.qkv + t * C;
  // Scalar loads: a row of C floats need not start 16-byte aligned.
  const float* qr = row + kh * KD + part * CPT;
  const float* kr = row + kd + kh * KD + part * CPT;
#pragma unroll
  for (int j = 0; j < CPT; j++) in.q[j] = qr[j], in.k[j] = kr[j];
  in.v = active ? row[2 * kd + h * p.vd + y] : 0.f;
  in.a = p.a[t * p.vh + h];
  in.b = p.b[t * p.vh + h];
}

// Sum over the TPR consecutive lanes that share a row.
template <int TPR> __device__ __forceinline__ float row_sum(float v) {
#pragma unroll
  for (int o = 1; o < TPR; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int KD, int NT> __device__ __forceinline__ void gdn_recurrent_impl(const GdnP& p) {
  STEP_TIMER();
  PDL_ENTRY();
  using Sh = GdnShape<KD, NT>;
  constexpr int TPR = Sh::TPR, CPT = Sh::CPT, RB = Sh::RB;
  const int rblocks = (p.vd + RB - 1) / RB;
  const int rb = blockIdx.x % rblocks, h = (blockIdx.x / rblocks) % p.vh, r = blockIdx.x / (rblocks * p.vh);
  if (r >= p.nruns) return;
  const RunInfo ri = run_info(p.runs, r);
  const int rowInBlock = threadIdx.x / TPR, part = threadIdx.x % TPR;
  const int y = rb * RB + rowInBlock;
  const bool active = y < p.vd;
  const int kh = h / (p.vh / p.kh);
  float* st = p.state + (((long)ri.slot * p.vh + h) * p.vd + (active ? y : 0)) * KD + part * CPT;
  float s[CPT];
  if (ri.fresh || !active) {
#pragma unroll
    for (int j = 0; j < CPT; j++) s[j] = 0.f;
  } else {
    const float4* s4 = (const float4*)st;
#pragma unroll
    for (int j = 0; j < CPT / 4; j++) {
      const float4 v = s4[j];
      s[4 * j] = v.x, s[4 * j + 1] = v.y, s[4 * j + 2] = v.z, s[4 * j + 3] = v.w;
    }
  }
  const float decay = expf(p.a_log[h]), dtb = p.dt_bias[h];
  const float scale = 1.f / sqrtf((float)KD);
  const int vdAll = p.vh * p.vd;
  GdnIn<KD> cur, nxt;
  gdn_load<KD>(cur, p, ri.lo, kh, h, y, part, active);
  for (int t = ri.lo; t < ri.hi; t++) {
    if (t + 1 < ri.hi) gdn_load<KD>(nxt, p, t + 1, kh, h, y, part, active);
    float sq = 0.f, sk = 0.f;
#pragma unroll
    for (int j = 0; j < CPT; j++) sq += cur.q[j] * cur.q[j], sk += cur.k[j] * cur.k[j];
    sq = row_sum<TPR>(sq), sk = row_sum<TPR>(sk);
    const float iq = scale / sqrtf(sq + 1e-6f), ik = 1.f / sqrtf(sk + 1e-6f);
    const float sa = cur.a + dtb;
    const float sp = sa > 20.f ? sa : log1pf(expf(sa));
    const float e = expf(-decay * sp);
    const float beta = 1.f / (1.f + expf(-cur.b));
    float m = 0.f;
#pragma unroll
    for (int j = 0; j < CPT; j++) m += s[j] * (cur.k[j] * ik);
    m = row_sum<TPR>(m);
    const float d = (cur.v - e * m) * beta;
    float o = 0.f;
#pragma unroll
    for (int j = 0; j < CPT; j++) {
      s[j] = e * s[j] + d * (cur.k[j] * ik);
      o += s[j] * (cur.q[j] * iq);
    }
    o = row_sum<TPR>(o);
    if (active && part == 0) p.out[(long)t * vdAll + h * p.vd + y] = o;
    if (t + 1 < ri.hi) cur = nxt;
  }
  if (active) {
    float4* s4 = (float4*)st;
#pragma unroll
    for (int j = 0; j < CPT / 4; j++) s4[j] = make_float4(s[4 * j], s[4 * j + 1], s[4 * j + 2], s[4 * j + 3]);
  }
}

// Blocks of 128 threads, and of 32 (gdn_recurrent_k<KD>_w: a quarter of the
// rows each, four times the blocks, for prefills, whose tokens follow one
// another in each block: more blocks an SM hide each other's latency).
#define GDN_KERNEL(KD)                                                                                                 \
  extern "C" __global__ void __launch_bounds__(128) gdn_recurrent_k##KD(GdnP p) { gdn_recurrent_impl<KD, 128>(p); } \
  extern "C" __global__ void __launch_bounds__(32) gdn_recurrent_k##KD##_w(GdnP p) { gdn_recurrent_impl<KD, 32>(p); }
GDN_KERNEL(8)
GDN_KERNEL(16)
GDN_KERNEL(32)
GDN_KERNEL(64)
GDN_KERNEL(128)
GDN_KERNEL(256)

// out = rmsnorm(x) · w · silu(z), one warp per row of n (out may be x: each
// lane rewrites only what it read).
extern "C" __global__ void rmsnorm_gated(float* out, const float* x, const float* z, const float* w, int rows, int n, float eps) {
  STEP_TIMER();
  PDL_ENTRY();
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* xr = x + (long)row * n;
  const float* zr = z + (long)row * n;
  float* orow = out + (long)row * n;
  float ss = 0.f;
  for (int i = lane; i < n; i += 32) ss += xr[i] * xr[i];
  ss = warp_sum(ss);
  const float inv = 1.f / sqrtf(ss / (float)n + eps);
  for (int i = lane; i < n; i += 32) orow[i] = xr[i] * inv * w[i] * silu(zr[i]);
}

// out = x · sigmoid(g), element-wise (out may be x).
extern "C" __global__ void mul_sigmoid(float* out, const float* x, const float* g, long n) {
  STEP_TIMER();
  PDL_ENTRY();
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    out[i] = x[i] / (1.f + expf(-g[i]));
}

// out[r, g·width + j] = x[r, g·(cols/groups) + off + j]: one block per row.
extern "C" __global__ void slice_cols(float* out, const float* x, int cols, int groups, int off, int width) {
  STEP_TIMER();
  PDL_ENTRY();
  const long r = blockIdx.x;
  const int blk = cols / groups, n = groups * width;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int g = i / width, j = i - g * width;
    out[r * n + i] = x[r * cols + g * blk + off + j];
  }
}
