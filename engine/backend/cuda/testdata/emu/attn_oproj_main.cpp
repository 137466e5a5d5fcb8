// Runs kernels/attention.cu's attn_oproj (the split merge folded into the
// output projection) under the CPU emulation, with attn_merge_splits on the
// same partials for comparison, for attn_emu_test.go (TestAttnOProjEmulated).
// Head dim HD (128 unless defined first: attn_oproj64_main.cpp).
//
// stdin (int32 little-endian): heads, zmax, chunk, pos, O, resid (0: no
// residual sum), seed (the blocks' order); then the f32 partials
// [heads·zmax·PART_LD], o [heads·HD] f32 (the attention's output where its
// context is one split), W [O·heads·HD] bf16, resid [O] f32.
// stdout: attn_merge_splits's o [heads·HD]; then for each of two launches
// of attn_oproj in a row (the second with hfirst set): o [heads·HD], out
// [O], sum [O] (NaN where not written), the counters [O/OP_ROWS] int32,
// which each launch must leave zero.
#ifndef HD
#define HD 128
#endif
#define G 4
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "attention.cu"

int main() {
  int hdr[7];
  readn(hdr, sizeof hdr);
  const int heads = hdr[0], zmax = hdr[1], chunk = hdr[2], pos = hdr[3], O = hdr[4], withResid = hdr[5];
  const unsigned seed = (unsigned)hdr[6];
  std::vector<float> part((size_t)heads * zmax * PART_LD), o0((size_t)heads * HD), resid(O);
  std::vector<u16> w((size_t)O * heads * HD);
  readn(part.data(), 4 * part.size());
  readn(o0.data(), 4 * o0.size());
  readn(w.data(), 2 * w.size());
  readn(resid.data(), 4 * resid.size());
  std::vector<int> posv{pos};
  {
    std::vector<float> om = o0;
    float* op = om.data();
    const float* pp = part.data();
    const int* posp = posv.data();
    emu_launch3(heads, 1, (HD + 31) / 32, 32, 3, [=] { attn_merge_splits(op, pp, posp, heads, zmax, chunk); });
    fwrite(om.data(), 4, om.size(), stdout);
  }
  const float nan = __uint_as_float(0x7fc00000u);
  std::vector<float> scr((size_t)heads * O, nan);
  std::vector<int> cnt(O / OP_ROWS, 0);
  for (int run = 0; run < 2; run++) {
    std::vector<float> o = o0, out(O, nan), sum(O, nan);
    OProjP p{};
    p.w = w.data(), p.part = part.data(), p.pos = posv.data(), p.o = o.data(), p.out = out.data();
    p.resid = withResid ? resid.data() : nullptr, p.sum = sum.data();
    p.scr = scr.data(), p.cnt = cnt.data();
    p.heads = heads, p.zmax = zmax, p.chunk = chunk, p.O = O;
    p.hfirst = run;  // the second launch with the heads along x
    if (run == 0) {
      emu_launch3(O / OP_ROWS, heads, 1, NT, seed + run, [=] { attn_oproj(p); });
    } else {
      emu_launch3(heads, O / OP_ROWS, 1, NT, seed + run, [=] { attn_oproj(p); });
    }
    for (auto* v : {&o, &out, &sum}) fwrite(v->data(), 4, v->size(), stdout);
    fwrite(cnt.data(), 4, cnt.size(), stdout);
  }
  return 0;
}
