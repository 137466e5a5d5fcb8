// kernels/prelude.cuh for the CPU emulation (emu.h first, which also
// stands in for the PDL and STEP_TIMING macros): the same
// helpers in plain C++, for the modules other than sample.cu (which needs
// none of them). Vector types are plain aligned structs; cp.async copies at
// once (cp_async_wait is a no-op), so a kernel that reads a stage before
// waiting for it is not caught here; __threadfence is a full fence and
// atomics are sequentially consistent, as strong as the GPU's or stronger.
#include <atomic>

#define DT_F32 0
#define DT_F16 1
#define DT_BF16 2
#define __align__(n) __attribute__((aligned(n)))
#define EXTERN_SMEM(T, name) T* name = (T*)emu_dyn_smem

struct alignas(16) uint4 {
  u32 x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline uint4 make_uint4(u32 x, u32 y, u32 z, u32 w) { return uint4{x, y, z, w}; }

// Dynamic shared memory of the block being run (blocks run one at a time).
alignas(16) inline unsigned char emu_dyn_smem[256 << 10];

inline float bf16_to_f32(u32 h) { return __uint_as_float(h << 16); }
inline float f16_to_f32(u16 h) {
  _Float16 f;
  std::memcpy(&f, &h, 2);
  return (float)f;
}
inline u16 f32_to_f16(float f) {
  f = fabsf(f) > 65504.f ? copysignf(65504.f, f) : f;  // saturating, as prelude.cuh
  _Float16 h = (_Float16)f;
  u16 r;
  std::memcpy(&r, &h, 2);
  return r;
}
inline u16 f32_to_bf16(float f) {
  u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16)(u >> 16);
}
inline u32 pack_bf16(float lo, float hi) { return (u32)f32_to_bf16(lo) | ((u32)f32_to_bf16(hi) << 16); }
inline u32 pack_f16(float lo, float hi) { return (u32)f32_to_f16(lo) | ((u32)f32_to_f16(hi) << 16); }
template <int KT> inline u32 pack_kt(float lo, float hi) { return KT == DT_F16 ? pack_f16(lo, hi) : pack_bf16(lo, hi); }

template <int DT> inline float wget(const void* p, long i);
template <> inline float wget<DT_F32>(const void* p, long i) { return ((const float*)p)[i]; }
template <> inline float wget<DT_F16>(const void* p, long i) { return f16_to_f32(((const u16*)p)[i]); }
template <> inline float wget<DT_BF16>(const void* p, long i) { return bf16_to_f32(((const u16*)p)[i]); }

inline void unpack_bf16x8(uint4 u, float* f) {
  f[0] = __uint_as_float(u.x << 16); f[1] = __uint_as_float(u.x & 0xffff0000u);
  f[2] = __uint_as_float(u.y << 16); f[3] = __uint_as_float(u.y & 0xffff0000u);
  f[4] = __uint_as_float(u.z << 16); f[5] = __uint_as_float(u.z & 0xffff0000u);
  f[6] = __uint_as_float(u.w << 16); f[7] = __uint_as_float(u.w & 0xffff0000u);
}
inline void unpack_f16x8(uint4 u, float* f) {
  const u32 w[4] = {u.x, u.y, u.z, u.w};
  for (int i = 0; i < 4; i++) {
    f[2 * i] = f16_to_f32((u16)(w[i] & 0xffffu));
    f[2 * i + 1] = f16_to_f32((u16)(w[i] >> 16));
  }
}
template <int DT> inline u16 kv_enc(float f);
template <> inline u16 kv_enc<DT_BF16>(float f) { return f32_to_bf16(f); }
template <> inline u16 kv_enc<DT_F16>(float f) { return f32_to_f16(f); }
template <int DT> inline void kv_unpack8(uint4 u, float* f);
template <> inline void kv_unpack8<DT_BF16>(uint4 u, float* f) { unpack_bf16x8(u, f); }
template <> inline void kv_unpack8<DT_F16>(uint4 u, float* f) { unpack_f16x8(u, f); }
inline uint4 ld_stream(const void* p) {
  uint4 r;
  std::memcpy(&r, p, 16);
  return r;
}
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *(const volatile T*)p; }
inline float2 __ldcg(const float2* p) {
  const volatile float* f = (const volatile float*)p;
  return float2{f[0], f[1]};
}
inline float4 __ldcg(const float4* p) {
  const volatile float* f = (const volatile float*)p;
  return float4{f[0], f[1], f[2], f[3]};
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline u64 global_ns() { return 1; }
inline u32 sm_id() { return 0; }
// KEEP_META's L2 policy has nothing to emulate: a plain load.
#define META(p) (*(p))
#define META_ROPE(p) (*(p))

template <int DT> inline void load8(const void* w, long i, float* f);
template <> inline void load8<DT_BF16>(const void* w, long i, float* f) { unpack_bf16x8(ld_stream((const u16*)w + i), f); }
template <> inline void load8<DT_F16>(const void* w, long i, float* f) { unpack_f16x8(ld_stream((const u16*)w + i), f); }
template <> inline void load8<DT_F32>(const void* w, long i, float* f) { std::memcpy(f, (const float*)w + i, 32); }

inline float silu(float x) { return x / (1.f + expf(-x)); }
inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Clusters: blocks run one at a time here, so no kernel path that merges
// through a cluster's shared memory can run (the tests never ask for one).
inline void cluster_arrive() { std::abort(); }
inline void cluster_wait() { std::abort(); }
inline void st_cluster_f32(const void*, u32, float) { std::abort(); }

// cp.async: a plain copy; smem_addr passes the pointer through.
inline void prefetch_l2(const void*) {}
typedef unsigned char* saddr_t;  // byte offsets add to it, as to the GPU's u32
inline saddr_t smem_addr(const void* p) { return (saddr_t)p; }
inline void cp_async16(void* dst, const void* src) { std::memcpy(dst, src, 16); }
// Bulk copies land at once; the kernels read a stage only after a block
// barrier that follows its copy, so the mbarrier waits need do nothing.
inline u32 dyn_smem_bytes() { return sizeof emu_dyn_smem; }
inline void mbar_init(saddr_t, u32) {}
inline void mbar_fence_init() {}
inline void mbar_expect_tx(saddr_t, u32) {}
inline void tma_load_1d(saddr_t dst, const void* src, u32 bytes, saddr_t) { std::memcpy(dst, src, bytes); }
inline void mbar_wait(saddr_t, u32) {}
inline void cp_async_commit() {}
template <int N> inline void cp_async_wait() {}

// Tensor-core instructions, warp-collective like the shuffles: every lane
// posts its operands in the warp's slots (two 32-bit words a round), reads
// the others' after the barrier. ldmatrix .x4 (lanes 8i…8i+7 address the
// rows of matrix i; lane l gets row l/4, elements 2(l%4), 2(l%4)+1, or with
// trans column l/4, rows 2(l%4), 2(l%4)+1) and mma.sync m16n8k16 row.col
// with f32 accumulation (in k order, each product and sum rounded: the
// tensor cores' own order is the GPU tests' to allow for).
inline void emu_exchange(u32 lo, u32 hi, u32 (&all)[32][2]) {
  emu_warp& w = emu_my_warp();
  const int lane = threadIdx.x & 31;
  w.slot[lane] = (u64)lo | ((u64)hi << 32);
  w.bar.arrive_and_wait();
  for (int j = 0; j < 32; j++) all[j][0] = (u32)w.slot[j], all[j][1] = (u32)(w.slot[j] >> 32);
  w.bar.arrive_and_wait();
}
inline void emu_ldsm(const void* addr, u32& r0, u32& r1, u32& r2, u32& r3, bool trans) {
  emu_warp& w = emu_my_warp();
  const int lane = threadIdx.x & 31;
  w.slot[lane] = (u64)(uintptr_t)addr;
  w.bar.arrive_and_wait();
  u32 r[4];
  for (int i = 0; i < 4; i++) {
    auto el = [&](int row, int col) -> u32 { return ((const u16*)(uintptr_t)w.slot[i * 8 + row])[col]; };
    const int a = lane / 4, b = 2 * (lane % 4);
    r[i] = trans ? (el(b, a) | el(b + 1, a) << 16) : (el(a, b) | el(a, b + 1) << 16);
  }
  w.bar.arrive_and_wait();
  r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
inline void ldsm_x4(const void* addr, u32& r0, u32& r1, u32& r2, u32& r3) { emu_ldsm(addr, r0, r1, r2, r3, false); }
inline void ldsm_x4_t(const void* addr, u32& r0, u32& r1, u32& r2, u32& r3) { emu_ldsm(addr, r0, r1, r2, r3, true); }
// movmatrix .trans: lane (r, c/2) gets M[2c'][r], M[2c'+1][r] where M[i][j]
// is half j%2 of lane i·4 + j/2's word.
inline u32 movm_t(u32 a) {
  u32 all[32][2];
  emu_exchange(a, 0, all);
  const int lane = threadIdx.x & 31, r = lane / 4, c = 2 * (lane % 4);
  auto el = [&](int i, int j) -> u32 { return (all[i * 4 + j / 2][0] >> (16 * (j % 2))) & 0xffffu; };
  return el(c, r) | el(c + 1, r) << 16;
}
template <int KT> inline float emu_half(u32 w, int hi) {
  const u16 h = (u16)(hi ? w >> 16 : w & 0xffffu);
  return KT == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}
template <int KT> inline void mma16816(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  u32 A01[32][2], A23[32][2], B[32][2];
  emu_exchange(a0, a1, A01);
  emu_exchange(a2, a3, A23);
  emu_exchange(b0, b1, B);
  // A(r, k): lane (r%8)·4 + (k%8)/2; a0 rows < 8, k < 8; a1 rows ≥ 8; a2, a3 the same for k ≥ 8.
  auto A = [&](int r, int k) {
    const int l = (r % 8) * 4 + (k % 8) / 2;
    const u32 word = k < 8 ? A01[l][r >= 8] : A23[l][r >= 8];
    return emu_half<KT>(word, k & 1);
  };
  // B(k, n): lane n·4 + (k%8)/2; b0 for k < 8, b1 for k ≥ 8.
  auto Bv = [&](int k, int n) { return emu_half<KT>(B[n * 4 + (k % 8) / 2][k >= 8], k & 1); };
  const int lane = threadIdx.x & 31, gq = lane / 4, tq = lane % 4;
  for (int e = 0; e < 4; e++) {
    const int r = gq + 8 * (e >> 1), n = 2 * tq + (e & 1);
    float acc = d[e];
    for (int k = 0; k < 16; k++) acc += A(r, k) * Bv(k, n);
    d[e] = acc;
  }
}

// Runs kernel() over a grid of blocks (x, y, z) of nt threads, the blocks
// in the order given by a permutation seeded by seed (0: in index order), so
// that results that must not depend on which block runs last can be
// checked.
template <class F> void emu_launch3(unsigned gx, unsigned gy, unsigned gz, unsigned nt, unsigned seed, F kernel) {
  blockDim.x = nt, blockDim.y = blockDim.z = 1;
  gridDim.x = gx, gridDim.y = gy, gridDim.z = gz;
  emu_block_setup(nt);
  const unsigned n = gx * gy * gz;
  std::vector<unsigned> order(n);
  for (unsigned i = 0; i < n; i++) order[i] = i;
  if (seed != 0) {
    u64 st = seed;
    for (unsigned i = n; i > 1; i--) {
      st = st * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(order[i - 1], order[(st >> 33) % i]);
    }
  }
  for (unsigned b : order) {
    blockIdx.x = b % gx;
    blockIdx.y = (b / gx) % gy;
    blockIdx.z = b / (gx * gy);
    emu_run_block(nt, emu_call<F>, &kernel);
  }
}

// The attention kernels' shared device code, and the MoE routing, as the
// GPU compiles them.
#include "flash.cuh"
#include "route.cuh"
