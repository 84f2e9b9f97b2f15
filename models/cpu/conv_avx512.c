/* conv_avx512.c — conv.c for x86-64-v4 (AVX-512 F/BW/CD/DQ/VL): built with
 * -march=x86-64-v4 -mprefer-vector-width=512, chosen at run time by isa.c
 * (see isa.h). */
#define SE3_ISA_VARIANT avx512
#include "models/cpu/conv.c"
