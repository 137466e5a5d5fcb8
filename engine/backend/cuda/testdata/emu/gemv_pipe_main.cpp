// gemv_main.cpp with the pipelined weight stream (GF_PIPE: the next chunks
// are requested before the current ones are added), 2 loads per lane and
// row, 3 in o_proj and down (an uneven count, so the slices' tails end
// mid-batch). Its output must be byte-identical to gemv_main.cpp's
// (TestGemvWideEmulated).
#define GF_PIPE 1
#define GF_U 2
#define GF_UR 3
#include "gemv_main.cpp"
