// Runs kernels/sample.cu's sample_rows under the CPU emulation (emu.h).
// stdin: int32 rows, V, threads, words; then the words (parameters and
// lists, as engine/backend/cuda/sample.go stages them) and rows×V float32
// logits. stdout: rows × SampleOut, then the logits as the kernel left
// them. Little-endian, as the test machine is.
#include "emu.h"
#include <cstdio>
#include "sample.cu"

int main() {
  int hdr[4];
  readn(hdr, sizeof hdr);
  const int rows = hdr[0], V = hdr[1], nt = hdr[2], nwords = hdr[3];
  std::vector<int> words(nwords);
  readn(words.data(), 4 * (size_t)nwords);
  std::vector<float> logits((size_t)rows * V);
  readn(logits.data(), 4 * logits.size());
  std::vector<SampleOut> out(rows);
  const SampleParams* P = (const SampleParams*)words.data();
  int* lists = words.data();
  float* L = logits.data();
  SampleOut* O = out.data();
  emu_launch(rows, nt, [=] { sample_rows(P, lists, L, V, O); });
  fwrite(out.data(), sizeof(SampleOut), out.size(), stdout);
  fwrite(logits.data(), 4, logits.size(), stdout);
  return 0;
}
