// gemv_main.cpp with the weights copied into shared memory in bulk
// (GF_TMA=1; 3 stages of 256 elements, so that the test's short rows take
// several chunks and a partial last one). Its output must be
// byte-identical to gemv_main.cpp's (TestGemvWideEmulated).
#define GF_TMA 1
#define GF_TS 3
#define GF_TC 256
#include "gemv_main.cpp"
