// Runs kernels/mlp.cu's mlp_fused under the CPU emulation (emu.h,
// prelude_emu.h), for mlp_emu_test.go. stdin (int32 little-endian): I, F,
// G (blocks), NW (warps a block), resid (0: no residual sum), withH (0: h
// not written), seed (the blocks' order: 0 in index order); then x [I] f32,
// nw [I] f32, gate, up and down transposed [F·I] bf16 each, resid [I] f32.
// stdout, for each of two launches in a row: gate, up, act [F], m, sum, h
// [I] f32 (NaN where not written), then acc [I] f32 and the counter (int32),
// which each launch must leave zero.
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "mlp.cu"

int main() {
  int hd[7];
  readn(hd, sizeof hd);
  const int I = hd[0], F = hd[1], G = hd[2], NW = hd[3], withResid = hd[4], withH = hd[5];
  const unsigned seed = (unsigned)hd[6];
  std::vector<float> x(I), nw(I), resid(I);
  std::vector<u16> wg((size_t)F * I), wu((size_t)F * I), wdt((size_t)F * I);
  readn(x.data(), 4 * I);
  readn(nw.data(), 4 * I);
  readn(wg.data(), 2 * wg.size());
  readn(wu.data(), 2 * wu.size());
  readn(wdt.data(), 2 * wdt.size());
  readn(resid.data(), 4 * I);
  const float nan = __uint_as_float(0x7fc00000u);
  std::vector<float> acc(I, 0.f);
  int cnt = 0;
  for (int run = 0; run < 2; run++) {
    std::vector<float> gate(F, nan), up(F, nan), act(F, nan), m(I, nan), sum(I, nan), h(I, nan);
    MlpP p{};
    p.x = x.data(), p.nw = nw.data(), p.h = withH ? h.data() : nullptr;
    p.wg = wg.data(), p.wu = wu.data(), p.wdt = wdt.data();
    p.gate = gate.data(), p.up = up.data(), p.act = act.data(), p.m = m.data();
    p.resid = withResid ? resid.data() : nullptr, p.sum = sum.data();
    p.acc = acc.data(), p.cnt = &cnt;
    p.I = I, p.F = F, p.eps = 1e-6f;
    emu_launch3(G, 1, 1, 32 * NW, seed + run, [=] { mlp_fused(p); });
    for (auto* v : {&gate, &up, &act, &m, &sum, &h}) fwrite(v->data(), 4, v->size(), stdout);
    fwrite(acc.data(), 4, acc.size(), stdout);
    fwrite(&cnt, 4, 1, stdout);
  }
  return 0;
}
