// Runs kernels/gemv.cu's moe_combine and moe_combine_rows under the CPU
// emulation (emu.h, prelude_emu.h), for moe_emu_test.go. stdin (int32
// little-endian): T, K, H, P, threads; then w [T·K] f32, rows [T·K] int32,
// y [T·K·H] f32 (pair order, for moe_combine), yg [P·H] f32 (grouped, for
// moe_combine_rows). stdout: moe_combine's out [T·H], then
// moe_combine_rows' out [T·H]; both start as NaN.
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "gemv.cu"

int main() {
  int hd[5];
  readn(hd, sizeof hd);
  const int T = hd[0], K = hd[1], H = hd[2], P = hd[3], nt = hd[4];
  std::vector<float> w((size_t)T * K), y((size_t)T * K * H), yg((size_t)P * H);
  std::vector<int> rows((size_t)T * K);
  readn(w.data(), 4 * w.size());
  readn(rows.data(), 4 * rows.size());
  readn(y.data(), 4 * y.size());
  readn(yg.data(), 4 * yg.size());
  const float nan = __uint_as_float(0x7fc00000u);
  std::vector<float> o1((size_t)T * H, nan), o2((size_t)T * H, nan);
  float *O1 = o1.data(), *O2 = o2.data(), *W = w.data(), *Y = y.data(), *YG = yg.data();
  int* R = rows.data();
  emu_launch(T, nt, [=] { moe_combine(O1, Y, W, K, H); });
  emu_launch(T, nt, [=] { moe_combine_rows(O2, YG, W, R, K, H); });
  fwrite(o1.data(), 4, o1.size(), stdout);
  fwrite(o2.data(), 4, o2.size(), stdout);
  return 0;
}
