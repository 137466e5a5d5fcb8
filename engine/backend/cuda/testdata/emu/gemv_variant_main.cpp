// gemv_main.cpp with the fused products' other tunables (gemvf_variant.go):
// one output per warp, 8 loads in flight per lane (16 in o_proj and down),
// looped blocks asking for their next share's first weights (GF_XPF; a
// no-op prefetch here, but its rows are computed) and taking their shares
// after the first from a counter (GF_DYN; here the blocks run one after
// another, so the first takes them all), the one-wave products letting
// the next launch early (GF_TRIGGER; a no-op here). Its output must be
// byte-identical to gemv_main.cpp's (TestGemvWideEmulated).
#define GF_RW 1
#define GF_U 8
#define GF_UR 16
#define GF_XPF 1
#define GF_DYN 1
#define GF_TRIGGER 1
#include "gemv_main.cpp"
