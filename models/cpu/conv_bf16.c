/* conv_bf16.c — conv.c's forward with the radial product in bf16 (conv.c,
 * SE3_CONV_BF16): built with -march=x86-64-v4 -mavx512bf16, called by
 * nn_conv_forward_bf16 (isa.c) where the processor has AVX512-BF16. Float
 * builds on x86-64 only; elsewhere this file is empty. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(SE3_REAL_F64)
#define SE3_ISA_VARIANT avx512bf16
#define SE3_CONV_BF16 1
#include "models/cpu/conv.c"
#else
typedef int conv_bf16_empty; /* ISO C wants something in a translation unit */
#endif
