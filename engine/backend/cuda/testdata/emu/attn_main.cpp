// Runs kernels/attention.cu's decode attention (attn_decode_impl, as
// attn_decode and attn_decode_deep instantiate it) under the CPU emulation
// (emu.h, prelude_emu.h) for a bf16 or an f16 paged KV cache, for
// attn_emu_test.go. Head dim 64 (so the deep kernel's rows are swizzled) and
// 4 query heads per KV head.
//
// stdin (int32 little-endian): kt (0 bf16, 1 f16), kvh, T, pool (cache
// blocks), zmax, chunk, ntab, nconv; then pos [T], tokTab [T], tabs [ntab]
// (int32), q [T·kvh·G·HD] f32 (unscaled), scale f32, K and V [pool·kvh·64·HD]
// f32 (stored into the cache with kv_enc, as kv_store and attn_prep do),
// conv [nconv] f32. stdout: the encoded K and V (u16 each), then for
// attn_decode (blocks in index order), attn_decode_deep, attn_decode_tc and attn_decode_tc2
// (shuffled): out
// [T·kvh·G·HD] f32 and the split counters [T·kvh] int32 (must be zero
// again); last kv_enc of conv [nconv] (u16).
#define HD 64
#define G 4
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "attention.cu"

template <int KT> static void run(int kvh, int T, int pool, int zmax, int chunk, int ntab, int nconv) {
  const int heads = kvh * G;
  std::vector<int> pos(T), tokTab(T), tabs(ntab);
  readn(pos.data(), 4 * T);
  readn(tokTab.data(), 4 * T);
  readn(tabs.data(), 4 * ntab);
  std::vector<float> q((size_t)T * heads * HD), kf((size_t)pool * kvh * 64 * HD), vf(kf.size()), conv(nconv);
  float scale;
  readn(q.data(), 4 * q.size());
  readn(&scale, 4);
  readn(kf.data(), 4 * kf.size());
  readn(vf.data(), 4 * vf.size());
  readn(conv.data(), 4 * conv.size());
  std::vector<u16> kc(kf.size()), vc(vf.size());
  for (size_t i = 0; i < kf.size(); i++) {
    kc[i] = kv_enc<KT>(kf[i]);
    vc[i] = kv_enc<KT>(vf[i]);
  }
  fwrite(kc.data(), 2, kc.size(), stdout);
  fwrite(vc.data(), 2, vc.size(), stdout);
  const float nan = __uint_as_float(0x7fc00000u);
  for (int deep = 0; deep < 4; deep++) {
    std::vector<float> out((size_t)T * heads * HD, nan), part((size_t)T * heads * zmax * PART_LD, nan);
    std::vector<int> cnt((size_t)T * kvh, 0);
    const u16 *kp = kc.data(), *vp = vc.data();
    const float* qp = q.data();
    float *op = out.data(), *pp = part.data();
    int* cp = cnt.data();
    const int *posp = pos.data(), *ttp = tokTab.data(), *tbp = tabs.data();
    if (deep == 3) {
      emu_launch3(kvh, T, zmax, NT, 13, [=] {
        attn_decode_tc_impl<KT, false, true>(kp, vp, qp, op, pp, cp, ttp, posp, tbp, kvh, scale, zmax, chunk);
      });
    } else if (deep == 2) {
      emu_launch3(kvh, T, zmax, NT, 11, [=] {
        attn_decode_tc_impl<KT>(kp, vp, qp, op, pp, cp, ttp, posp, tbp, kvh, scale, zmax, chunk);
      });
    } else if (deep) {
      emu_launch3(kvh, T, zmax, DNT_DEEP, 7, [=] {
        attn_decode_impl<DNT_DEEP, DSTAGES_DEEP, DSWZ_DEEP, KT>(kp, vp, qp, op, pp, cp, ttp, posp, tbp, kvh, scale, zmax, chunk);
      });
    } else {
      emu_launch3(kvh, T, zmax, NT, 0, [=] {
        attn_decode_impl<NT, DSTAGES, 0, KT>(kp, vp, qp, op, pp, cp, ttp, posp, tbp, kvh, scale, zmax, chunk);
      });
    }
    fwrite(out.data(), 4, out.size(), stdout);
    fwrite(cnt.data(), 4, cnt.size(), stdout);
  }
  for (int i = 0; i < nconv; i++) {
    const u16 h = kv_enc<KT>(conv[i]);
    fwrite(&h, 2, 1, stdout);
  }
}

int main() {
  int hd[8];
  readn(hd, sizeof hd);
  if (hd[0] == 1) {
    run<DT_F16>(hd[1], hd[2], hd[3], hd[4], hd[5], hd[6], hd[7]);
  } else {
    run<DT_BF16>(hd[1], hd[2], hd[3], hd[4], hd[5], hd[6], hd[7]);
  }
  return 0;
}
