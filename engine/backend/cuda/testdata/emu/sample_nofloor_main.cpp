// sample_main.cpp with kernels/sample.cu as it was before run 40, without
// the selections' floors (INFERNIX_CUDA_SAMPLE_FLOOR=0: SEL_FLOOR=0,
// HIST_ANY=0), which must choose what the default build chooses
// (sample_emu_test.go).
#define SEL_FLOOR 0
#define HIST_ANY 0
#include "sample_main.cpp"
