// A CPU emulation of the CUDA subset the kernels use, for the tests
// (sample_emu_test.go and the other *_emu_test.go): a block's threads are
// fibers run in turn on one OS thread, __syncthreads a barrier
// that parks a fiber until the block's last thread arrives, __shared__
// variables statics shared by the block's threads (blocks run one after
// the other), warp intrinsics an exchange through per-warp slots between
// two warp barriers (every lane must call them, as the kernels already
// require with full masks), atomics GCC builtins. Why fibers: with a
// block's threads as OS threads every shuffle was two futex barriers of 32
// threads, and the emulated tests spent most of their time in the kernel's
// scheduler (9.4 of 12 CPU minutes); a barrier that every thread waits at
// with none left to run aborts with a message instead of hanging.
// Compiled with -ffp-contract=off so that float arithmetic rounds per
// operation, as the kernels' __f*_rn intrinsics do.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sys/mman.h>
#include <ucontext.h>
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
// The running fiber's: the scheduler sets threadIdx before it resumes one.
inline emu_dim3 threadIdx, blockIdx;
inline emu_dim3 blockDim, gridDim;

// The switch between fibers: on x86-64 a few instructions that swap the
// callee-saved registers and the stack (ucontext's swapcontext also sets
// the signal mask, a system call each switch: half the run time);
// elsewhere ucontext.
#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
#define EMU_ASM_SWITCH 1
// emu_switch(save, to): pushes the callee-saved registers, stores the stack
// pointer at *save, loads to and pops the registers saved there.
extern "C" void emu_switch(void** save, void* to);
asm(R"(
  .text
  .globl emu_switch
  .type emu_switch, @function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch, .-emu_switch
)");
#else
#define EMU_ASM_SWITCH 0
#endif

// The fibers of the block being run, and the scheduler's context.
struct emu_fiber {
#if EMU_ASM_SWITCH
  void* sp;
#else
  ucontext_t ctx;
#endif
  bool parked = false, done = false;
};
struct emu_sched {
#if EMU_ASM_SWITCH
  void* main;
#else
  ucontext_t main;
#endif
  std::vector<emu_fiber> fibers;
  std::vector<unsigned char*> stacks;
  void (*body)(void*) = nullptr;
  void* arg = nullptr;
  int cur = -1;
  u64 blocks = 0;  // blocks run
};
inline emu_sched emu_s;
// A fiber's stack: the kernels keep their locals small, and a guard page
// below each turns an overflow into a fault, not a corruption.
constexpr size_t emu_stack_bytes = 256 << 10, emu_guard_bytes = 4096;

// Back to the scheduler, until it resumes this fiber.
inline void emu_yield() {
#if EMU_ASM_SWITCH
  emu_switch(&emu_s.fibers[emu_s.cur].sp, emu_s.main);
#else
  swapcontext(&emu_s.fibers[emu_s.cur].ctx, &emu_s.main);
#endif
}

// A barrier of n fibers: the last to arrive releases the others and runs
// on; the others are parked until then.
struct emu_barrier {
  explicit emu_barrier(int n) : expected(n) {}
  void arrive_and_wait() {
    if (++arrived == expected) {
      arrived = 0;
      for (int w : waiting) emu_s.fibers[w].parked = false;
      waiting.clear();
      return;
    }
    waiting.push_back(emu_s.cur);
    emu_s.fibers[emu_s.cur].parked = true;
    emu_yield();
  }
  int expected, arrived = 0;
  std::vector<int> waiting;
};

struct emu_warp {
  emu_barrier bar{32};
  u64 slot[32];
};
struct emu_block {
  std::unique_ptr<emu_barrier> bar;
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

inline void emu_fiber_main() {
  emu_s.body(emu_s.arg);
  emu_s.fibers[emu_s.cur].done = true;
#if EMU_ASM_SWITCH
  emu_yield();  // never resumed
  abort();
#endif
  // ucontext: uc_link returns to the scheduler.
}

// Runs one block: nt fibers, each calling body(arg) as thread t, resumed
// in turn until every one has returned.
inline void emu_run_block(unsigned nt, void (*body)(void*), void* arg) {
  emu_s.arg = arg;
  emu_s.body = body;
  emu_s.fibers.assign(nt, emu_fiber{});
  while (emu_s.stacks.size() < nt) {
    void* m = mmap(nullptr, emu_stack_bytes + emu_guard_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED || mprotect(m, emu_guard_bytes, PROT_NONE) != 0) {
      fprintf(stderr, "emulation: no memory for %u fibers' stacks\n", nt);
      exit(2);
    }
    emu_s.stacks.push_back((unsigned char*)m + emu_guard_bytes);
  }
  for (unsigned t = 0; t < nt; t++) {
    emu_fiber& f = emu_s.fibers[t];
#if EMU_ASM_SWITCH
    // Six registers' slots, then emu_fiber_main as emu_switch's return
    // address, then a null one for emu_fiber_main, which so starts with
    // the stack pointer 8 below a 16-byte boundary, as after a call.
    void** top = (void**)(emu_s.stacks[t] + emu_stack_bytes);
    void** sp = top - 8;
    for (int i = 0; i < 6; i++) sp[i] = nullptr;
    sp[6] = (void*)&emu_fiber_main;
    sp[7] = nullptr;
    f.sp = sp;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = emu_s.stacks[t];
    f.ctx.uc_stack.ss_size = emu_stack_bytes;
    f.ctx.uc_link = &emu_s.main;
    makecontext(&f.ctx, emu_fiber_main, 0);
#endif
  }
  // Every other block resumes its threads in reverse order, so that a
  // read missing its barrier finds the write not yet made whichever
  // thread is the reader's.
  const bool reverse = (emu_s.blocks++ & 1) != 0;
  for (unsigned live = nt; live > 0;) {
    bool ran = false;
    for (unsigned i = 0; i < nt; i++) {
      const unsigned t = reverse ? nt - 1 - i : i;
      emu_fiber& f = emu_s.fibers[t];
      if (f.done || f.parked) continue;
      emu_s.cur = (int)t;
      threadIdx.x = t;
#if EMU_ASM_SWITCH
      emu_switch(&emu_s.main, f.sp);
#else
      swapcontext(&emu_s.main, &f.ctx);
#endif
      ran = true;
      if (f.done) live--;
    }
    if (!ran) {
      fprintf(stderr, "emulation: block (%u, %u, %u): every live thread waits at a barrier that the others never reach\n", blockIdx.x,
              blockIdx.y, blockIdx.z);
      abort();
    }
  }
  emu_s.cur = -1;
}

// The block's barriers, for nt threads.
inline void emu_block_setup(unsigned nt) {
  emu_blk.bar = std::make_unique<emu_barrier>((int)nt);
  emu_blk.warps.clear();
  for (unsigned w = 0; w < nt / 32; w++) emu_blk.warps.push_back(std::make_unique<emu_warp>());
}

template <class F> void emu_call(void* k) { (*(F*)k)(); }

// Runs kernel(args...) over grid blocks of nt threads.
template <class F> void emu_launch(unsigned grid, unsigned nt, F kernel) {
  blockDim.x = nt, blockDim.y = blockDim.z = 1;
  gridDim.x = grid, gridDim.y = gridDim.z = 1;
  emu_block_setup(nt);
  for (unsigned b = 0; b < grid; b++) {
    blockIdx.x = b, blockIdx.y = blockIdx.z = 0;
    emu_run_block(nt, emu_call<F>, &kernel);
  }
}
