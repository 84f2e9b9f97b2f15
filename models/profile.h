/* profile.h — where a step's time goes, on any backend.
 *
 * nn_backend_profiled wraps a backend's table (backend.h) in one whose every
 * operation calls the inner one and nothing else, so a net created on it
 * computes exactly what it computes on the inner table, bit for bit. While
 * the profile is on, each layer, glue and optimizer operation is bracketed
 * by the inner table's sync (so a GPU's queued work is finished before the
 * clock starts and before it stops: the times are the device's, not the
 * launch's) and its CLOCK_MONOTONIC time and one call are added to its
 * category below. Memory operations (alloc, release, upload, download,
 * copy, zero, the pipeline's host memory, copies and fences) and the
 * all-reduce only forward: their time is nobody's
 * (the caller's "other" is the step's wall time minus the categories).
 * While it is off, every operation only forwards (no sync, no clock).
 *
 * The categories, from how models/se3.c uses the table:
 *   radial         radial_hidden_forward/backward: the radial network's two
 *                  hidden layers (its last layer, W3, is fused into the
 *                  convolution and counted there)
 *   conv_forward   conv_forward (the fused TFN convolution, keys and values
 *                  and the final convolution to degree 0)
 *   conv_backward  conv_backward
 *   attention      attn_forward/backward (edge softmax and the weighted sum)
 *   norm           norm_forward/backward
 *   linear         linear_forward/backward (queries, the blocks' output
 *                  maps, the final self-interaction) and dense_forward/
 *                  backward (the MLP head after pooling)
 *   pooling        pool_max_* and pool_mean_*
 *   glue           concat_rows, split_rows, add, relu, relu_backward,
 *                  edge_weights, scale_rows (the envelope's scaling of the
 *                  radial features)
 *   optimizer      adam_step, sumsq, scale, sumsq_to, clip (gradient
 *                  clipping) and loss (the loss of a training step)
 *   basis          bases (each edge's basis from its relative position,
 *                  where the model runs); a caller that builds them on the
 *                  host (se3_batch_bases) adds that time with nn_profile_add
 *
 * One profiled table per process: it is a static table, since the table's
 * function pointers carry no context. Calling nn_backend_profiled again
 * points it at the new inner table and profile, for everything that uses it.
 * Not for concurrent use from several threads (the model calls its table
 * from one). For benchmarks and tests.
 */
#ifndef SE3_PROFILE_H
#define SE3_PROFILE_H

#include "models/backend.h"

enum nn_prof_cat {
  NN_PROF_BASIS,
  NN_PROF_RADIAL,
  NN_PROF_CONV_FORWARD,
  NN_PROF_CONV_BACKWARD,
  NN_PROF_ATTENTION,
  NN_PROF_NORM,
  NN_PROF_LINEAR,
  NN_PROF_POOLING,
  NN_PROF_GLUE,
  NN_PROF_OPTIMIZER,
  NN_PROF_COUNT
};

struct nn_profile {
  int on;                        /* 0: the profiled table only forwards */
  double seconds[NN_PROF_COUNT]; /* summed since the last nn_profile_clear */
  long calls[NN_PROF_COUNT];
};

/* The profiled table over inner, recording into prof (see above). */
const struct nn_backend *nn_backend_profiled(const struct nn_backend *inner, struct nn_profile *prof);

/* Zeroes the times and counts (`on` stays as it is). */
void nn_profile_clear(struct nn_profile *prof);
/* Adds seconds and one call to a category (for work outside the table). */
void nn_profile_add(struct nn_profile *prof, enum nn_prof_cat cat, double seconds);
/* The sum of every category's seconds. */
double nn_profile_total(const struct nn_profile *prof);
/* "basis", "radial", "conv_forward", ... (the names above); "?" otherwise. */
const char *nn_profile_name(enum nn_prof_cat cat);
/* CLOCK_MONOTONIC, in seconds. */
double nn_profile_now(void);

#endif
