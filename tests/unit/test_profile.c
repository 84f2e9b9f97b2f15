/* The profiled backend table (models/profile.h): a training step of a small
 * net on it (forward, backward, gradient clipping, AdamW) gives the same
 * predictions, gradient and updated parameters, bit for bit, as the same
 * step on the CPU table it wraps; every category of operation the step uses
 * is counted, with the number of calls the model makes, and timed; while
 * the profile is off nothing is recorded; and a device failure that one of
 * the wrapper's own syncs caught still reaches the caller's sync. Also (a
 * net on a table, as here): a net made for inference only predicts what a
 * full one does and refuses a backward pass. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "models/device.h"
#include "models/model.h"
#include "models/profile.h"
#include "tests/testutil.h"

enum { N_MOL = 3 };

/* Small, but with every kind of operation: degrees 0-3, the envelope (edge
 * weights, scaled radial features) and max pooling. */
static const struct se3_config cfg = {.layers = 2,
                                      .degrees = 4,
                                      .channels = 8,
                                      .heads = 2,
                                      .channels_div = 2,
                                      .node_in = 6, /* H C N O, other, charge */
                                      .edge_in = 6,
                                      .radial_hidden = 8,
                                      .mlp_hidden = 16,
                                      .pool_max = 1,
                                      .outputs = 1,
                                      .envelope = SE3_ENVELOPE_POLY,
                                      .bonds_kept = 1,
                                      .cutoff = 2.6f};

/* Three molecules of 7, 9 and 12 atoms (a chain of bonds, random
 * positions), as one batch of radius+bond graphs with their bases. */
static void make_batch(struct se3_batch_buf *bb, const struct se3_model *m) {
  tu_seed(2025);
  se3_batch_buf_init(bb, m->cfg.node_in, GRAPH_EDGE_WIDTH);
  const int sizes[N_MOL] = {7, 9, 12};
  for (int i = 0; i < N_MOL; i++) {
    struct mol mol;
    mol_init(&mol);
    tu_chain_mol(&mol, sizes[i], i);
    tu_batch_add_mol(bb, &mol);
    mol_free(&mol);
  }
  cr_assert_eq(se3_batch_bases(bb, &m->plan), 0);
}

/* What one training step leaves behind. */
struct step_result {
  real out[N_MOL];
  real *grad, *params;
  size_t n;
};

/* One step on be from the same initial parameters: forward, backward,
 * clipping to a norm small enough that the gradient is scaled, AdamW. */
static void train_step(const struct nn_backend *be, struct step_result *r) {
  struct se3_error err;
  struct se3_net *net = se3_net_create(be, &cfg, 0, &err);
  cr_assert_not_null(net, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_init_params(net, 7), 0);
  struct se3_batch_buf bb;
  make_batch(&bb, se3_net_model(net));
  r->n = se3_net_n_params(net);
  r->grad = malloc(r->n * sizeof *r->grad);
  r->params = malloc(r->n * sizeof *r->params);
  const real dout[N_MOL] = {1, -0.5f, 0.25f};
  cr_assert_eq(se3_net_forward(net, &bb.b, r->out, 1, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_backward(net, dout, &err), 0, "%s", se3_error_str(&err).s);
  double norm = se3_net_clip(net, 1e-3);
  cr_assert(norm > 1e-3, "the gradient's norm %g should be clipped", norm);
  se3_net_get(net, SE3_NET_GRAD, r->grad);
  struct nn_adam adam = {0.9, 0.999, 1e-8, 0.01, 1};
  se3_net_adam(net, &adam, 1, 1e-3);
  cr_assert_eq(be->sync(&err), 0, "%s", se3_error_str(&err).s);
  se3_net_get(net, SE3_NET_PARAMS, r->params);
  se3_batch_buf_free(&bb);
  se3_net_free(net);
}

Test(profile, a_profiled_step_is_the_inner_tables_step_bit_for_bit) {
  const struct nn_backend *host = nn_backend_host();
  struct step_result a, b;
  train_step(host, &a);
  struct nn_profile prof = {.on = 1};
  const struct nn_backend *pbe = nn_backend_profiled(host, &prof);
  cr_assert_neq(pbe, host);
  cr_assert_str_eq(pbe->name, host->name);
  cr_assert_eq(pbe->host_memory, host->host_memory);
  train_step(pbe, &b);
  cr_assert_eq(a.n, b.n);
  cr_assert_eq(memcmp(a.out, b.out, sizeof a.out), 0, "predictions differ");
  cr_assert_eq(memcmp(a.grad, b.grad, a.n * sizeof *a.grad), 0, "gradients differ");
  cr_assert_eq(memcmp(a.params, b.params, a.n * sizeof *a.params), 0, "updated parameters differ");

  /* the calls se3.c makes in one forward and backward of cfg */
  const int L = cfg.layers;
  cr_assert_eq(prof.calls[NN_PROF_CONV_FORWARD], L + 1); /* each block's keys and values, the final convolution */
  cr_assert_eq(prof.calls[NN_PROF_CONV_BACKWARD], L + 1);
  cr_assert_eq(prof.calls[NN_PROF_ATTENTION], 2 * L);
  cr_assert_eq(prof.calls[NN_PROF_NORM], 2 * L * cfg.degrees);
  cr_assert_eq(prof.calls[NN_PROF_RADIAL], 2 * (L + 1));
  cr_assert_eq(prof.calls[NN_PROF_POOLING], 2);
  cr_assert_eq(prof.calls[NN_PROF_OPTIMIZER], 3); /* sumsq and scale (clipping), adam_step */
  cr_assert_gt(prof.calls[NN_PROF_LINEAR], 0);
  cr_assert_gt(prof.calls[NN_PROF_GLUE], 0);
  cr_assert_eq(prof.calls[NN_PROF_BASIS], 0, "the table never builds bases: the caller adds that time");
  for (int c = NN_PROF_RADIAL; c < NN_PROF_COUNT; c++)
    cr_assert_gt(prof.seconds[c], 0, "%s: no time recorded", nn_profile_name((enum nn_prof_cat)c));
  double sum = 0;
  for (int c = 0; c < NN_PROF_COUNT; c++)
    sum += prof.seconds[c];
  cr_assert_eq(nn_profile_total(&prof), sum);

  /* off: the same step again records nothing */
  struct step_result c;
  nn_profile_clear(&prof);
  prof.on = 0;
  train_step(pbe, &c);
  cr_assert_eq(memcmp(a.grad, c.grad, a.n * sizeof *a.grad), 0, "gradients differ with the profile off");
  for (int k = 0; k < NN_PROF_COUNT; k++) {
    cr_assert_eq(prof.calls[k], 0);
    cr_assert_eq(prof.seconds[k], 0);
  }
  free(a.grad);
  free(a.params);
  free(b.grad);
  free(b.params);
  free(c.grad);
  free(c.params);
}

Test(profile, names_and_manual_additions) {
  static const char *const names[NN_PROF_COUNT] = {"basis", "radial", "conv_forward", "conv_backward", "attention",
                                                   "norm",  "linear", "pooling",      "glue",          "optimizer"};
  for (int c = 0; c < NN_PROF_COUNT; c++)
    cr_assert_str_eq(nn_profile_name((enum nn_prof_cat)c), names[c]);
  cr_assert_str_eq(nn_profile_name(NN_PROF_COUNT), "?");
  struct nn_profile prof = {0};
  nn_profile_add(&prof, NN_PROF_BASIS, 0.25);
  nn_profile_add(&prof, NN_PROF_BASIS, 0.5);
  nn_profile_add(&prof, NN_PROF_GLUE, 1);
  cr_assert_eq(prof.calls[NN_PROF_BASIS], 2);
  cr_assert_eq(prof.seconds[NN_PROF_BASIS], 0.75);
  cr_assert_eq(nn_profile_total(&prof), 1.75);
  nn_profile_clear(&prof);
  cr_assert_eq(nn_profile_total(&prof), 0);
  cr_assert_eq(prof.calls[NN_PROF_GLUE], 0);
}

/* A device whose queued work fails: its sync reports it once. */
static int fail_pending;
static int failing_sync(struct se3_error *err) {
  if (!fail_pending) return 0;
  fail_pending = 0;
  se3_error_set(err, SE3_ERR_MODEL, "kernel launch failed (test)");
  return -1;
}

Test(profile, a_failure_caught_by_the_wrappers_sync_reaches_the_callers) {
  struct nn_backend failing = *nn_backend_host();
  failing.sync = failing_sync;
  struct nn_profile prof = {.on = 1};
  const struct nn_backend *pbe = nn_backend_profiled(&failing, &prof);
  real y[4], x[4] = {-1, 2, -3, 4};
  fail_pending = 1;
  pbe->relu(y, x, 4); /* the wrapper's sync after it consumes the failure */
  cr_assert_eq(fail_pending, 0);
  cr_assert_eq(prof.calls[NN_PROF_GLUE], 1);
  struct se3_error err;
  cr_assert_eq(pbe->sync(&err), -1);
  cr_assert_str_eq(se3_error_str(&err).s, "kernel launch failed (test)");
  cr_assert_eq(pbe->sync(&err), 0, "reported once");
}

/* se3_net_inference_only: the gradient and Adam's moments given back; the
 * same predictions, bit for bit, and a backward pass is refused with a
 * message, not run on missing arrays. */
Test(profile, an_inference_only_net_predicts_what_a_full_one_does) {
  const struct nn_backend *host = nn_backend_host();
  struct se3_error err;
  struct se3_net *full = se3_net_create(host, &cfg, 0, &err), *lean = NULL;
  cr_assert_not_null(full, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_init_params(full, 11), 0);
  size_t n = se3_net_n_params(full);
  real *params = malloc(n * sizeof *params);
  se3_net_get(full, SE3_NET_PARAMS, params);
  lean = se3_net_create(host, &cfg, 0, &err);
  cr_assert_not_null(lean, "%s", se3_error_str(&err).s);
  se3_net_inference_only(lean);
  cr_assert_eq(se3_net_init_params(lean, 3), 0); /* no moments to zero: must not touch them */
  se3_net_set(lean, SE3_NET_PARAMS, params);
  struct se3_batch_buf bb;
  make_batch(&bb, se3_net_model(full));
  real a[N_MOL], b[N_MOL];
  cr_assert_eq(se3_net_forward(full, &bb.b, a, 0, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_forward(lean, &bb.b, b, 1, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(memcmp(a, b, sizeof a), 0, "an inference-only net predicts otherwise");
  const real dout[N_MOL] = {1, 1, 1};
  se3_error_clear(&err);
  cr_assert_eq(se3_net_backward(lean, dout, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "inference only"), "%s", se3_error_str(&err).s);
  free(params);
  se3_batch_buf_free(&bb);
  se3_net_free(full);
  se3_net_free(lean);
}
