/* batch.c — molecules' graphs concatenated into one batch (model.h): node
 * and edge features, sources shifted by the molecule's first node, CSR
 * offsets by target, molecule offsets, and the bases recomputed from the
 * relative positions (always: the basis stage's stored bases are not read here). */
#include <stdlib.h>
#include <string.h>

#include "models/kernels/basis.h"
#include "models/se3.h"

void se3_batch_buf_init(struct se3_batch_buf *bb, int node_in, int edge_in) {
  memset(bb, 0, sizeof *bb);
  bb->node_in = node_in;
  bb->edge_in = edge_in;
}

void se3_batch_buf_free(struct se3_batch_buf *bb) {
  free(bb->node);
  free(bb->edge);
  free(bb->basis);
  free(bb->rel);
  free(bb->src);
  free(bb->in_start);
  free(bb->graph_start);
  se3_batch_buf_init(bb, bb->node_in, bb->edge_in);
}

void se3_batch_clear(struct se3_batch_buf *bb) { bb->N = bb->E = bb->G = 0; }

static size_t next_cap(size_t cap, size_t need) {
  size_t n = cap ? cap : 64;
  while (n < need)
    n *= 2;
  return n;
}

/* realloc that leaves *p alone on failure. */
static int resize(void **p, size_t bytes) {
  void *q = realloc(*p, bytes ? bytes : 1);
  if (!q) return -1;
  *p = q;
  return 0;
}

/* Room for N nodes, E edges and G molecules; a capacity is raised only once
 * all its arrays have grown. */
static int reserve(struct se3_batch_buf *bb, size_t N, size_t E, size_t G) {
  if (N > bb->cap_n) {
    size_t c = next_cap(bb->cap_n, N);
    if (resize((void **)&bb->node, c * (size_t)bb->node_in * sizeof(real)) ||
        resize((void **)&bb->in_start, (c + 1) * sizeof(int32_t)))
      return -1;
    bb->cap_n = c;
  }
  if (E > bb->cap_e) {
    size_t c = next_cap(bb->cap_e, E);
    if (resize((void **)&bb->edge, c * (size_t)bb->edge_in * sizeof(real)) ||
        resize((void **)&bb->rel, c * 3 * sizeof(float)) || resize((void **)&bb->src, c * sizeof(int32_t)))
      return -1;
    bb->cap_e = c;
  }
  if (G > bb->cap_g) {
    size_t c = next_cap(bb->cap_g, G);
    if (resize((void **)&bb->graph_start, (c + 1) * sizeof(int32_t))) return -1;
    bb->cap_g = c;
  }
  return 0;
}

int se3_batch_add(struct se3_batch_buf *bb, int n, const float *node_feat, int e, const int32_t *src,
                  const int32_t *dst, const float *edge_feat, const float *rel_pos) {
  size_t N = (size_t)bb->N + (size_t)n, E = (size_t)bb->E + (size_t)e, G = (size_t)bb->G + 1;
  for (int k = 1; k < e; k++)
    if (dst[k] < dst[k - 1]) return -1;
  if (reserve(bb, N, E, G)) return -1;
  int32_t n0 = bb->N, e0 = bb->E;
  if (bb->G == 0) {
    bb->graph_start[0] = 0;
    bb->in_start[0] = 0;
  }
  for (size_t k = 0; k < (size_t)n * (size_t)bb->node_in; k++)
    bb->node[(size_t)n0 * (size_t)bb->node_in + k] = node_feat[k];
  for (size_t k = 0; k < (size_t)e * (size_t)bb->edge_in; k++)
    bb->edge[(size_t)e0 * (size_t)bb->edge_in + k] = edge_feat[k];
  if (e) memcpy(bb->rel + (size_t)e0 * 3, rel_pos, (size_t)e * 3 * sizeof *bb->rel);
  for (int k = 0; k < e; k++)
    bb->src[e0 + k] = n0 + src[k];
  /* CSR offsets by target: in_start[n0 + j + 1] = edges up to target j */
  int k = 0;
  for (int j = 0; j < n; j++) {
    while (k < e && dst[k] == j)
      k++;
    bb->in_start[n0 + j + 1] = e0 + k;
  }
  bb->N = (int)N;
  bb->E = (int)E;
  bb->G = (int)G;
  bb->graph_start[G] = bb->N;
  return 0;
}

int se3_batch_bases(struct se3_batch_buf *bb, const struct basis_plan *plan) {
  size_t per = plan->per_edge, need = (size_t)bb->E * per;
  if (need > bb->cap_basis) {
    if (resize((void **)&bb->basis, need * sizeof(real))) return -1;
    bb->cap_basis = need;
  }
#pragma omp parallel for schedule(static)
  for (int e = 0; e < bb->E; e++) {
    double y[SO3_SH_DIM(2 * BASIS_MAX_DEGREE)];
    nn_k_basis_harmonics(plan->max_degree, so3_sh_norm, bb->rel + (size_t)e * 3, y);
    real *out = bb->basis + (size_t)e * per;
    for (size_t k = 0; k < per; k++)
      out[k] = nn_k_basis_value(k, plan->nz_start, plan->nz_y, plan->nz_c, y);
  }
  se3_batch_geometry(bb);
  bb->b.basis = bb->basis;
  bb->b.id = 0; /* (bases given: nothing for a net to keep) */
  return 0;
}

void se3_batch_geometry(struct se3_batch_buf *bb) {
  static _Atomic uint64_t next_id = 1;
  bb->b = (struct se3_batch){bb->N,        bb->E,           bb->G,
                             bb->node,     bb->edge,        bb->src,
                             bb->in_start, bb->graph_start, NULL /* basis: the model's backend computes it */,
                             bb->rel,      next_id++};
}
