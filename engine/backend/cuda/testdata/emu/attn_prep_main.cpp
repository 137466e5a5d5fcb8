// Runs kernels/attention.cu's decode attention on the tensor cores two ways
// under the CPU emulation, for attn_prep_emu_test.go: attn_prep then
// attn_decode_tc (what the backend launches when the prep is not folded),
// and attn_decode_tc_prep (attn_decode_tc_impl<KT, true>, the fold). Head
// dim 64, 4 query heads per KV head; blocks run in shuffled orders.
//
// stdin (int32 little-endian): kt (0 bf16, 1 f16), kvh, T, pool (cache
// blocks), zmax, chunk, ntab, half, norm (0: no QK-norm), maxpos; then pos
// [T], tokTab [T], tabs [ntab] (int32); then f32: q [T·kvh·G·HD], k and v
// [T·kvh·HD] (raw, before the norms and RoPE), qw and kw [HD], cos and sin
// [maxpos·half], scale, qeps, keps, and the cache's K and V
// [pool·kvh·64·HD] (encoded with kv_enc first). stdout, for each way in
// turn (and then both again with attn_decode_tc2's transposed products):
// out [T·kvh·G·HD] f32, q and k as left in their buffers (f32), the
// cache's K and V (u16) and the split counters [T·kvh] (int32).
#define HD 64
#define G 4
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "attention.cu"
#ifndef ATTN_DEFER_EMU
#define ATTN_DEFER_EMU 0  // 1: the folds merge through attn_merge_splits (attn_prep_opt_main.cpp)
#endif
#ifndef FOLD_BLOCKS
#define FOLD_BLOCKS(zmax, chunk) (zmax)  // attn_decode_tc_prep's grid depth (attn_prep_dyn_main.cpp: fewer, ATTN_DYN)
#endif
#ifndef FOLD_ZMAX
#define FOLD_ZMAX(zmax, chunk) (zmax)  // its partials' slots (attn_prep_acc_main.cpp: a block's, ATTN_ACC)
#endif

template <class T> static std::vector<T> readv(size_t n) {
  std::vector<T> v(n);
  readn(v.data(), sizeof(T) * n);
  return v;
}

template <int KT> static void run(const int* hdr) {
  const int kvh = hdr[1], T = hdr[2], pool = hdr[3], zmax = hdr[4], chunk = hdr[5], ntab = hdr[6], half = hdr[7];
  const bool norm = hdr[8] != 0;
  const int maxpos = hdr[9];
  const int heads = kvh * G;
  auto pos = readv<int>(T), tokTab = readv<int>(T), tabs = readv<int>(ntab);
  auto q0 = readv<float>((size_t)T * heads * HD), k0 = readv<float>((size_t)T * kvh * HD), v = readv<float>((size_t)T * kvh * HD);
  auto qw = readv<float>(HD), kw = readv<float>(HD);
  auto cosT = readv<float>((size_t)maxpos * half), sinT = readv<float>((size_t)maxpos * half);
  const auto sc = readv<float>(3);
  const float scale = sc[0], qeps = sc[1], keps = sc[2];
  const size_t nc = (size_t)pool * kvh * 64 * HD;
  auto kf = readv<float>(nc), vf = readv<float>(nc);
  std::vector<u16> kc0(nc), vc0(nc);
  for (size_t i = 0; i < nc; i++) {
    kc0[i] = kv_enc<KT>(kf[i]);
    vc0[i] = kv_enc<KT>(vf[i]);
  }
  const float nan = __uint_as_float(0x7fc00000u);
  for (int way = 0; way < 4; way++) {
    const int fold = way & 1, st = way >> 1;  // ways 2, 3: attn_decode_tc2 (ST)
    std::vector<float> q = q0, k = k0, out((size_t)T * heads * HD, nan), part((size_t)T * heads * zmax * PART_LD, nan);
    std::vector<u16> kc = kc0, vc = vc0;
    std::vector<int> cnt((size_t)T * kvh, 0);
    if (!fold) {
      PrepP p{q.data(), k.data(), v.data(), norm ? qw.data() : 0, norm ? kw.data() : 0, half > 0 ? cosT.data() : 0, sinT.data(),
              pos.data(), tokTab.data(), tabs.data(), kc.data(), vc.data(), T, heads, kvh, half, qeps, keps};
      emu_launch((T * (heads + 2 * kvh) + PREP_WARPS - 1) / PREP_WARPS, PREP_WARPS * 32, [=] { attn_prep_impl<KT>(p); });
      const u16 *kp = kc.data(), *vp = vc.data();
      const float* qp = q.data();
      float *op = out.data(), *pp = part.data();
      int* cp = cnt.data();
      const int *posp = pos.data(), *ttp = tokTab.data(), *tbp = tabs.data();
      emu_launch3(kvh, T, zmax, NT, 5, [=] {
        if (st) {
          attn_decode_tc_impl<KT, false, true>(kp, vp, qp, op, pp, cp, ttp, posp, tbp, kvh, scale, zmax, chunk);
        } else {
          attn_decode_tc_impl<KT>(kp, vp, qp, op, pp, cp, ttp, posp, tbp, kvh, scale, zmax, chunk);
        }
      });
    } else {
      DecodePrepP p{kc.data(), vc.data(), q.data(), out.data(), part.data(), cnt.data(), tokTab.data(), pos.data(), tabs.data(),
                    k.data(), v.data(), norm ? qw.data() : 0, norm ? kw.data() : 0, half > 0 ? cosT.data() : 0, sinT.data(),
                    kvh, zmax, chunk, half, scale, qeps, keps};
      p.deferMerge = ATTN_DEFER_EMU && zmax > 1;  // as the host: one split per token needs no merge
      if (!st) p.zmax = FOLD_ZMAX(zmax, chunk);
      emu_launch3(kvh, T, st ? zmax : FOLD_BLOCKS(zmax, chunk), NT, 13, [=] {
        if (st) {
          attn_decode_tc_impl<KT, true, true>(p.kc, p.vc, p.q, p.out, p.part, p.cnt, p.tokTab, p.pos, p.tabs, p.kvh, p.scale,
                                              p.zmax, p.chunk, &p);
        } else {
          attn_decode_tc_impl<KT, true>(p.kc, p.vc, p.q, p.out, p.part, p.cnt, p.tokTab, p.pos, p.tabs, p.kvh, p.scale, p.zmax,
                                        p.chunk, &p);
        }
      });
      if (p.deferMerge) {
        float* op = out.data();
        const float* pp = part.data();
        const int* posp = pos.data();
        const int mz = p.zmax;
        emu_launch3(heads, T, (HD + 31) / 32, 32, 17, [=] { attn_merge_splits(op, pp, posp, heads, mz, chunk); });
      }
    }
    fwrite(out.data(), 4, out.size(), stdout);
    fwrite(q.data(), 4, q.size(), stdout);
    fwrite(k.data(), 4, k.size(), stdout);
    fwrite(kc.data(), 2, kc.size(), stdout);
    fwrite(vc.data(), 2, vc.size(), stdout);
    fwrite(cnt.data(), 4, cnt.size(), stdout);
  }
}

int main() {
  int hdr[10];
  readn(hdr, sizeof hdr);
  if (hdr[0] == 1) {
    run<DT_F16>(hdr);
  } else {
    run<DT_BF16>(hdr);
  }
  return 0;
}
