// attn_prep_main.cpp with the opt-in paths of kernels/attention.cu: the
// merge copying the splits' sums with cp.async (DM_ASYNC, here in rounds of
// 4 splits, so that position 700's 11 splits take three) and the fold's
// split of the new position loading its tiles first (ATTN_NEWROW). Their
// results must be the defaults' bit for bit (attn_prep_emu_test.go).
#define DM_ASYNC 1
#define DM_ZC_MAX 4
#define ATTN_NEWROW 1
#include "attn_prep_main.cpp"
