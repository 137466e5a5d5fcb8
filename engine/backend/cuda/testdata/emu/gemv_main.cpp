// Runs kernels/gemv.cu's fused decode products (gemvf, and its split-K
// form) under the CPU emulation (emu.h, prelude_emu.h), for
// gemv_emu_test.go; gemv_variant_main.cpp builds it with other GF_RW, GF_U. stdin (int32 little-endian): mode, norm, R, T, I, S, n,
// O0, O1, O2, passes (how many of the runs below, 1…4, in order); then x [T·I] f32, nw [I] f32, the n weights [O_j·I] bf16
// (padded to an even count), aux [T·O0] f32. stdout, for each of four runs
// (plain; split into S slices with blocks in index order; the same with
// blocks in a shuffled order; plain with a third of the blocks, each
// looping over the product's, GemvP.nvb): out_j [T·O_j] for j < n (SwiGLU: gate, up),
// h [T·I], aux [T·O0] (SwiGLU: silu(gate)·up), sum [T·O0], then the
// counters left in the scratch (one int per row group, must be zero).
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "gemv.cu"

template <int R, int NORM, int MODE, int WIDE> static void run(GemvP p, unsigned grid, unsigned seed) {
  emu_launch3(grid, 1, 1, GEMV_THREADS, seed, [=] { gemvf<R, NORM, MODE, WIDE>(p); });
}

template <int R> static void dispatch(int mode, int norm, int wide, GemvP p, unsigned grid, unsigned seed) {
#define D(M, N)                                                          \
  if (mode == M && norm == N) {                                          \
    if (wide) run<R, N, M, 1>(p, grid, seed); else run<R, N, M, 0>(p, grid, seed); \
    return;                                                              \
  }
  D(0, 0) D(0, 1) D(1, 0) D(1, 1) D(2, 0) D(2, 1)
#undef D
  fprintf(stderr, "bad mode\n");
  exit(2);
}

int main() {
  int hd[11];
  readn(hd, sizeof hd);
  const int mode = hd[0], norm = hd[1], R = hd[2], T = hd[3], I = hd[4], S = hd[5], n = hd[6];
  const int O[3] = {hd[7], hd[8], hd[9]};
  std::vector<float> x((size_t)T * I), nw(I), aux0((size_t)T * O[0]);
  readn(x.data(), 4 * x.size());
  readn(nw.data(), 4 * nw.size());
  std::vector<std::vector<u16>> w(n);
  for (int j = 0; j < n; j++) {
    w[j].resize(((size_t)O[j] * I + 1) & ~(size_t)1);
    readn(w[j].data(), 2 * w[j].size());
  }
  readn(aux0.data(), 4 * aux0.size());
  const float nan = __uint_as_float(0x7fc00000u);
  // Row groups: the split-K kernels keep two outputs per warp, the plain
  // ones GF_RW (SwiGLU one, gate and up) per GF_KS warps.
  int nbw[3] = {0, 0, 0}, nbp[3] = {0, 0, 0}, totalWide = 0, totalPlain = 0;
  for (int j = 0; j < n; j++) {
    const int ks = mode == GF_RESID ? GF_KSR : GF_KS;
    const int rw = mode == GF_SWIGLU ? GW_WARPS : GW_BLOCK_ROWS, rp = mode == GF_SWIGLU ? GW_WARPS / GF_KSS : GW_WARPS * GF_RW / ks;
    nbw[j] = (O[j] + rw - 1) / rw, nbp[j] = (O[j] + rp - 1) / rp;
    totalWide += nbw[j], totalPlain += nbp[j];
  }
  if (mode == GF_SWIGLU) totalWide = nbw[0], totalPlain = nbp[0];
  const int passes = hd[10] < 1 ? 1 : hd[10] > 4 ? 4 : hd[10];
  for (int pass = 0; pass < passes; pass++) {
    const int wide = pass == 1 || pass == 2;
    const int* nb = wide ? nbw : nbp;
    const int total = wide ? totalWide : totalPlain;
    std::vector<std::vector<float>> out(n);
    for (int j = 0; j < n; j++) out[j].assign((size_t)T * O[j], nan);
    std::vector<float> h((size_t)T * I, nan), aux = aux0, sum((size_t)T * O[0], nan);
    if (mode == GF_SWIGLU) aux.assign(aux.size(), nan);
    // Partial sums left by earlier launches of other sizes: the parts
    // region starts dirty, the counters clean (as the backend's scratch).
    std::vector<float> part(GF_CNT_MAX + (size_t)totalWide * S * GF_SLOT(8), 0.f);
    for (size_t i = GF_CNT_MAX; i < part.size(); i++) part[i] = 1e30f;
    GemvP p{};
    p.out0 = out[0].data();
    p.out1 = n > 1 ? out[1].data() : nullptr;
    p.out2 = n > 2 ? out[2].data() : nullptr;
    p.w0 = w[0].data();
    p.w1 = n > 1 ? w[1].data() : nullptr;
    p.w2 = n > 2 ? w[2].data() : nullptr;
    p.x = x.data();
    p.nw = nw.data();
    p.h = norm ? h.data() : nullptr;
    p.aux = aux.data();
    p.sum = sum.data();
    p.O0 = O[0], p.O1 = O[1], p.O2 = O[2], p.nb0 = nb[0], p.nb1 = nb[1], p.T = T, p.I = I;
    p.eps = 1e-6f;
    p.part = part.data();
    p.S = S;
    unsigned grid = wide ? total * S : total;
    if (pass == 3) {
      grid = (total + 2) / 3;
      p.nvb = total;
    }
    const unsigned seed = pass == 2 ? 7 : 0;
    switch (R) {
      case 1: dispatch<1>(mode, norm, wide, p, grid, seed); break;
      case 2: dispatch<2>(mode, norm, wide, p, grid, seed); break;
      case 4: dispatch<4>(mode, norm, wide, p, grid, seed); break;
      default: dispatch<8>(mode, norm, wide, p, grid, seed); break;
    }
    for (int j = 0; j < n; j++) fwrite(out[j].data(), 4, out[j].size(), stdout);
    fwrite(h.data(), 4, h.size(), stdout);
    fwrite(aux.data(), 4, aux.size(), stdout);
    fwrite(sum.data(), 4, sum.size(), stdout);
    fwrite(part.data(), 4, totalWide, stdout);  // the counters (ints)
  }
  return 0;
}
