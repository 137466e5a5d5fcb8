// Runs kernels/moe.cu's moe_gateup and moe_down (or, grouped, moe_plan,
// moe_gateup_g, moe_down_g and moe_combine_g) under the CPU emulation
// (emu.h, prelude_emu.h), and kernels/gemv.cu's moe_route on the same
// logits, for moe_fused_emu_test.go. stdin (int32 little-endian): T, E, K,
// H, inter, sinter (0: no shared expert), norm, gated (the shared expert
// has a gate weight), resid, grouped, grid (the grouped kernels' looped
// grid); then logits [T·E] f32, x [T·H] f32, the
// experts' gate and up [E·inter·H] and down [E·H·inter] as bf16 bits,
// the shared expert's gate and up [sinter·H] and down [H·sinter] (if
// any), its gate weight [H] f32 (if gated), aux [T·H] f32. stdout:
// moe_gateup's topIdx [T·K] int32 and topW [T·K] f32, act [T·(K+S)·ldA],
// z [T], moe_down's out [T·H] and sum [T·H] (f32; every output starts as
// NaN), then moe_route's topIdx and topW.
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "gemv.cu"
#include "moe.cu"

template <class T> std::vector<T> readv(size_t n) {
  std::vector<T> v(n);
  readn(v.data(), sizeof(T) * n);
  return v;
}

int main() {
  int hd[11];
  readn(hd, sizeof hd);
  const int T = hd[0], E = hd[1], K = hd[2], H = hd[3], inter = hd[4], sinter = hd[5], norm = hd[6], gated = hd[7],
            resid = hd[8], grouped = hd[9], grid = hd[10];
  const int S = sinter > 0, ldA = inter > sinter ? inter : sinter;
  auto logits = readv<float>((size_t)T * E);
  auto x = readv<float>((size_t)T * H);
  auto gate = readv<u16>((size_t)E * inter * H), up = readv<u16>((size_t)E * inter * H), down = readv<u16>((size_t)E * H * inter);
  std::vector<u16> sg, su, sd;
  std::vector<float> sgw;
  if (S) {
    sg = readv<u16>((size_t)sinter * H);
    su = readv<u16>((size_t)sinter * H);
    sd = readv<u16>((size_t)H * sinter);
  }
  if (gated) sgw = readv<float>(H);
  auto aux = readv<float>((size_t)T * H);

  std::vector<u64> pg(E), pu(E), pd(E);
  for (int e = 0; e < E; e++) {
    pg[e] = (u64)(gate.data() + (size_t)e * inter * H);
    pu[e] = (u64)(up.data() + (size_t)e * inter * H);
    pd[e] = (u64)(down.data() + (size_t)e * H * inter);
  }
  const float nan = __uint_as_float(0x7fc00000u);
  std::vector<int> topIdx((size_t)T * K, -1), rIdx((size_t)T * K, -1);
  std::vector<float> topW((size_t)T * K, nan), rW((size_t)T * K, nan), act((size_t)T * (K + S) * ldA, nan), z(T, nan),
      out((size_t)T * H, nan), sum((size_t)T * H, nan);
  std::vector<u64> dsel((size_t)T * K, 0);
  const int MS = T * K < E ? T * K : E;
  std::vector<int> plan(3 + 2 * MS + T * K, -7);
  std::vector<float> y((size_t)T * (K + S) * H, nan);

  MoeP p{};
  p.logits = logits.data();
  p.x = x.data();
  p.gate = pg.data();
  p.up = pu.data();
  p.down = pd.data();
  if (S) {
    p.sgate = sg.data();
    p.sup = su.data();
    p.sdown = sd.data();
  }
  if (gated) p.sgw = sgw.data();
  p.act = act.data();
  p.topIdx = topIdx.data();
  p.topW = topW.data();
  p.dsel = dsel.data();
  p.z = z.data();
  p.out = out.data();
  p.aux = aux.data();
  p.sum = sum.data();
  p.T = T, p.E = E, p.K = K, p.H = H, p.inter = inter, p.sinter = sinter, p.ldA = ldA, p.norm = norm;
  p.nbR = (inter + 7) / 8, p.nbS = (sinter + 7) / 8, p.resid = resid;
  p.plan = plan.data();
  p.y = y.data();
  if (grouped) {
    emu_launch(1, 256, [=] { moe_plan(p); });
    emu_launch(grid, 256, [=] { moe_gateup_g(p); });
    emu_launch(grid, 256, [=] { moe_down_g(p); });
    emu_launch((T * H + 255) / 256, 256, [=] { moe_combine_g(p); });
  } else {
    emu_launch(T * (K * p.nbR + S * p.nbS), 256, [=] { moe_gateup(p); });
    for (size_t i = 0; i < dsel.size(); i++) {
      if (topIdx[i] < 0 || topIdx[i] >= E || dsel[i] != pd[topIdx[i]]) {
        fprintf(stderr, "dsel[%zu] is not expert %d's down weight\n", i, topIdx[i]);
        return 3;
      }
    }
    emu_launch(T * ((H + 3) / 4), 256, [=] { moe_down(p); });
  }
  float *L = logits.data(), *RW = rW.data();
  int* RI = rIdx.data();
  emu_launch(T, 32, [=] { moe_route(L, RI, RW, T, E, K, norm); });
  fwrite(topIdx.data(), 4, topIdx.size(), stdout);
  fwrite(topW.data(), 4, topW.size(), stdout);
  fwrite(act.data(), 4, act.size(), stdout);
  fwrite(z.data(), 4, z.size(), stdout);
  fwrite(out.data(), 4, out.size(), stdout);
  fwrite(sum.data(), 4, sum.size(), stdout);
  fwrite(rIdx.data(), 4, rIdx.size(), stdout);
  fwrite(rW.data(), 4, rW.size(), stdout);
  return 0;
}
