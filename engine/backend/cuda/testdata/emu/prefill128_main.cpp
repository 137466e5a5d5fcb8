// prefill_main.cpp with 128-row tiles (8 warps a block; INFERNIX_CUDA_PREFILL_ROWS=128).
#define PF_ROWS 128
#include "prefill_main.cpp"
