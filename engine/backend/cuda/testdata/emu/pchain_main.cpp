// Runs kernels/pchain.cu's persistent product chain under the CPU
// emulation (one block: the emulation runs blocks one after another, and a
// grid barrier needs them all at once), for pchain_emu_test.go.
// stdin (int32 little-endian): nph, then O, I, S of each phase; x0 [I_0]
// f32; each phase's weights [O·I] bf16 (padded to an even count). stdout:
// each phase's partials [S·O] f32, then the phase counters (u32, nph) and the stuck flag.
#include "emu.h"
#include "prelude_emu.h"
#include <cstdio>
#include "pchain.cu"

int main() {
  int nph;
  readn(&nph, 4);
  std::vector<PcPhase> ph(nph);
  std::vector<int> dims(3 * nph);
  readn(dims.data(), 4 * dims.size());
  std::vector<float> x0(dims[1]);
  readn(x0.data(), 4 * x0.size());
  std::vector<std::vector<u16>> w(nph);
  std::vector<std::vector<float>> out(nph);
  const float nan = __uint_as_float(0x7fc00000u);
  for (int p = 0; p < nph; p++) {
    const int O = dims[3 * p], I = dims[3 * p + 1], S = dims[3 * p + 2];
    w[p].resize(((size_t)O * I + 1) & ~(size_t)1);
    readn(w[p].data(), 2 * w[p].size());
    out[p].assign((size_t)S * O, nan);
    PcPhase& q = ph[p];
    q.w = w[p].data();
    q.out = out[p].data();
    q.O = O, q.I = I, q.S = S, q.units = (O + 1) / 2 * S;
#if PC_TMA
    if (S * PC_KC != I) {
      fprintf(stderr, "phase %d: S must be I / PC_KC\n", p);
      exit(2);
    }
    q.units = (O + PC_R - 1) / PC_R * S;
#endif
    if (p == 0) {
      q.src = x0.data(), q.srcO = I, q.srcS = 1;
    } else {
      q.src = out[p - 1].data(), q.srcO = dims[3 * (p - 1)], q.srcS = dims[3 * (p - 1) + 2];
    }
  }
  std::vector<u32> cnt(nph + 1, 0);
  const PcPhase* php = ph.data();
  u32* cp = cnt.data();
  emu_launch(1, PC_THREADS, [=] { pchain(php, 0, nph, cp, cp + nph); });
  for (int p = 0; p < nph; p++) fwrite(out[p].data(), 4, out[p].size(), stdout);
  fwrite(cnt.data(), 4, cnt.size(), stdout);
  return 0;
}
