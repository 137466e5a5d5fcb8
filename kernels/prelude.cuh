// Shared definitions, prepended to every module before NVRTC compiles it.
// No system headers: only NVRTC's builtins, so that compilation needs
// nothing but libnvrtc. 16-bit floats are handled as raw bits (u16).
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define DT_F32 0
#define DT_F16 1
#define DT_BF16 2
#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ float bf16_to_f32(u32 h) { return __uint_as_float(h << 16); }
__device__ __forceinline__ float f16_to_f32(u16 h) {
  float f;
  asm("{ cvt.f32.f16 %0, %1; }" : "=f"(f) : "h"(h));
  return f;
}
// Round to nearest even, NaN stays NaN (quiet).
__device__ __forceinline__ u16 f32_to_bf16(float f) {
  u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16)(u >> 16);
}
// Two floats as packed bf16 (lo in the low half).
__device__ __forceinline__ u32 pack_bf16(float lo, float hi) {
  return (u32)f32_to_bf16(lo) | ((u32)f32_to_bf16(hi) << 16);
}
// Round to nearest even f16, saturating: magnitudes beyond 65504 (the
// largest finite f16), infinities included, become ±65504 instead of ±inf,
// so that one outsized value (an unnormalised V row) cannot turn a whole
// attention output into inf or NaN; NaN stays NaN.
__device__ __forceinline__ u16 f32_to_f16(float f) {
  f = fabsf(f) > 65504.f ? copysignf(65504.f, f) : f;  // false for NaN
  u16 h;
  asm("{ cvt.rn.f16.f32 %0, %1; }" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ u32 pack_f16(float lo, float hi) {
  return (u32)f32_to_f16(lo) | ((u32)f32_to_f16(hi) << 16);
}

// Element i of a weight of dtype DT as float.
template <int DT> __device__ __forceinline__ float wget(const void* p, long i);
template <> __device__ __forceinline__ float wget<DT_F32>(const void* p, long i) { return ((const float*)p)[i]; }
template <> __device__ __forceinline__ float wget<DT_F16>(const void* p, long i) { return f16_to_f32(((const u16*)p)[i]); }
template <> __device__ __forceinline__ float wget<DT_BF16>(const void* p, long i) { return bf16_to_f32(((const u16*)p)[i]); }

// Unpack 8 bf16 / f16 held in a uint4.
__device__ __forceinline__ void unpack_bf16x8(uint4 u, float* f) {
  f[0] = __uint_as_float(u.x << 16); f[1] = __uint_as_float(u.x & 0xffff0000u);
  f[2] = __uint_as_float(u.y << 16); f[3] = __uint_as_float(u.y & 0xffff0000u);
  f[4] = __uint_as_float(u.z << 16); f[5] = __uint_as_float(u.z & 0xffff0000u);
  f[6] = __uint_as_float(u.w << 16); f[7] = __uint_as_float(u.w & 0xffff0000u);
}
__device__ __forceinline__ void unpack_f16x8(uint4 u, float* f) {
  f[0] = f16_to_f32((u16)(u.x & 0xffffu)); f[1] = f16_to_f32((u16)(u.x >> 16));
  f[2] = f16_to_f32((u16)(u.y & 0xffffu)); f[3] = f16_to_f32((u16)(u.y >> 16));
  f[4] = f16_to_f32((u16)(u.z & 0xffffu)); f[5] = f16_to_f32((u16)(u.z >> 16));
  f[6] = f16_to_f32((u16)(u.w & 0xffffu)); f[7] = f16_to_f32((u16)(u.w >> 16));
}

// The paged KV cache's element type (DT_BF16 or DT_F16: INFERNIX_CUDA_KV):
// kv_enc stores a float, kv_unpack8 reads 8 consecutive elements.
template <int DT> __device__ __forceinline__ u16 kv_enc(float f);
template <> __device__ __forceinline__ u16 kv_enc<DT_BF16>(float f) { return f32_to_bf16(f); }
template <> __device__ __forceinline__ u16 kv_enc<DT_F16>(float f) { return f32_to_f16(f); }
template <int DT> __device__ __forceinline__ void kv_unpack8(uint4 u, float* f);
template <> __device__ __forceinline__ void kv_unpack8<DT_BF16>(uint4 u, float* f) { unpack_bf16x8(u, f); }
template <> __device__ __forceinline__ void kv_unpack8<DT_F16>(uint4 u, float* f) { unpack_f16x8(u, f); }

// LD_L2PF (64, 128 or 256; 0, the default, none): ld_stream's loads carry
// PTX's L2 prefetch-size hint (.L2::NB), so that a miss asks DRAM for N
// bytes around the sectors the warp wants. Why (run 35): a warp's load is
// 512 contiguous bytes already, but the products and the decode attention
// read at 3.7–4.1 TB/s against the copy's 4.23, and no run had tried the
// hint. CP_L2PF: the same for cp_async16 (the decode attention's K/V
// tiles). Neither changes any result. Measured in run 35 (H100): decode
// within the defaults' spread at 512 and 32K, and probe.cu's read_peak no
// faster with either size: off.
#ifndef LD_L2PF
#define LD_L2PF 0
#endif
#ifndef CP_L2PF
#define CP_L2PF 0
#endif
#define L2PF_STR2(n) #n
#define L2PF_STR(n) L2PF_STR2(n)
#if LD_L2PF
#define LD_L2PF_Q ".L2::" L2PF_STR(LD_L2PF) "B"
#else
#define LD_L2PF_Q ""
#endif
#if CP_L2PF
#define CP_L2PF_Q ".L2::" L2PF_STR(CP_L2PF) "B"
#else
#define CP_L2PF_Q ""
#endif

// Streaming 16-byte load of weights read once: read-only path, no L1
// allocation, so that the activations stay in L1.
__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate" LD_L2PF_Q ".v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

// KEEP_META=1: the step's small data that every layer reads again in the
// decode attention and its merge (positions, token and block tables, RoPE
// rows, the q/k norm weights) loaded with an L2 evict_last policy. Why:
// each layer streams ~400 MB of weights through the 50 MB L2, so these few
// KB come from DRAM at every layer, and at short contexts they are links of
// the attention's dependent chain (position → block table → tile; position
// → RoPE rows): 3.7 µs from the wait to the first tile at 640 positions
// (run 26), for ~4 µs of work. KEEP_META=2: all but the RoPE rows, which
// a long generation would otherwise leave in L2 one row a position (META_ROPE):
// the default since run 28 (with MS_SPEC, +0.6% at 512 and +0.4% at 32K over
// 8 processes of the old defaults; 1 read no faster than 2 within the drift,
// and 2 keeps no more than a few KB a step). KEEP_META=0: plain loads.
// Changes no result. META(p) reads *p.
#ifndef KEEP_META
#define KEEP_META 2
#endif
#if KEEP_META
__device__ __forceinline__ int ld_keep(const int* p) {
  int v;
  u64 pol;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  // volatile: without it the asm counts as free of side effects and the
  // compiler may hoist it out of a guard such as prep_row's nw != 0, a load
  // of a null pointer (run 28's illegal address).
  asm volatile("ld.global.nc.L2::cache_hint.b32 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(pol));
  return v;
}
__device__ __forceinline__ float ld_keep(const float* p) { return __int_as_float(ld_keep((const int*)p)); }
#define META(p) ld_keep(p)
#else
#define META(p) (*(p))
#endif
#if KEEP_META == 1
#define META_ROPE(p) ld_keep(p)
#else
#define META_ROPE(p) (*(p))
#endif

// 8 consecutive weights from element i (16-byte aligned for 16-bit types,
// 32-byte for f32) as floats.
template <int DT> __device__ __forceinline__ void load8(const void* w, long i, float* f);
template <> __device__ __forceinline__ void load8<DT_BF16>(const void* w, long i, float* f) {
  unpack_bf16x8(ld_stream((const u16*)w + i), f);
}
template <> __device__ __forceinline__ void load8<DT_F16>(const void* w, long i, float* f) {
  unpack_f16x8(ld_stream((const u16*)w + i), f);
}
template <> __device__ __forceinline__ void load8<DT_F32>(const void* w, long i, float* f) {
  uint4 a = ld_stream((const float*)w + i), b = ld_stream((const float*)w + i + 4);
  f[0] = __uint_as_float(a.x); f[1] = __uint_as_float(a.y); f[2] = __uint_as_float(a.z); f[3] = __uint_as_float(a.w);
  f[4] = __uint_as_float(b.x); f[5] = __uint_as_float(b.y); f[6] = __uint_as_float(b.z); f[7] = __uint_as_float(b.w);
}

// Programmatic dependent launch (Hopper): a kernel launched with the
// programmatic-stream-serialization attribute may start while the previous
// kernel is still running. PDL_WAIT blocks until that kernel has completed
// and its writes are visible, so every kernel runs it in every block before
// reading anything earlier work wrote, writing anything earlier work reads,
// or exiting (an early exit before it would let a grid complete ahead of its
// predecessor and break the chain for the next kernel). Only immutable data
// (weights) may be read before it. PDL_LAUNCH lets the next kernel start
// its own prologue. Both are no-ops without the launch attribute and before
// sm_90.
// Where a block lets the next kernel launch (PDL_TRIGGER, a define for every
// module: INFERNIX_CUDA_PDL_TRIGGER): 0, at entry, right after the wait, so
// the next grid's blocks may take the SM slots this grid leaves free and
// load their weights during its whole run; 1, at PDL_LATE, which the long
// kernels (products, attention) reach after their main loop, so the next
// grid lands during this one's tail only (the others trigger at exit); 2, at
// exit, so no blocks of the next grid wait on an SM: what PDL still saves is
// the next grid's launch and its weight loads, overlapped with this grid's
// completion. Measured on the H200 (run 14, Qwen3-8B decode at 512 / 32K,
// tok/s): no PDL 213.2 / 164.0; with PDL, 0: 199.5 / 145.8, 1: 208.5 /
// 161.8, 2: 219.1 / 167.7. Waiting blocks cost the running grid more than
// their head start gains. Run 20 tried a 3 (as 1, but a looped product's
// block triggering after its last share's loop, not its first): 213.2 /
// 165.8 tok/s at 512 / 32K against 230.4–231.1 / 176.4–177.6 at exit; the
// step's timeline has each launch's first block enter ~1 µs after the
// previous launch's last exit, and still exit is best. Placement never
// changes a result: the next kernel's PDL_WAIT still waits for this grid
// to complete.
#ifndef PDL_TRIGGER
#define PDL_TRIGGER 2
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define PDL_LAUNCH() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#else
#define PDL_WAIT()
#define PDL_LAUNCH()
#endif
#define PDL_ENTRY()                    \
  do {                                 \
    PDL_WAIT();                        \
    step_waited();                     \
    if (PDL_TRIGGER == 0) PDL_LAUNCH(); \
  } while (0)
#define PDL_LATE()                     \
  do {                                 \
    if (PDL_TRIGGER == 1) PDL_LAUNCH(); \
  } while (0)

__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The kernel's dynamic shared memory as an array of T (a macro, so that the
// CPU emulation of the tests can supply its own).
#define EXTERN_SMEM(T, name) extern __shared__ __align__(16) T name[]

// The global nanosecond timer and the SM a warp runs on (GF_TIMING's
// per-warp timeline of the decode products).
__device__ __forceinline__ u64 global_ns() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ u32 sm_id() {
  u32 s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

// STEP_TIMING=1 or 2 (INFERNIX_CUDA_DEFINES; the bench's
// INFERNIX_BENCH_STEP_TIMING): each launch of a kernel records, in slot
// %gridid mod STEP_SLOTS of the table the host points step_tl at (8 u64 a
// slot), the least and greatest grid id that wrote there (equal unless two
// launches share the slot), and the first and last of its blocks' entries
// (STEP_TIMER, at the top of the decode step's kernels), PDL_WAIT returns
// (every kernel's PDL_ENTRY) and exits (STEP_TIMER's end): thread 0 of each
// block, with atomics whose results are not waited for. Why: the products
// measured alone add up to 4.04 ms of a 4.3 ms step at 512 positions, and
// the attention's own timeline ends where the next kernel's begins; what
// each kernel adds to the step, and how much of it overlaps its
// neighbours under PDL, is measured nowhere else (Nsight Systems is not on
// the GPU machine). Changes no result.
#ifndef STEP_TIMING
#define STEP_TIMING 0
#endif
#define STEP_SLOTS 4096
#if STEP_TIMING && defined(__CUDA_ARCH__)
__device__ u64* step_tl;
__device__ __forceinline__ u64* step_slot() {
  if (step_tl == 0 || threadIdx.x != 0 || threadIdx.y != 0 || threadIdx.z != 0) return 0;
  u64 g;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(g));
  u64* s = step_tl + (g % STEP_SLOTS) * 8;
  if (STEP_TIMING == 1 || (blockIdx.x | blockIdx.y | blockIdx.z) == 0) {
    atomicMin(s, g);
    atomicMax(s + 1, g);
  }
  return s;
}
// STEP_TIMING=2 records only the first entry and wait and the last exit:
// 3 atomics a block instead of 12, all launches' blocks aiming at the same
// few addresses (STEP_TIMING=1 slowed the step by ~15%, 200 against 231
// tok/s at 640 positions, run 20).
__device__ __forceinline__ void step_mark(u64* s, int i) {
  if (s == 0) return;
  const u64 t = global_ns();
  if (STEP_TIMING == 1 || i != 6) atomicMin(s + i, t);
  if (STEP_TIMING == 1 || i == 6) atomicMax(s + i + 1, t);
}
__device__ __forceinline__ void step_waited() { step_mark(step_slot(), 4); }
// The slot is found again at exit rather than held: nothing stays live
// across the kernel (a held pointer made the 40-register products spill).
struct StepTimer {
  __device__ StepTimer() { step_mark(step_slot(), 2); }
  __device__ ~StepTimer() { step_mark(step_slot(), 6); }
};
#define STEP_TIMER_CAT2(a, b) a##b
#define STEP_TIMER_CAT(a, b) STEP_TIMER_CAT2(a, b)
#define STEP_TIMER() StepTimer STEP_TIMER_CAT(step_timer_, __LINE__)
#else
#define step_waited()
#define STEP_TIMER()
#endif

// Thread-block clusters (sm_90; the host launches a kernel that uses them
// with a cluster dimension only on such devices). A cluster barrier's
// phase: every thread of every block of the cluster arrives
// (cluster_arrive: its earlier writes, shared memory of other blocks
// included, released) and later waits (cluster_wait: acquire) until all
// have; the defaults of barrier.cluster's arrive and wait (PTX 7.8 has no
// modifiers for them). st_cluster_f32: stores v at shared address a of
// the cluster's block of rank r (distributed shared memory: mapa +
// st.shared::cluster); a block may only be written so once it has started,
// i.e. after a barrier phase it arrived at.
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void st_cluster_f32(u32 a, u32 r, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  u32 ra;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(r));
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(ra), "f"(v) : "memory");
#endif
}

// Asynchronous global → shared copies (sm_80+).
// Asks L2 for the 128-byte line holding p (a hint: no result depends on it).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// A shared-memory address as cp.async and ldmatrix take it, to which byte
// offsets add (a pointer in the CPU emulation).
typedef u32 saddr_t;
__device__ __forceinline__ u32 smem_addr(const void* p) {
  u32 a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
__device__ __forceinline__ void cp_async16(u32 dst, const void* src) {
  asm volatile("cp.async.cg.shared.global" CP_L2PF_Q " [%0], [%1], 16;" ::"r"(dst), "l"(src));
}
// Hopper's bulk copy (1-D TMA) and the mbarriers that count its bytes
// (gemv.cu's GF_TMA; compiled only where a module asks for them, so that
// older NVRTCs, which lack PTX 8.0, still build every default module).
#if GF_TMA
// The launch's dynamic shared memory in bytes.
__device__ __forceinline__ u32 dyn_smem_bytes() {
  u32 n;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
  return n;
}
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// One arrival that also expects bytes more to land before the phase completes.
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// bytes (a multiple of 16, both addresses 16-byte aligned) from global src
// to shared dst, counted on bar when they land.
__device__ __forceinline__ void tma_load_1d(u32 dst, const void* src, u32 bytes, u32 bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst), "l"(src),
               "r"(bytes), "r"(bar)
               : "memory");
}
// Until bar's phase of the given parity has completed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}
#endif
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }


// Tensor cores (sm_80+), as prefill.cu and attn_decode_tc use them:
// ldmatrix of four 8×8 16-bit matrices (lanes 8i…8i+7 give the row
// addresses of matrix i; lane l receives row l/4, elements 2(l%4) and
// 2(l%4)+1 of each, or with .trans column l/4, rows 2(l%4) and 2(l%4)+1),
// and mma.sync m16n8k16 (A row-major, B column-major) with both operands in
// KT (DT_BF16 or DT_F16) and f32 accumulation.
__device__ __forceinline__ void ldsm_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
// An 8×8 matrix of 16-bit elements transposed across the warp (lane l
// holds row l/4, elements 2(l%4) and 2(l%4)+1, before and after).
__device__ __forceinline__ u32 movm_t(u32 a) {
  u32 d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
  return d;
}
template <int KT> __device__ __forceinline__ void mma16816(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1);
template <> __device__ __forceinline__ void mma16816<DT_BF16>(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void mma16816<DT_F16>(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// Two floats as the mma operand type KT (f16 saturated like the cache).
template <int KT> __device__ __forceinline__ u32 pack_kt(float lo, float hi);
template <> __device__ __forceinline__ u32 pack_kt<DT_BF16>(float lo, float hi) { return pack_bf16(lo, hi); }
template <> __device__ __forceinline__ u32 pack_kt<DT_F16>(float lo, float hi) { return pack_f16(lo, hi); }

