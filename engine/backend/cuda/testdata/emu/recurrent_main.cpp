// Runs kernels/recurrent.cu's operators under the CPU emulation (emu.h,
// prelude_emu.h) in a linear-attention layer's order, for
// recurrent_emu_test.go.
// stdin, int32 little-endian: T, C, K, KH, VH, KD, VD, slots, nruns, n,
// the delta rule's threads a block (128 or 32) and the run table [n] (recurrent.go runTable); then f32: eps, x [T·C],
// w [C·K], conv state [slots·(K-1)·C], a [T·VH], b [T·VH], A_log [VH],
// dt_bias [VH], recurrent state [slots·VH·VD·KD], norm weight [VD],
// z [T·VH·VD], gate [T·VH·VD].
// stdout, f32: conv output [T·C], conv state, the delta rule's output
// [T·VH·VD], recurrent state, rmsnorm_gated(output, z), output·sigmoid(gate),
// slice_cols(x, 2 groups, offset 1, width C/2 − 2) [T·(C − 4)].
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "recurrent.cu"

template <class T> std::vector<T> readv(size_t n) {
  std::vector<T> v(n);
  readn(v.data(), n * sizeof(T));
  return v;
}
template <class T> void writev(const std::vector<T>& v) { fwrite(v.data(), sizeof(T), v.size(), stdout); }

int main() {
  int hd[11];
  readn(hd, sizeof hd);
  const int T = hd[0], C = hd[1], K = hd[2], KH = hd[3], VH = hd[4], KD = hd[5], VD = hd[6], slots = hd[7], nruns = hd[8], n = hd[9];
  const int nt = hd[10];
  auto table = readv<int>(n);
  float eps;
  readn(&eps, 4);
  auto x = readv<float>((size_t)T * C), w = readv<float>((size_t)C * K);
  auto conv = readv<float>((size_t)slots * (K - 1) * C);
  auto a = readv<float>((size_t)T * VH), b = readv<float>((size_t)T * VH);
  auto alog = readv<float>(VH), dtb = readv<float>(VH);
  auto rec = readv<float>((size_t)slots * VH * VD * KD);
  auto nw = readv<float>(VD);
  auto z = readv<float>((size_t)T * VH * VD), gate = readv<float>((size_t)T * VH * VD);

  std::vector<float> cout((size_t)T * C, __uint_as_float(0x7fc00000u));
  const int per = (C + 255) / 256;
  const int* tab = table.data();
  // One token a run: the conv moves the state on itself (as recurrent.go
  // launches it).
  const int own = nruns == T && K > 1;
  emu_launch(T * per, 256, [&] { conv1d_silu(cout.data(), x.data(), w.data(), conv.data(), tab, nruns, T, C, K, own); });
  if (!own) emu_launch(nruns * per, 256, [&] { conv1d_state(conv.data(), x.data(), tab, nruns, C, K); });

  std::vector<float> core((size_t)T * VH * VD, __uint_as_float(0x7fc00000u));
  GdnP p{core.data(), cout.data(), a.data(), b.data(), alog.data(), dtb.data(), rec.data(), tab, nruns, KH, VH, VD};
  const int tpr = KD > 32 ? KD / 32 : 1, rb = (VD + nt / tpr - 1) / (nt / tpr);
  const unsigned grid = nruns * VH * rb;
#define GDN_CASE(D)                                                              \
  case D:                                                                        \
    if (nt == 32)                                                                \
      emu_launch(grid, 32, [&] { gdn_recurrent_k##D##_w(p); });                  \
    else                                                                         \
      emu_launch(grid, 128, [&] { gdn_recurrent_k##D(p); });                     \
    break;
  switch (KD) {
    GDN_CASE(8)
    GDN_CASE(16)
    GDN_CASE(32)
    GDN_CASE(64)
    GDN_CASE(128)
    GDN_CASE(256)
    default: fprintf(stderr, "key head dim %d\n", KD); return 2;
  }

  const int rows = T * VH;
  std::vector<float> normed((size_t)rows * VD, __uint_as_float(0x7fc00000u));
  emu_launch((rows + 7) / 8, 256, [&] { rmsnorm_gated(normed.data(), core.data(), z.data(), nw.data(), rows, VD, eps); });
  std::vector<float> sig(core.size(), __uint_as_float(0x7fc00000u));
  emu_launch(3, 256, [&] { mul_sigmoid(sig.data(), core.data(), gate.data(), (long)core.size()); });
  const int width = C / 2 - 2;
  std::vector<float> sl((size_t)T * 2 * width, __uint_as_float(0x7fc00000u));
  emu_launch(T, 64, [&] { slice_cols(sl.data(), x.data(), C, 2, 1, width); });

  writev(cout), writev(conv), writev(core), writev(rec), writev(normed), writev(sig), writev(sl);
  return 0;
}
