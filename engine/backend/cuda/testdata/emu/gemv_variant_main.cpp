// gemv_main.cpp with the fused products' other tunables (gemvf_variant.go):
// one output per warp, 8 loads in flight per lane (16 in o_proj and
// down). Its output must be byte-identical to gemv_main.cpp's
// (TestGemvWideEmulated).
#define GF_RW 1
#define GF_U 8
#define GF_UR 16
#include "gemv_main.cpp"
