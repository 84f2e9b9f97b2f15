/* pool.c — graph pooling of degree-0 features x (N x C) to one row per
 * molecule, y (G x C): molecule g owns nodes graph_start[g] ..
 * graph_start[g+1]-1. OpenMP over molecules; each output element is one
 * thread's serial loop over the molecule's nodes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "models/cpu/nn.h"

/* y[g,c] = max over the nodes of g of x[n,c]; arg[g,c] = that n (the first
 * one on ties). A molecule without nodes gets y = 0 and arg = -1. */
void nn_pool_max_forward(real *y, int32_t *arg, const real *x, const int32_t *graph_start, int G, int C) {
#pragma omp parallel for schedule(static)
  for (int g = 0; g < G; g++) {
    int32_t n0 = graph_start[g], n1 = graph_start[g + 1];
    real *yg = y + (size_t)g * C;
    int32_t *ag = arg + (size_t)g * C;
    for (int c = 0; c < C; c++) {
      yg[c] = 0;
      ag[c] = -1;
    }
    if (n1 <= n0) continue;
    const real *x0 = x + (size_t)n0 * C;
    for (int c = 0; c < C; c++) {
      yg[c] = x0[c];
      ag[c] = n0;
    }
    for (int32_t n = n0 + 1; n < n1; n++) {
      const real *xn = x + (size_t)n * C;
      for (int c = 0; c < C; c++)
        if (xn[c] > yg[c]) { /* strict: ties stay with the first node */
          yg[c] = xn[c];
          ag[c] = n;
        }
    }
  }
}

/* dx (N x C, overwritten): dy[g,c] at the argmax node of (g, c), 0 elsewhere
 * (entries with arg < 0, empty molecules, send nothing). */
void nn_pool_max_backward(real *dx, const real *dy, const int32_t *arg, int N, int G, int C) {
  memset(dx, 0, (size_t)N * C * sizeof *dx);
#pragma omp parallel for schedule(static)
  for (int g = 0; g < G; g++) /* molecules own disjoint nodes: no two write one dx */
    for (int c = 0; c < C; c++) {
      int32_t n = arg[(size_t)g * C + c];
      if (n >= 0) dx[(size_t)n * C + c] += dy[(size_t)g * C + c];
    }
}

/* y[g,c] = mean over the nodes of g of x[n,c]; 0 for a molecule without nodes. */
void nn_pool_mean_forward(real *y, const real *x, const int32_t *graph_start, int G, int C) {
#pragma omp parallel for schedule(static)
  for (int g = 0; g < G; g++) {
    int32_t n0 = graph_start[g], n1 = graph_start[g + 1];
    real *yg = y + (size_t)g * C;
    for (int c = 0; c < C; c++)
      yg[c] = 0;
    if (n1 <= n0) continue;
    for (int32_t n = n0; n < n1; n++) {
      const real *xn = x + (size_t)n * C;
      for (int c = 0; c < C; c++)
        yg[c] += xn[c];
    }
    for (int c = 0; c < C; c++)
      yg[c] /= (real)(n1 - n0);
  }
}

/* dx[n,c] = dy[g,c] / (nodes of g) for every node n of g (overwritten: the
 * nodes graph_start[0] .. graph_start[G]-1). */
void nn_pool_mean_backward(real *dx, const real *dy, const int32_t *graph_start, int G, int C) {
#pragma omp parallel for schedule(static)
  for (int g = 0; g < G; g++) {
    int32_t n0 = graph_start[g], n1 = graph_start[g + 1];
    if (n1 <= n0) continue;
    const real *dyg = dy + (size_t)g * C;
    for (int32_t n = n0; n < n1; n++) {
      real *dxn = dx + (size_t)n * C;
      for (int c = 0; c < C; c++)
        dxn[c] = dyg[c] / (real)(n1 - n0);
    }
  }
}
