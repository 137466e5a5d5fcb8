// Runs kernels/prefill.cu's tensor-core prefill attention (attn_prefill,
// bf16 cache) under the CPU emulation (emu.h, prelude_emu.h: ldmatrix and
// mma.sync emulated), for attn_emu_test.go: it checks the emulation's
// tensor-core semantics against a kernel already verified on the GPU, and
// the kernel itself. Head dim 64, 4 query heads per KV head.
//
// stdin (int32 little-endian): kvh, T, pool, ntab, ntiles; then pos [T],
// tokTab [T], tabs [ntab], tiles [2·ntiles] (int32), q [T·kvh·G·HD] f32,
// scale f32, K and V [pool·kvh·64·HD] f32 (stored as bf16). stdout: out
// [T·kvh·G·HD] f32.
#define HD 64
#define G 4
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "prefill.cu"

int main() {
  int hd[5];
  readn(hd, sizeof hd);
  const int kvh = hd[0], T = hd[1], pool = hd[2], ntab = hd[3], ntiles = hd[4], heads = kvh * G;
  std::vector<int> pos(T), tokTab(T), tabs(ntab), tiles(2 * ntiles);
  readn(pos.data(), 4 * T);
  readn(tokTab.data(), 4 * T);
  readn(tabs.data(), 4 * ntab);
  readn(tiles.data(), 8 * ntiles);
  std::vector<float> q((size_t)T * heads * HD), kf((size_t)pool * kvh * 64 * HD), vf(kf.size());
  float scale;
  readn(q.data(), 4 * q.size());
  readn(&scale, 4);
  readn(kf.data(), 4 * kf.size());
  readn(vf.data(), 4 * vf.size());
  std::vector<u16> kc(kf.size()), vc(vf.size());
  for (size_t i = 0; i < kf.size(); i++) {
    kc[i] = kv_enc<DT_BF16>(kf[i]);
    vc[i] = kv_enc<DT_BF16>(vf[i]);
  }
  std::vector<float> out(q.size(), __uint_as_float(0x7fc00000u));
  const u16 *kp = kc.data(), *vp = vc.data();
  const float* qp = q.data();
  float* op = out.data();
  const int *posp = pos.data(), *ttp = tokTab.data(), *tbp = tabs.data(), *tlp = tiles.data();
  emu_launch3(kvh, ntiles, 1, PF_THREADS, 5, [=] { attn_prefill(kp, vp, qp, op, tlp, ttp, posp, tbp, kvh, scale); });
  fwrite(out.data(), 4, out.size(), stdout);
  return 0;
}
