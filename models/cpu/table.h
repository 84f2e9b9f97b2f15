/* table.h — the CPU backend's table (models/backend.h). */
#ifndef SE3_CPU_TABLE_H
#define SE3_CPU_TABLE_H

#include "models/backend.h"

/* The table, ready to use (OpenBLAS set up on the first call). */
const struct nn_backend *nn_backend_cpu(void);

#endif
