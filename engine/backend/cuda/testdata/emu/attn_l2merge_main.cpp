// attn_main.cpp with the decode merge reading the partials from L2
// (DM_SMEM=0) instead of copying them into shared memory first. Its output
// must be byte-identical to attn_main.cpp's (TestAttnDecodeEmulated).
#define DM_SMEM 0
#include "attn_main.cpp"
