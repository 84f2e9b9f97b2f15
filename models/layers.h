/* layers.h — what every backend's layers share, whatever memory they run
 * in: the layouts of features, graphs and bases, the fibers, the shapes of
 * the convolution and the attention, the sizes of what the layers save, and
 * the arena that holds a step's memory. Backend-neutral (no BLAS, no CUDA):
 * the model (models/se3.c), the CPU backend (models/cpu/) and the CUDA
 * backend (models/cuda/) include it. The layers' semantics are written once,
 * beside the CPU functions (models/cpu/nn.h); the backend table
 * (models/backend.h) lists them.
 *
 * Conventions shared by every layer
 * ---------------------------------
 * real        float in the product, double in the gradient tests (real.h).
 * Fibers      a feature of degree d has 2d+1 components; a fiber lists the
 *             channels of each degree 0..NN_MAX_DEG (0 = degree absent).
 * Node        one array per degree: x[d] of N x (2d+1) x ch[d], channels
 * features    innermost: element (n, m, c) at (n (2d+1) + m) ch[d] + c, with
 *             m the order index of so3.h (m = -d..d at m + d). A degree-1
 *             component triple is (y, z, x) (so3.h).
 * Edge        the same per edge (E instead of N) for per-edge messages.
 * features
 * Graphs      a batch is graphs concatenated: nodes 0..N-1, edges sorted by
 *             target (dst) then source, with CSR offsets in_start[0..N]: the
 *             incoming edges of node n are in_start[n] .. in_start[n+1]-1.
 *             graph_start[0..G] cuts the nodes into molecules.
 * Bases       per edge basis_plan.per_edge reals in the fused layout of
 *             models/basis.h (pairs k-major; F_k = rows (l, i_l, J') x (2k+1)
 *             at plan.offset[k][0]); the layers take real arrays (decoded or
 *             recomputed, never the stored encoding).
 * Gradients   backward functions ADD into parameter gradients (so a batch
 *             can be accumulated) and OVERWRITE input gradients, unless a
 *             comment says otherwise. A NULL input-gradient pointer means
 *             "not needed".
 * Threads     OpenMP over nodes or edges; every reduction is in a fixed
 *             order, so results do not depend on scheduling. The forward
 *             pass does not depend on the thread count either (nn_mm cuts
 *             BLAS products at multiples of its tiles); a backward sums
 *             the threads' parameter gradients in thread order, so a
 *             gradient is fixed for a thread count.
 */
#ifndef SE3_LAYERS_H
#define SE3_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "models/basis.h"
#include "models/real.h"

#define NN_MAX_DEG 3 /* degrees 0..3 (num_degrees 4), the QM9 setting */

/* ---- arena -----------------------------------------------------------------
 * Memory of one step (activations, gradients), kept across steps: reset
 * makes it all free again without giving it back. Zero-initialise the
 * struct to start. Allocations are 64-byte aligned; NULL when out of memory.
 * The arena's bookkeeping is on the host; its blocks may be device memory. */
struct nn_arena_block {
  char *p;
  size_t cap, used;
};
struct nn_arena {
  struct nn_arena_block *blocks;
  int n, cap_blocks, cur;
  size_t peak;  /* most bytes in use at once so far */
  size_t limit; /* most bytes in use at once allowed, 0 for no limit: an
                   allocation past it fails as if memory had run out */
  /* Where blocks come from: the backend's memory (models/backend.h sets
   * these); NULL for host memory (aligned_alloc and free). */
  void *(*block_alloc)(size_t bytes);
  void (*block_free)(void *p);
};
void *nn_arena_alloc(struct nn_arena *a, size_t bytes);
void nn_arena_reset(struct nn_arena *a);
void nn_arena_free(struct nn_arena *a);
size_t nn_arena_bytes(const struct nn_arena *a); /* held, in bytes */
size_t nn_arena_peak(const struct nn_arena *a);  /* most in use at once, in bytes */
/* A position to go back to: everything allocated after the mark is free
 * again after the release (for temporaries inside a step). */
struct nn_arena_mark {
  int cur;
  size_t used;
};
struct nn_arena_mark nn_arena_mark(const struct nn_arena *a);
void nn_arena_release(struct nn_arena *a, struct nn_arena_mark m);
#define NN_DIM(d) (2 * (d) + 1)

struct nn_fiber {
  int ch[NN_MAX_DEG + 1]; /* channels per degree; 0 = absent */
};

/* reals per node (or edge) of a fiber: sum_d ch[d] (2d+1) */
int nn_fiber_width(const struct nn_fiber *f);

/* ---- sizes and layouts the layers agree on ------------------------------------
 * (the layers' sections of models/cpu/nn.h say what each holds) */
size_t nn_norm_save_size(int N, int C);

size_t nn_radial_params(int in, int H, int out);
size_t nn_radial_save_size(int E, int H);
const real *nn_radial_s2(const real *save, int E, int H);
size_t nn_radial_w3(int in, int H); /* offset of W3 in the block */

struct nn_conv_shape {
  struct nn_fiber fin, fout;
  const struct basis_plan *plan;
  int N, E;
  const int32_t *src, *in_start; /* E sources; N + 1 CSR offsets by target */
};
size_t nn_conv_radial_size(const struct nn_fiber *fin, const struct nn_fiber *fout);
/* Floating-point operations of one edge's forward: R (2H per entry), its
 * contraction with the basis-transformed inputs, and the basis transform. */
double nn_conv_flops(const struct nn_fiber *fin, const struct nn_fiber *fout, const struct basis_plan *plan, int H);

struct nn_attn_shape {
  struct nn_fiber fk, fv;
  int heads, N, E;
  const int32_t *in_start; /* N + 1 CSR offsets by target (edges sorted by dst) */
  const real *w;           /* E edge weights, or NULL for all 1 */
};

/* The radial network's parameter block (nn.h): W1 (H x in), b1, g1, be1
 * (H each), W2 (H x H), b2, g2, be2 (H each), W3 (out x H); offsets in
 * reals from the block's start. */
struct nn_radial_offsets {
  size_t W1, b1, g1, be1, W2, b2, g2, be2, W3, n;
};
static inline struct nn_radial_offsets nn_radial_offsets(int in, int H, int out) {
  struct nn_radial_offsets o;
  size_t h = (size_t)H;
  o.W1 = 0;
  o.b1 = o.W1 + h * (size_t)in;
  o.g1 = o.b1 + h;
  o.be1 = o.g1 + h;
  o.W2 = o.be1 + h;
  o.b2 = o.W2 + h * h;
  o.g2 = o.b2 + h;
  o.be2 = o.g2 + h;
  o.W3 = o.be2 + h;
  o.n = o.W3 + (size_t)out * h;
  return o;
}
/* Columns of the convolution's radial block for output degree l (nn.h):
 * sum over input degrees k of (2 min(k,l)+1) fin.ch[k]. */
static inline int nn_conv_radial_cols(const struct nn_fiber *fin, int l) {
  int K = 0;
  for (int k = 0; k <= NN_MAX_DEG; k++)
    K += (2 * (k < l ? k : l) + 1) * fin->ch[k];
  return K;
}

/* The Adam / AdamW settings (the update: models/cpu/optim.h). */
struct nn_adam {
  double beta1, beta2, eps, weight_decay;
  int decoupled; /* 0: Adam with L2 decay in the gradient; 1: AdamW */
};

#endif
