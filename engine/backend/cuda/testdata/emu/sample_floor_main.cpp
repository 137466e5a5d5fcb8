// sample_main.cpp with kernels/sample.cu's opt-in selection floors
// (INFERNIX_CUDA_SAMPLE_FLOOR=1: SEL_FLOOR=2, HIST_ANY=1), which must
// choose what the default build chooses (sample_emu_test.go).
#define SEL_FLOOR 2
#define HIST_ANY 1
#include "sample_main.cpp"
