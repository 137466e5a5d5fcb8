// Runs kernels/attention.cu's merges of the decode attention's splits,
// attn_merge_splits and attn_merge_wide, under the CPU emulation, for
// attn_emu_test.go (TestAttnMergeEmulated; attn_merge_spec_main.cpp runs
// it with MS_SPEC=1, the kernels' default; this one without). Head dim 64.
//
// stdin (int32 little-endian): T, heads, zmax, chunk, then pos [T], then
// f32 partials [T·heads·zmax·PART_LD]. stdout: the two outputs
// [T·heads·HD] f32, attn_merge_splits's first (NaN where not written).
#define HD 64
#ifndef MS_SPEC
#define MS_SPEC 0
#endif
#define G 4
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "attention.cu"

int main() {
  int hdr[4];
  readn(hdr, sizeof hdr);
  const int T = hdr[0], heads = hdr[1], zmax = hdr[2], chunk = hdr[3];
  std::vector<int> pos(T);
  readn(pos.data(), 4 * T);
  std::vector<float> part((size_t)T * heads * zmax * PART_LD);
  readn(part.data(), 4 * part.size());
  const float nan = __uint_as_float(0x7fc00000u);
  for (int way = 0; way < 2; way++) {
    std::vector<float> out((size_t)T * heads * HD, nan);
    float* op = out.data();
    const float* pp = part.data();
    const int* posp = pos.data();
    if (way == 0) {
      emu_launch3(heads, T, (HD + 31) / 32, 32, 3, [=] { attn_merge_splits(op, pp, posp, heads, zmax, chunk); });
    } else {
      emu_launch3(heads, T, (HD + 31) / 32, MW_NT, 5, [=] { attn_merge_wide(op, pp, posp, heads, zmax, chunk); });
    }
    fwrite(out.data(), 4, out.size(), stdout);
  }
  return 0;
}
