// attn_prep_main.cpp with the opt-in paths of kernels/attention.cu: the
// merge copying the splits' sums with cp.async (DM_ASYNC, here in rounds of
// 4 splits, so that position 700's 11 splits take three; the separate
// prep + attention ways), the fold's split of the new position loading its
// tiles first (ATTN_NEWROW), and the folds' merge by attn_merge_splits
// (INFERNIX_CUDA_ATTN_DEFER; q is then not written back), with the fold's
// first tiles requested before the wait and the merge's triggers moved
// (ATTN_EARLY, DEFER_LATE, MS_TRIGGER), the merge's sums requested 4
// splits at a time (MS_BATCH, so that 11 splits take three rounds) and the
// warps' output sums in unpadded rows (OW_PAD 0, as before run 20). Their
// results must be the defaults' bit for bit (attn_prep_emu_test.go).
#define DM_ASYNC 1
#define DM_ZC_MAX 4
#define ATTN_NEWROW 1
#define ATTN_DEFER_EMU 1
#define ATTN_EARLY 1
#define DEFER_LATE 1
#define MS_TRIGGER 0
#define MS_BATCH 4
#define OW_PAD 0
#include "attn_prep_main.cpp"
