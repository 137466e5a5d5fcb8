// attn_prep_main.cpp with the fold's units handed out (ATTN_DYN, the
// merge deferred): where a split is 128 positions or more, 2 blocks per
// (token, KV head) take its units (position 700's 6), asking a counter for
// the next, and the blocks' shuffled orders decide which block takes which;
// else as many blocks as splits. The results must be the defaults' bit for
// bit, and every counter zero again (attn_prep_emu_test.go).
#define ATTN_DYN 1
#define ATTN_DEFER_EMU 1
#define FOLD_BLOCKS(zmax, chunk) ((chunk) >= 128 ? 2 : (zmax))
#include "attn_prep_main.cpp"
