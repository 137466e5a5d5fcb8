// pchain_main.cpp with the weights streamed by bulk copies (PC_TMA=1;
// stages of 8 rows × 512 columns, 3 of them, so that slices and the ring
// wrap often on small shapes). The harness's S must be I / PC_KC.
#define PC_TMA 1
#define PC_KC 512
#define PC_R 8
#define PC_ST 3
#include "pchain_main.cpp"
