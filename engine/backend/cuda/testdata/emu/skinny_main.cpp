// Runs kernels/gemv.cu's gemm_skinny under the CPU emulation (emu.h,
// prelude_emu.h), for skinny_emu_test.go. stdin (int32 little-endian): T,
// I, O; then x [T·I] bf16, w [O·I] bf16 (each padded to an even count).
// stdout: out [(T+1)·O] f32, started as NaN (row T must stay so).
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "gemv.cu"

int main() {
  int hd[3];
  readn(hd, sizeof hd);
  const int T = hd[0], I = hd[1], O = hd[2];
  std::vector<u16> x(((size_t)T * I + 1) & ~(size_t)1), w(((size_t)O * I + 1) & ~(size_t)1);
  readn(x.data(), 2 * x.size());
  readn(w.data(), 2 * w.size());
  std::vector<float> out((size_t)(T + 1) * O, __uint_as_float(0x7fc00000u));
  float* o = out.data();
  const u16 *X = x.data(), *W = w.data();
  const unsigned grid = (O + 15) / 16;
  emu_launch(grid, 32 * SK_WARPS, [=] { gemm_skinny<2>(o, X, W, T, I, O); });
  fwrite(out.data(), 4, out.size(), stdout);
  return 0;
}
