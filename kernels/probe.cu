// How fast this GPU's memory can be read at all: an experiment run by the
// bench's readpeak group (TestReadPeak), not by the engine. Why (run 35):
// the decode products stream their weights at 3.8–4.1 TB/s and the decode
// attention's tiles at ~3.7, against 4.23 for a device-to-device copy
// (which counts its writes too); whether the 250 tok/s target at 512
// positions (4.0 ms for 15.1 GB of weights and the attention) is within
// reach depends on the read rate the memory gives, which no run had
// measured. Run 35 (H100): the best of 27 variants read 3,113–3,115 GB/s
// and the fused product 3,119–3,138 over the same 4 GiB: the products
// stream at the read peak (tests/device/NOTES.md).
//
// read_peak reads every 16 bytes of w[0, n16) once, RP_U loads in flight a
// lane, and folds them with XOR so that the loads stay; *out is written
// only in the rare case the fold is one given value. RP_WS=0: grid-stride
// (consecutive warps read consecutive 512 bytes); 1: each warp reads its
// own contiguous segment, as a product's warp reads its weight rows.
// RP_LD=0: ld_stream (with LD_L2PF's hint when set); 1: plain ld.global.
#ifndef RP_U
#define RP_U 4
#endif
#ifndef RP_WS
#define RP_WS 0
#endif
#ifndef RP_LD
#define RP_LD 0
#endif

__device__ __forceinline__ uint4 rp_load(const uint4* p) {
  if (RP_LD == 1) {
    uint4 r;
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
  }
  return ld_stream(p);
}

extern "C" __global__ void __launch_bounds__(256) read_peak(const uint4* __restrict__ w, long n16, u32* out) {
  PDL_ENTRY();
  u32 acc = 0;
  uint4 v[RP_U];
  if (RP_WS) {
    const long warps = (long)gridDim.x * (blockDim.x >> 5);
    const long wid = (long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const long seg = ((n16 + warps - 1) / warps + 32 * RP_U - 1) / (32 * RP_U) * (32 * RP_U);
    const long i0 = wid * seg, i1 = min(n16, i0 + seg);
    for (long i = i0 + (threadIdx.x & 31); i < i1; i += 32 * RP_U) {
#pragma unroll
      for (int u = 0; u < RP_U; u++) {
        if (i + 32 * u < i1) v[u] = rp_load(w + i + 32 * u);
      }
#pragma unroll
      for (int u = 0; u < RP_U; u++) {
        if (i + 32 * u < i1) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
      }
    }
  } else {
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride * RP_U) {
#pragma unroll
      for (int u = 0; u < RP_U; u++) {
        if (i + stride * u < n16) v[u] = rp_load(w + i + stride * u);
      }
#pragma unroll
      for (int u = 0; u < RP_U; u++) {
        if (i + stride * u < n16) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
      }
    }
  }
  if (acc == 0x9e3779b9u) *out = acc;
  PDL_LATE();
}
