// attn_main.cpp with two K/V tile stages (DSTAGES=2,
// INFERNIX_CUDA_ATTN_STAGES=2) instead of three. The tiles are added in the
// same order, so its output must be byte-identical to attn_main.cpp's
// (TestAttnDecodeEmulated).
#define DSTAGES 2
#include "attn_main.cpp"
