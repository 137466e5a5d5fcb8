// Element-wise and row-wise kernels. Activations are f32 row-major; index
// arrays (token ids, positions, block tables) live in the backend's metadata
// arena on the device so that captured graphs read each step's values.

// out[t, :] = table[ids[t], :] as f32. Grid: one block per token.
template <int DT>
__device__ __forceinline__ void embed_impl(float* out, const void* table, const int* ids, int cols) {
  STEP_TIMER();
  PDL_ENTRY();
  const int t = blockIdx.x;
  const long row = (long)ids[t] * cols;
  float* o = out + (long)t * cols;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) o[i] = wget<DT>(table, row + i);
}
extern "C" __global__ void embed_f32(float* out, const void* table, const int* ids, int cols) { embed_impl<DT_F32>(out, table, ids, cols); }
extern "C" __global__ void embed_f16(float* out, const void* table, const int* ids, int cols) { embed_impl<DT_F16>(out, table, ids, cols); }
extern "C" __global__ void embed_bf16(float* out, const void* table, const int* ids, int cols) { embed_impl<DT_BF16>(out, table, ids, cols); }

// RMSNorm with one warp per row (blockDim = 32 × rows per block): many
// short rows (QK-norm over heads, prefill). In place (out == x) is allowed:
// every element is read and written by the same lane.
extern "C" __global__ void rmsnorm_warp(float* out, const float* x, const float* w, int rows, int n, float eps) {
  STEP_TIMER();
  PDL_ENTRY();
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const float* xr = x + (long)row * n;
  float* orow = out + (long)row * n;
  const int lane = threadIdx.x;
  float ss = 0.f;
  if ((n & 3) == 0) {
    const float4* x4 = (const float4*)xr;
    for (int i = lane; i < (n >> 2); i += 32) {
      float4 v = x4[i];
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    ss = warp_sum(ss);
    const float inv = 1.f / sqrtf(ss / (float)n + eps);
    const float4* w4 = (const float4*)w;
    float4* o4 = (float4*)orow;
    for (int i = lane; i < (n >> 2); i += 32) {
      float4 v = x4[i], g = w4[i];
      o4[i] = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
    }
  } else {
    for (int i = lane; i < n; i += 32) ss += xr[i] * xr[i];
    ss = warp_sum(ss);
    const float inv = 1.f / sqrtf(ss / (float)n + eps);
    for (int i = lane; i < n; i += 32) orow[i] = xr[i] * inv * w[i];
  }
}

// RMSNorm with one block per row: few long rows (decode). blockDim ≤ 1024,
// a multiple of 32.
extern "C" __global__ void rmsnorm_block(float* out, const float* x, const float* w, int n, float eps) {
  STEP_TIMER();
  PDL_ENTRY();
  __shared__ float red[32];
  const int row = blockIdx.x;
  const float* xr = x + (long)row * n;
  float* orow = out + (long)row * n;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
  const bool vec = (n & 3) == 0;
  float ss = 0.f;
  if (vec) {
    const float4* x4 = (const float4*)xr;
    for (int i = tid; i < (n >> 2); i += blockDim.x) {
      float4 v = x4[i];
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  } else {
    for (int i = tid; i < n; i += blockDim.x) ss += xr[i] * xr[i];
  }
  ss = warp_sum(ss);
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    float v = lane < nw ? red[lane] : 0.f;
    v = warp_sum(v);
    if (lane == 0) red[0] = v;
  }
  __syncthreads();
  const float inv = 1.f / sqrtf(red[0] / (float)n + eps);
  if (vec) {
    const float4* x4 = (const float4*)xr;
    const float4* w4 = (const float4*)w;
    float4* o4 = (float4*)orow;
    for (int i = tid; i < (n >> 2); i += blockDim.x) {
      float4 v = x4[i], g = w4[i];
      o4[i] = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
    }
  } else {
    for (int i = tid; i < n; i += blockDim.x) orow[i] = xr[i] * inv * w[i];
  }
}

// Residual add fused with the RMSNorm that follows it: sum = a + b (written
// back, sum may alias a), out = rmsnorm(sum)·w. One block per row. With BF
// (n % 4 == 0 only) out is also written rounded to bf16 into outb, as
// to_bf16 would round it, for the cuBLASLt products that read it next
// (matmul.go shadowBF16): a prefill layer then converts its normalised
// activations in no kernel of their own.
template <bool BF>
__device__ __forceinline__ void add_rmsnorm_impl(float* sum, const float* a, const float* b, float* out, uint2* outb,
                                                 const float* w, int n, float eps) {
  STEP_TIMER();
  PDL_ENTRY();
  __shared__ float red[32];
  const long base = (long)blockIdx.x * n;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
  float ss = 0.f;
  if ((n & 3) == 0) {
    const float4* a4 = (const float4*)(a + base);
    const float4* b4 = (const float4*)(b + base);
    float4* s4 = (float4*)(sum + base);
    for (int i = tid; i < (n >> 2); i += blockDim.x) {
      const float4 x = a4[i], y = b4[i];
      const float4 v = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
      s4[i] = v;
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  } else {
    for (int i = tid; i < n; i += blockDim.x) {
      const float v = a[base + i] + b[base + i];
      sum[base + i] = v;
      ss += v * v;
    }
  }
  ss = warp_sum(ss);
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    float v = lane < nw ? red[lane] : 0.f;
    v = warp_sum(v);
    if (lane == 0) red[0] = v;
  }
  __syncthreads();
  const float inv = 1.f / sqrtf(red[0] / (float)n + eps);
  // Each thread reads back only what it wrote above.
  if ((n & 3) == 0) {
    const float4* s4 = (const float4*)(sum + base);
    const float4* w4 = (const float4*)w;
    float4* o4 = (float4*)(out + base);
    for (int i = tid; i < (n >> 2); i += blockDim.x) {
      const float4 v = s4[i], g = w4[i];
      const float4 o = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
      o4[i] = o;
      if (BF) outb[(base >> 2) + i] = make_uint2(pack_bf16(o.x, o.y), pack_bf16(o.z, o.w));
    }
  } else {
    for (int i = tid; i < n; i += blockDim.x) out[base + i] = sum[base + i] * inv * w[i];
  }
}

extern "C" __global__ void add_rmsnorm(float* sum, const float* a, const float* b, float* out, const float* w, int n, float eps) {
  add_rmsnorm_impl<false>(sum, a, b, out, nullptr, w, n, eps);
}
extern "C" __global__ void add_rmsnorm_bf(float* sum, const float* a, const float* b, float* out, uint2* outb, const float* w, int n, float eps) {
  add_rmsnorm_impl<true>(sum, a, b, out, outb, w, n, eps);
}

// out = a + b over n floats (n4 = n / 4 float4s when vec).
extern "C" __global__ void add_f32(float* out, const float* a, const float* b, long n) {
  STEP_TIMER();
  PDL_ENTRY();
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) out[i] = a[i] + b[i];
}
extern "C" __global__ void add_f32x4(float4* out, const float4* a, const float4* b, long n4) {
  STEP_TIMER();
  PDL_ENTRY();
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
    float4 x = a[i], y = b[i];
    out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

// out = silu(gate) · up over n floats.
extern "C" __global__ void swiglu_f32(float* out, const float* g, const float* u, long n) {
  STEP_TIMER();
  PDL_ENTRY();
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) out[i] = silu(g[i]) * u[i];
}
extern "C" __global__ void swiglu_f32x4(float4* out, const float4* g, const float4* u, long n4) {
  STEP_TIMER();
  PDL_ENTRY();
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
    float4 a = g[i], b = u[i];
    out[i] = make_float4(silu(a.x) * b.x, silu(a.y) * b.y, silu(a.z) * b.z, silu(a.w) * b.w);
  }
}

// swiglu_f32x4 that also writes out rounded to bf16 into outb (see
// add_rmsnorm_bf): the down projection's input, converted where it is made.
extern "C" __global__ void swiglu_f32x4_bf(float4* out, uint2* outb, const float4* g, const float4* u, long n4) {
  STEP_TIMER();
  PDL_ENTRY();
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
    float4 a = g[i], b = u[i];
    const float4 o = make_float4(silu(a.x) * b.x, silu(a.y) * b.y, silu(a.z) * b.z, silu(a.w) * b.w);
    out[i] = o;
    outb[i] = make_uint2(pack_bf16(o.x, o.y), pack_bf16(o.z, o.w));
  }
}

// Rotate-half RoPE in place on x [T, heads·hd] at positions pos[t], with
// cos/sin tables [maxPos, half] that already include the attention scaling.
// Dimensions past 2·half of each head are left alone (partial rotary).
extern "C" __global__ void rope_f32(float* x, const int* pos, const float* cosT, const float* sinT, int cols, int heads, int half) {
  STEP_TIMER();
  PDL_ENTRY();
  const int t = blockIdx.x;
  const int hd = cols / heads;
  const long p = pos[t];
  float* row = x + (long)t * cols;
  const float* c = cosT + p * half;
  const float* s = sinT + p * half;
  for (int j = threadIdx.x; j < heads * half; j += blockDim.x) {
    const int h = j / half, i = j - h * half;
    float* v = row + h * hd;
    const float x1 = v[i], x2 = v[i + half];
    v[i] = x1 * c[i] - x2 * s[i];
    v[i + half] = x2 * c[i] + x1 * s[i];
  }
}

// out[i, :] = x[idx[i], :]. Grid: one block per output row.
extern "C" __global__ void gather_f32(float* out, const float* x, const int* idx, int cols) {
  STEP_TIMER();
  PDL_ENTRY();
  const long src = (long)idx[blockIdx.x] * cols;
  float* o = out + (long)blockIdx.x * cols;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) o[i] = x[src + i];
}

// f32 → bf16 (round to nearest even) over n elements, two per thread.
extern "C" __global__ void to_bf16(u32* out, const float2* x, long n2) {
  STEP_TIMER();
  PDL_ENTRY();
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n2; i += (long)gridDim.x * blockDim.x) {
    float2 v = x[i];
    out[i] = pack_bf16(v.x, v.y);
  }
}

// Convert a weight of any dtype to f32 (norm scales are kept as f32).
extern "C" __global__ void bf16_to_f32_k(float* out, const u16* x, long n) {
  STEP_TIMER();
  PDL_ENTRY();
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) out[i] = bf16_to_f32(x[i]);
}
extern "C" __global__ void f16_to_f32_k(float* out, const u16* x, long n) {
  STEP_TIMER();
  PDL_ENTRY();
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) out[i] = f16_to_f32(x[i]);
}

// Stores token t's k and v rows ([T, kvh·hd] f32) as DT (bf16: kv_store;
// f16, saturated to ±65504: kv_store_f16) into the paged cache, laid out
// [block][kvHead][64 slots][hd]. tokTab[t] is the offset of t's sequence's
// block table in tabs.
template <int DT>
__device__ __forceinline__ void kv_store_impl(u16* kc, u16* vc, const float* k, const float* v, const int* tokTab,
                                              const int* pos, const int* tabs, int kvh, int hd) {
  STEP_TIMER();
  PDL_ENTRY();
  const int t = blockIdx.x;
  const int p = pos[t];
  const long blk = tabs[tokTab[t] + (p >> 6)];
  const int slot = p & 63;
  const int stride = kvh * hd;
  for (int j = threadIdx.x; j < stride; j += blockDim.x) {
    const int h = j / hd, d = j - h * hd;
    const long dst = ((blk * kvh + h) * 64 + slot) * hd + d;
    kc[dst] = kv_enc<DT>(k[(long)t * stride + j]);
    vc[dst] = kv_enc<DT>(v[(long)t * stride + j]);
  }
}
#define KV_STORE_ARGS \
  u16 *kc, u16 *vc, const float *k, const float *v, const int *tokTab, const int *pos, const int *tabs, int kvh, int hd
extern "C" __global__ void kv_store(KV_STORE_ARGS) { kv_store_impl<DT_BF16>(kc, vc, k, v, tokTab, pos, tabs, kvh, hd); }
extern "C" __global__ void kv_store_f16(KV_STORE_ARGS) { kv_store_impl<DT_F16>(kc, vc, k, v, tokTab, pos, tabs, kvh, hd); }

// out[t, :] += sigmoid(z[t]) · y[t, :] (a gated shared expert).
extern "C" __global__ void sigmoid_gated_add(float* out, const float* y, const float* z, int cols) {
  STEP_TIMER();
  PDL_ENTRY();
  const int t = blockIdx.x;
  const float g = 1.f / (1.f + expf(-z[t]));
  for (int i = threadIdx.x; i < cols; i += blockDim.x) out[(long)t * cols + i] += g * y[(long)t * cols + i];
}

// Fills n 16-bit floats (DT: bf16 or f16) with values of a hash of (seed,
// index), uniform in [-scale, scale): random inputs for tests and benchmarks
// without host copies.
template <int DT> __device__ __forceinline__ void fill_random_impl(u16* out, long n, u32 seed, float scale) {
  STEP_TIMER();
  PDL_ENTRY();
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    u32 h = (u32)i * 0x9e3779b9u ^ seed;
    h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
    out[i] = kv_enc<DT>(((float)(h >> 8) * (1.f / 16777216.f) * 2.f - 1.f) * scale);
  }
}
extern "C" __global__ void fill_random_bf16(u16* out, long n, u32 seed, float scale) { fill_random_impl<DT_BF16>(out, n, seed, scale); }
extern "C" __global__ void fill_random_f16(u16* out, long n, u32 seed, float scale) { fill_random_impl<DT_F16>(out, n, seed, scale); }
