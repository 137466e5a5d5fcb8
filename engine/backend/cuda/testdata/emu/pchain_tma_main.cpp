// pchain_main.cpp with the weights streamed by bulk copies (PC_TMA=1;
// 1,024-column stages of 4 rows, 3 of them, so that slices and the ring
// wrap often). The harness's S must be I / PC_KC.
#define PC_TMA 1
#define PC_KC 1024
#define PC_ST 3
#include "pchain_main.cpp"
