/* comm_check.c — the background sums of common/comm.h and the bucketed
 * backward of models/model.h on real processes: run under
 * `mpirun -np N comm_check` (ctest runs N = 2 and 3). Not Criterion: MPI
 * wants one process per rank, not Criterion's forked workers.
 *
 * Checks, on every rank, each one able to fail:
 *  - an array summed in buckets started one by one (comm_sum_start, the
 *    ranges as a backward finishes them: from the end down), while this
 *    thread computes, equals comm_sum_f32 of the whole array bit for bit;
 *  - the same with scatter: this process's slice equals comm_reduce_scatter's
 *    and the rest of the array is left alone;
 *  - a model's backward with its gradient summed bucket by bucket
 *    (se3_net_backward_sum) equals se3_net_backward then se3_net_allreduce bit
 *    for bit, with buckets of every layer and with one bucket;
 *  - a rank whose backward fails (no forward kept) and a rank with nothing
 *    to add (dout NULL) still join every bucket's sum: the others finish
 *    with their own gradients, and the failing one says why.
 * Prints one line a check and "N passed, N failed" from rank 0; exits 1 when
 * any rank failed a check. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/comm.h"
#include "models/device.h"
#include "models/model.h"
#include "models/se3.h"

static struct se3_comm *C;
static int rank, size, passed, failed;

static void check(int ok, const char *what) {
  /* every rank's verdict, summed: the check passes where all passed */
  double bad = !ok;
  if (comm_sum_f64(C, &bad, 1)) {
    fprintf(stderr, "comm_check: MPI failed\n");
    comm_abort(C, 1);
  }
  if (bad == 0)
    passed++;
  else
    failed++;
  if (rank == 0) printf("%s %s%s\n", bad == 0 ? "ok  " : "FAIL", what, bad == 0 ? "" : " (on some rank)");
}

static uint64_t rs;
static float rnd(void) {
  rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(rs >> 11) / 9007199254740992.0 * 2 - 1);
}

/* Some work for this thread while the sums run. */
static double busy_work(int n) {
  double s = 0;
  for (int i = 1; i <= n; i++)
    s += sin((double)i) / i;
  return s;
}

static void check_arrays(size_t n) {
  float *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref), *y = malloc(n * sizeof *y),
        *z = malloc(n * sizeof *z);
  rs = 1234 + (uint64_t)rank * 77;
  for (size_t i = 0; i < n; i++)
    x[i] = rnd() * (float)(1 + i % 7);
  memcpy(ref, x, n * sizeof *x);
  memcpy(y, x, n * sizeof *x);
  memcpy(z, x, n * sizeof *x);
  int ok = comm_sum_f32(C, ref, n) == 0 && comm_reduce_scatter(C, z, n, 4) == 0;
  /* buckets from the end down, of uneven sizes, one of a single element */
  size_t cuts[] = {n, n - n / 3, n / 2 + 1, n / 2, n / 5, 0};
  int nc = (int)(sizeof cuts / sizeof *cuts);
  float *b = malloc(n * sizeof *b);
  memcpy(b, x, n * sizeof *x);
  double sink = 0;
  for (int k = 0; k + 1 < nc; k++) {
    ok &= comm_sum_start(C, b, n, cuts[k + 1], cuts[k], 4, 0) == 0;
    sink += busy_work(20000); /* the "backward" of the next layer */
    ok &= comm_sum_start(C, y, n, cuts[k + 1], cuts[k], 4, 1) == 0;
  }
  double busy = -1;
  ok &= comm_sum_wait(C, &busy) == 0 && busy >= 0 && sink != 0;
  char what[160];
  snprintf(what, sizeof what, "%zu reals in 5 buckets summed in the background = comm_sum_f32 bit for bit", n);
  check(ok && memcmp(b, ref, n * sizeof *b) == 0, what);
  size_t lo, hi;
  comm_slice(C, n, &lo, &hi);
  int same = memcmp(y + lo, z + lo, (hi - lo) * sizeof *y) == 0 && memcmp(y + lo, ref + lo, (hi - lo) * sizeof *y) == 0;
  int kept = memcmp(y, x, lo * sizeof *y) == 0 && memcmp(y + hi, x + hi, (n - hi) * sizeof *y) == 0;
  snprintf(what, sizeof what, "%zu reals in 5 buckets, scattered: this slice = comm_reduce_scatter's, the rest kept",
           n);
  check(same && kept, what);
  free(x), free(ref), free(y), free(z), free(b);
}

/* A batch of 3 molecules with random features and a few edges each. */
static void make_batch(struct se3_batch_buf *bb, const struct se3_model *m) {
  const struct se3_config *c = &m->cfg;
  se3_batch_buf_init(bb, c->node_in, c->edge_in);
  rs = 99; /* the same molecules on every rank */
  for (int g = 0; g < 3; g++) {
    int n = 4 + g, e = 0;
    float node[16 * 8], edge[64 * 8], rel[64 * 3];
    int32_t src[64], dst[64];
    for (int i = 0; i < n * c->node_in; i++)
      node[i] = rnd() > 0 ? 1.0f : 0.0f;
    for (int d = 0; d < n; d++)
      for (int s = 0; s < n; s++) {
        if (s == d || (s + d + g) % 3 == 0) continue;
        src[e] = s;
        dst[e] = d;
        for (int k = 0; k < c->edge_in; k++)
          edge[e * c->edge_in + k] = k == c->edge_in - 1 ? 1.0f + rnd() * 0.5f : (rnd() > 0.5f ? 1.0f : 0.0f);
        for (int k = 0; k < 3; k++)
          rel[e * 3 + k] = rnd() * 1.5f;
        e++;
      }
    if (se3_batch_add(bb, n, node, e, src, dst, edge, rel)) {
      fprintf(stderr, "comm_check: se3_batch_add failed\n");
      comm_abort(C, 1);
    }
  }
  if (se3_batch_bases(bb, &m->plan)) comm_abort(C, 1);
}

/* role: 0 a normal backward, 1 no forward kept (fails), 2 nothing to add. */
static int net_backward(struct se3_net *net, const struct se3_batch *b, int role, size_t bucket, real *grad,
                        struct se3_sum_stats *st, struct se3_error *err) {
  real out[3], dout[3] = {0.5f, -1.0f, 2.0f};
  for (int i = 0; i < 3; i++)
    dout[i] *= (real)(1 + rank); /* every rank its own gradient */
  if (role != 1 && se3_net_forward(net, b, out, 1, err)) return -2;
  int rc = se3_net_backward_sum(net, role == 2 ? NULL : dout, C, bucket, st, err);
  se3_net_get(net, SE3_NET_GRAD, grad);
  return rc;
}

static void check_net(void) {
  struct se3_config cfg = {.layers = 3,
                           .degrees = 3,
                           .channels = 8,
                           .heads = 2,
                           .channels_div = 2,
                           .node_in = 5,
                           .edge_in = 6,
                           .radial_hidden = 8,
                           .mlp_hidden = 16,
                           .pool_max = 1,
                           .outputs = 1};
  struct se3_error err;
  struct se3_net *net = se3_net_create(nn_backend_host(), &cfg, 0, &err);
  if (!net || se3_net_init_params(net, 7)) {
    fprintf(stderr, "comm_check: %s\n", net ? "out of memory" : se3_error_str(&err).s);
    comm_abort(C, 1);
  }
  const struct se3_model *m = se3_net_model(net);
  size_t np = se3_net_n_params(net);
  struct se3_batch_buf bb;
  make_batch(&bb, m);
  real *ref = malloc(np * sizeof *ref), *g = malloc(np * sizeof *g), *own = malloc(np * sizeof *own);
  /* the reference: the backward, then one sum */
  real out[3], dout[3] = {0.5f, -1.0f, 2.0f};
  for (int i = 0; i < 3; i++)
    dout[i] *= (real)(1 + rank);
  int ok = se3_net_forward(net, &bb.b, out, 1, &err) == 0 && se3_net_backward(net, dout, &err) == 0;
  se3_net_get(net, SE3_NET_GRAD, own);
  ok &= se3_net_allreduce(net, C, &err) == 0;
  se3_net_get(net, SE3_NET_GRAD, ref);
  double norm = 0;
  for (size_t i = 0; i < np; i++)
    norm += (double)ref[i] * ref[i];
  check(ok && norm > 0, "a model's backward and its gradient summed after it (the reference)");

  struct se3_sum_stats st;
  ok = net_backward(net, &bb.b, 0, 1, g, &st, &err) == 0;
  char what[200];
  snprintf(what, sizeof what, "the gradient summed in %d buckets (one a layer) while the backward runs = the reference",
           st.buckets);
  check(ok && st.buckets == cfg.layers + 1 && memcmp(g, ref, np * sizeof *g) == 0, what);
  ok = net_backward(net, &bb.b, 0, (size_t)1 << 30, g, &st, &err) == 0;
  check(ok && st.buckets == 1 && memcmp(g, ref, np * sizeof *g) == 0, "in one bucket of 1 GB = the reference");
  ok = net_backward(net, &bb.b, 0, 0, g, &st, &err) == 0;
  check(ok && memcmp(g, ref, np * sizeof *g) == 0, "bucket_mb 0 (one sum after the backward) = the reference");

  /* the last rank fails its backward, or adds nothing: the others get
   * the sum of their own gradients, and everyone joined every sum */
  for (int role = 1; role <= 2; role++) {
    for (size_t bucket = 0; bucket <= 1; bucket++) { /* 0: one sum after the backward; 1 byte: a bucket a layer */
      int me = rank == size - 1 ? role : 0;
      int rc = net_backward(net, &bb.b, me, bucket, g, &st, &err);
      real *want = malloc(np * sizeof *want); /* the sum of the gradients of the ranks that have one */
      for (size_t i = 0; i < np; i++)
        want[i] = me ? 0 : own[i];
      comm_sum_f32(C, want, np);
      int good = me == 1 ? rc == -1 && strstr(se3_error_str(&err).s, "no forward pass was kept") != NULL
                         : rc == 0 && memcmp(g, want, np * sizeof *g) == 0;
      snprintf(what, sizeof what, "the last rank %s (%s): every rank joins every sum, the others get theirs",
               role == 1 ? "fails its backward" : "adds nothing", bucket ? "a bucket a layer" : "one sum");
      check(good, what);
      free(want);
    }
  }
  free(ref), free(g), free(own);
  se3_batch_buf_free(&bb);
  se3_net_free(net);
}

int main(void) {
  struct se3_error err;
  if (comm_open(&C, &err)) {
    fprintf(stderr, "comm_check: %s\n", se3_error_str(&err).s);
    return 1;
  }
  if (!C) {
    fprintf(stderr, "comm_check: run me under mpirun -np 2 (or more)\n");
    return 2;
  }
  rank = comm_rank(C);
  size = comm_size(C);
  check_arrays(1001);
  check_arrays(3000017); /* 12 MB: several pieces of work for the thread while this one computes */
  check_net();
  if (rank == 0) printf("comm_check on %d processes: %d passed, %d failed\n", size, passed, failed);
  int bad = failed > 0;
  comm_close(C);
  return bad;
}
