// A CPU emulation of the CUDA subset kernels/sample.cu uses, for the tests
// (sample_emu_test.go): a block's threads are OS threads, __syncthreads a
// barrier, __shared__ variables statics shared by the block's threads
// (blocks run one after the other), warp intrinsics an exchange through
// per-warp slots between two warp barriers (every lane must call them,
// as the kernels already require with full masks), atomics GCC builtins.
// Compiled with -ffp-contract=off so that float arithmetic rounds per
// operation, as the kernels' __f*_rn intrinsics do.
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static
#define PDL_ENTRY() \
  do {              \
  } while (0)
#define PDL_LATE() \
  do {             \
  } while (0)
#define PDL_WAIT()
#ifndef STEP_TIMER
#define STEP_TIMER()
#define step_waited()
#endif
#define PDL_LAUNCH()
#define NEG_INF (-INFINITY)

struct emu_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local emu_dim3 threadIdx, blockIdx;
inline emu_dim3 blockDim, gridDim;

struct emu_warp {
  std::barrier<> bar{32};
  u64 slot[32];
};
struct emu_block {
  std::unique_ptr<std::barrier<>> bar;
  std::vector<std::unique_ptr<emu_warp>> warps;
};
inline emu_block emu_blk;

inline void __syncthreads() { emu_blk.bar->arrive_and_wait(); }

template <class T> inline u64 emu_bits(T v) {
  u64 b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T> inline T emu_from(u64 b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}
inline emu_warp& emu_my_warp() { return *emu_blk.warps[threadIdx.x / 32]; }

template <class T> inline T __shfl_xor_sync(unsigned, T v, int o) {
  emu_warp& w = emu_my_warp();
  const int lane = threadIdx.x & 31;
  w.slot[lane] = emu_bits(v);
  w.bar.arrive_and_wait();
  T r = emu_from<T>(w.slot[lane ^ o]);
  w.bar.arrive_and_wait();
  return r;
}
template <class T> inline T __shfl_up_sync(unsigned, T v, int d) {
  emu_warp& w = emu_my_warp();
  const int lane = threadIdx.x & 31;
  w.slot[lane] = emu_bits(v);
  w.bar.arrive_and_wait();
  T r = lane >= d ? emu_from<T>(w.slot[lane - d]) : v;
  w.bar.arrive_and_wait();
  return r;
}
inline void __syncwarp(unsigned = 0xffffffffu) { emu_my_warp().bar.arrive_and_wait(); }
inline unsigned __ballot_sync(unsigned, bool p) {
  emu_warp& w = emu_my_warp();
  const int lane = threadIdx.x & 31;
  w.slot[lane] = p ? 1 : 0;
  w.bar.arrive_and_wait();
  unsigned r = 0;
  for (int j = 0; j < 32; j++)
    if (w.slot[j]) r |= 1u << j;
  w.bar.arrive_and_wait();
  return r;
}
inline bool __any_sync(unsigned m, bool p) { return __ballot_sync(m, p) != 0; }
inline unsigned __match_any_sync(unsigned, int v) {
  emu_warp& w = emu_my_warp();
  const int lane = threadIdx.x & 31;
  w.slot[lane] = (u64)(u32)v;
  w.bar.arrive_and_wait();
  unsigned r = 0;
  for (int j = 0; j < 32; j++)
    if (w.slot[j] == (u64)(u32)v) r |= 1u << j;
  w.bar.arrive_and_wait();
  return r;
}

inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int atomicExch(int* p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline double atomicAdd(double* p, double v) {
  u64* q = (u64*)p;
  u64 old = __atomic_load_n(q, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(q, &old, emu_bits(emu_from<double>(old) + v), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return emu_from<double>(old);
}
inline float atomicAdd(float* p, float v) {
  u32* q = (u32*)p;
  u32 old = __atomic_load_n(q, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(q, &old, (u32)emu_bits(emu_from<float>(old) + v), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return emu_from<float>(old);
}
inline int atomicMin(int* p, int v) {
  int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
inline int atomicMax(int* p, int v) {
  int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (v > old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}

inline float __uint_as_float(u32 b) { return emu_from<float>(b); }
inline float __int_as_float(int b) { return emu_from<float>((u32)b); }
inline u32 __float_as_uint(float f) { return (u32)emu_bits(f); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
using std::isinf;

// Reads n bytes of the harness's input from stdin; a short input ends the
// process (status 2), which the Go side reports.
inline void readn(void* p, size_t n) {
  if (fread(p, 1, n, stdin) != n) {
    fprintf(stderr, "short input\n");
    exit(2);
  }
}

// Runs kernel(args...) over grid blocks of nt threads.
template <class F> void emu_launch(unsigned grid, unsigned nt, F kernel) {
  blockDim.x = nt, blockDim.y = blockDim.z = 1;
  gridDim.x = grid, gridDim.y = gridDim.z = 1;
  emu_blk.bar = std::make_unique<std::barrier<>>(nt);
  emu_blk.warps.clear();
  for (unsigned w = 0; w < nt / 32; w++) emu_blk.warps.push_back(std::make_unique<emu_warp>());
  for (unsigned b = 0; b < grid; b++) {
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < nt; t++)
      ts.emplace_back([=] {
        threadIdx.x = t;
        blockIdx.x = b;
        kernel();
      });
    for (auto& t : ts) t.join();
  }
}
