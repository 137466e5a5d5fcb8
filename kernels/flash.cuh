// Device code shared by the attention kernels that the CPU emulation of the
// tests compiles as well (testdata/emu/prelude_emu.h includes this file):
// plain C++ over the prelude's helpers, no inline assembly. Source()
// prepends it to every module after prelude.cuh.
// One step of flash attention's online softmax over a warp's mma
// accumulator rows (gq and gq + 8, the quads' lanes holding their columns):
// s[NT][4] are the tile's scores in log2 units, masked ones NEG_INF, and
// become P = 2^(s − m); m and l are each row's running max and sum, and the
// output accumulators o[ND][4] are rescaled to the new max. SKIP (the
// decode kernel): no rescale when no lane's max moved, which a factor of
// exactly 1 would not change (results are the same bit for bit); past a
// split's first tiles it rarely moves.
template <int NT, int ND, bool SKIP = false>
__device__ __forceinline__ void online_softmax(float (&s)[NT][4], float (&m)[2], float (&l)[2], float (&o)[ND][4]) {
  float mx[2] = {NEG_INF, NEG_INF};
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
#pragma unroll
    for (int e = 0; e < 4; e++) mx[e >> 1] = fmaxf(mx[e >> 1], s[nt][e]);
  }
  float corr[2];
#pragma unroll
  for (int i = 0; i < 2; i++) {
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    const float mn = fmaxf(m[i], mx[i]);
    corr[i] = mn == NEG_INF ? 1.f : exp2f(m[i] - mn);
    m[i] = mn;
  }
  if (!SKIP || __any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
    for (int i = 0; i < 2; i++) l[i] *= corr[i];
#pragma unroll
    for (int nd = 0; nd < ND; nd++) {
      o[nd][0] *= corr[0];
      o[nd][1] *= corr[0];
      o[nd][2] *= corr[1];
      o[nd][3] *= corr[1];
    }
  }
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int i = e >> 1;
      const float p = m[i] == NEG_INF ? 0.f : exp2f(s[nt][e] - m[i]);
      s[nt][e] = p;
      l[i] += p;
    }
  }
}
