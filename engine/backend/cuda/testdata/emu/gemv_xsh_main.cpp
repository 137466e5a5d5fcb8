// gemv_main.cpp with GF_XSH: a looped product's warps request the next
// share's first chunks before this share's reduction, 3 loads a lane and
// row (an uneven count: the slices' tails end mid-batch). Its output must be
// byte-identical to gemv_main.cpp's (TestGemvWideEmulated).
#define GF_XSH 1
#define GF_U 3
#include "gemv_main.cpp"
