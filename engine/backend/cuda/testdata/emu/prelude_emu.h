// kernels/prelude.cuh for the CPU emulation (emu.h first): the same
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
#define PDL_WAIT()
#define PDL_LAUNCH()
#define EXTERN_SMEM(T, name) T* name = (T*)emu_dyn_smem

struct alignas(16) uint4 {
  u32 x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

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
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

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

// cp.async: a plain copy; smem_addr passes the pointer through.
inline void* smem_addr(void* p) { return p; }
inline void cp_async16(void* dst, const void* src) { std::memcpy(dst, src, 16); }
inline void cp_async_commit() {}
template <int N> inline void cp_async_wait() {}

// Runs kernel() over a grid of blocks (x, y, z) of nt threads, the blocks
// in the order given by a permutation seeded by seed (0: in index order), so
// that results that must not depend on which block runs last can be
// checked.
template <class F> void emu_launch3(unsigned gx, unsigned gy, unsigned gz, unsigned nt, unsigned seed, F kernel) {
  blockDim.x = nt, blockDim.y = blockDim.z = 1;
  gridDim.x = gx, gridDim.y = gy, gridDim.z = gz;
  emu_blk.bar = std::make_unique<std::barrier<>>(nt);
  emu_blk.warps.clear();
  for (unsigned w = 0; w < nt / 32; w++) emu_blk.warps.push_back(std::make_unique<emu_warp>());
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
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < nt; t++)
      ts.emplace_back([=] {
        threadIdx.x = t;
        blockIdx.x = b % gx;
        blockIdx.y = (b / gx) % gy;
        blockIdx.z = b / (gx * gy);
        kernel();
      });
    for (auto& t : ts) t.join();
  }
}
