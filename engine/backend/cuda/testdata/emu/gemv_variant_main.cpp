// gemv_main.cpp with the fused products' other tunables (gemvf_variant.go):
// one output per warp and 8 loads in flight per lane. Its output must be
// byte-identical to gemv_main.cpp's (TestGemvWideEmulated).
#define GF_RW 1
#define GF_U 8
#include "gemv_main.cpp"
