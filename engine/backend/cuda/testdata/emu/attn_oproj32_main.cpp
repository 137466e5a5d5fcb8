// attn_oproj_main.cpp at head dim 32 (the small test models'): 4 lanes a
// row, 8 rows a load.
#define HD 32
#include "attn_oproj_main.cpp"
