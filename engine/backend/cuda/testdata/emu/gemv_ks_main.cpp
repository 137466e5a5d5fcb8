// gemv_main.cpp with I split between the warps of an output group
// (gemvf_variant.go's GF_KS: 4 warps per group of q|k|v-style products, 2
// of residual ones and of gate|up (GF_KSS), one load per lane and row). Its sums are added in
// another order: TestGemvWideEmulated checks its outputs against the
// float64 reference, not against the default's bytes.
#define GF_KS 4
#define GF_KSR 2
#define GF_KSS 2
#define GF_U 1
#include "gemv_main.cpp"
