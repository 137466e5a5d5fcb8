// attn_oproj_main.cpp at head dim 64: 8 lanes a row, 4 rows a load.
#define HD 64
#include "attn_oproj_main.cpp"
