// MoE routing by one warp, shared by moe_route (gemv.cu) and moe_plan
// (moe.cu) so that the two choose the same experts with the same weights,
// bit for bit; moe_route_block (moe.cu) computes the same by ranks (the
// emulated tests hold the three to each other). Plain C++ that the tests'
// CPU emulation compiles too.

// The top K of one token's E logits l (E ≤ 1024): the maximum and the sum
// of exp(l − max) over lanes strided, then K rounds of arg-max (value
// descending, index ascending) over the experts not yet taken; lane 0
// writes the k-th choice to idx[k] and its probability to w[k], divided by
// their sum if norm. Where every logit is NaN no expert wins a round: idx
// gets nanIdx.
// The softmax's maximum m and sum s of exp(l − m) over E logits, by a warp
// (every lane gets both); the routings' probabilities divide by these.
__device__ __forceinline__ void route_softmax_warp(const float* l, int E, int lane, float& m, float& s) {
  m = NEG_INF;
  for (int e = lane; e < E; e += 32) m = fmaxf(m, l[e]);
  m = warp_max(m);
  s = 0.f;
  for (int e = lane; e < E; e += 32) s += expf(l[e] - m);
  s = warp_sum(s);
}

__device__ __forceinline__ void route_topk_warp(const float* l, int E, int K, int norm, int* idx, float* w, int lane,
                                                int nanIdx) {
  float m, s;
  route_softmax_warp(l, E, lane, m, s);
  u32 taken = 0;  // 32 experts a lane
  float top = 0.f;
  for (int k = 0; k < K; k++) {
    float best = NEG_INF;
    int bi = 0x7fffffff;
    for (int j = 0, e = lane; e < E; j++, e += 32) {
      if (!((taken >> j) & 1u)) {
        const float v = l[e];
        if (v > best || (v == best && e < bi)) {
          best = v;
          bi = e;
        }
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > best || (ov == best && oi < bi)) {
        best = ov;
        bi = oi;
      }
    }
    if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
    const float pk = expf(best - m) / s;
    top += pk;
    if (lane == 0) {
      idx[k] = bi < E ? bi : nanIdx;
      w[k] = pk;
    }
  }
  if (norm && lane == 0)
    for (int k = 0; k < K; k++) w[k] /= top;
}
