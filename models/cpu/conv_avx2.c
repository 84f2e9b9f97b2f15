/* conv_avx2.c — conv.c for x86-64-v3 (AVX2, FMA): built with
 * -march=x86-64-v3, chosen at run time by isa.c (see isa.h). */
#define SE3_ISA_VARIANT avx2
#include "models/cpu/conv.c"
