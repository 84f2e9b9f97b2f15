/* table.h — the CPU backend's table (models/backend.h). */
#ifndef SE3_CPU_TABLE_H
#define SE3_CPU_TABLE_H

#include "models/backend.h"

/* The table, ready to use (OpenBLAS set up on the first call). */
const struct nn_backend *nn_backend_cpu(void);
/* The table for a precision: fp32 (nn_backend_cpu's), or bf16 where the
 * processor has AVX512-BF16 (nn_bf16_supported): a second table, the same
 * but for the convolution's forward (nn_conv_forward_bf16). NULL with why in
 * err for any other. */
const struct nn_backend *nn_backend_cpu_precision(enum nn_precision precision, struct se3_error *err);

#endif
