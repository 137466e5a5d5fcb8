// pchain_main.cpp with the stream stopped at each phase boundary
// (PC_CROSS=0) and a shallower ring: the same arithmetic in the same order, so the same bytes.
#define PC_CROSS 0
#define PC_D 3
#include "pchain_main.cpp"
