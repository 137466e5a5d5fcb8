// Runs kernels/gemv.cu's gemm_skinny_n2 (up to three products of one x)
// under the CPU emulation (emu.h, prelude_emu.h), for skinny_emu_test.go.
// stdin (int32 little-endian): T, I, n, O0, O1, O2; then x [T·I] bf16 and
// the n weights [O_j·I] bf16 (each padded to an even count). stdout: for
// each product, out_j [(T+1)·O_j] f32, started as NaN (row T must stay so).
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "gemv.cu"

int main() {
  int hd[6];
  readn(hd, sizeof hd);
  const int T = hd[0], I = hd[1], n = hd[2];
  std::vector<u16> x(((size_t)T * I + 1) & ~(size_t)1);
  readn(x.data(), 2 * x.size());
  std::vector<std::vector<u16>> w(n);
  std::vector<std::vector<float>> out(n);
  SkinnyP p{};
  p.x = x.data();
  p.T = T, p.I = I;
  int nb[3] = {0, 0, 0}, total = 0;
  for (int j = 0; j < 3; j++) {
    const int jj = j < n ? j : n - 1;
    if (j < n) {
      w[j].resize(((size_t)hd[3 + j] * I + 1) & ~(size_t)1);
      readn(w[j].data(), 2 * w[j].size());
      out[j].assign((size_t)(T + 1) * hd[3 + j], __uint_as_float(0x7fc00000u));
      nb[j] = (hd[3 + j] + 15) / 16;
      total += nb[j];
    }
    p.out[j] = out[jj].data();
    p.w[j] = w[jj].data();
    p.O[j] = hd[3 + jj];
  }
  p.nb0 = nb[0], p.nb1 = nb[1];
  emu_launch(total, 32 * SK_WARPS, [=] { gemm_skinny3<2>(p); });
  for (int j = 0; j < n; j++) fwrite(out[j].data(), 4, out[j].size(), stdout);
  return 0;
}
