// attn_prep_dyn_main.cpp with ATTN_ACC: a block adds every unit it takes
// into one partial, at its own slot, and attn_merge_splits merges the
// blocks' slots (as many as the blocks where the units outnumber them).
// The output must be the defaults' within the tensor cores' rounding (the
// probabilities are rounded against another running maximum), everything
// else the same bits, and every counter zero again (attn_prep_emu_test.go).
#define ATTN_DYN 1
#define ATTN_ACC 1
#define ATTN_DEFER_EMU 1
#define FOLD_BLOCKS(zmax, chunk) ((chunk) >= 128 ? 2 : (zmax))
#define FOLD_ZMAX(zmax, chunk) FOLD_BLOCKS(zmax, chunk)
#include "attn_prep_main.cpp"
