// attn_merge_main.cpp with attn_merge_splits requesting every slot's
// partial before it reads the position (MS_SPEC): the results must be the
// same bits as without, the NaNs of the slots past a token's splits never
// reaching them (attn_emu_test.go, TestAttnMergeEmulated).
#define MS_SPEC 1
#include "attn_merge_main.cpp"
