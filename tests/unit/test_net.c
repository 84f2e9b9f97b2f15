/* The stages' way to the model (models/model.h) on the CPU backend, for the
 * calls that keep a GPU busy: a training step with the loss and the
 * clipping left on the backend, the scoring pipeline (two predictions under
 * way), and the memory of the run's largest batch taken at the start. Each
 * must give the same bits as the plain calls; tests/gpu/test_gpu_train's
 * (e) and test_backend_ops check the same on a GPU. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "models/cpu/table.h"
#include "models/model.h"
#include "models/profile.h"
#include "tests/testutil.h"

static const struct se3_config cfg = {.layers = 2,
                                      .degrees = 3,
                                      .channels = 8,
                                      .heads = 2,
                                      .channels_div = 2,
                                      .node_in = 6,
                                      .edge_in = GRAPH_EDGE_WIDTH,
                                      .radial_hidden = 16,
                                      .mlp_hidden = 16,
                                      .pool_max = 1,
                                      .outputs = 1,
                                      .envelope = 2,
                                      .bonds_kept = 1,
                                      .cutoff = 2.6f};

/* A batch of `count` chain molecules of sizes from `sizes` (cycled). */
static void make_geometry(struct se3_batch_buf *bb, const struct se3_model *m, const int *sizes, int n_sizes, int count,
                          uint64_t seed) {
  tu_seed(seed);
  se3_batch_buf_init(bb, m->cfg.node_in, GRAPH_EDGE_WIDTH);
  for (int i = 0; i < count; i++) {
    struct mol mol;
    mol_init(&mol);
    tu_chain_mol(&mol, sizes[i % n_sizes], i);
    tu_batch_add_mol(bb, &mol);
    mol_free(&mol);
  }
  se3_batch_geometry(bb);
}

/* The same with the bases computed on the host. */
static void make_batch(struct se3_batch_buf *bb, const struct se3_model *m, const int *sizes, int n_sizes, int count,
                       uint64_t seed) {
  make_geometry(bb, m, sizes, n_sizes, count, seed);
  cr_assert_eq(se3_batch_bases(bb, &m->plan), 0);
}

static struct se3_net *net_new(void) {
  struct se3_error err;
  struct se3_net *n = se3_net_create(nn_backend_cpu(), &cfg, 0, &err);
  cr_assert(n, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_init_params(n, 5), 0);
  return n;
}

static real *params_of(struct se3_net *n) {
  real *p = malloc(se3_net_n_params(n) * sizeof *p);
  se3_net_get(n, SE3_NET_PARAMS, p);
  return p;
}

/* The train stage's step (the loss on the backend, a share of 5 molecules
 * of 9, clipping that bites) against the same step through the host. */
Test(net, the_queued_step_is_the_host_step_to_the_bit) {
  static const int sizes[] = {5, 9, 3, 12, 7};
  const struct nn_adam adam = {0.9, 0.999, 1e-8, 0.01, 1};
  struct se3_net *h = net_new(), *q = net_new();
  struct se3_error err;
  real y[5], pred[5], dpred[5];
  double sum_h = 0.25, sum_q = 0;
  se3_net_set_loss_sum(q, 0.25);
  for (long s = 1; s <= 8; s++) {
    struct se3_batch_buf bb;
    make_batch(&bb, se3_net_model(h), sizes, 5, 5, (uint64_t)s);
    for (int i = 0; i < 5; i++)
      y[i] = (real)(0.5 * (double)i - 1 + 0.1 * (double)s);
    cr_assert_eq(se3_net_forward(h, &bb.b, pred, 1, &err), 0, "%s", se3_error_str(&err).s);
    sum_h += nn_loss(NN_LOSS_HUBER, pred, y, NULL, 5, 1.0, dpred) * 5;
    for (int i = 0; i < 5; i++)
      dpred[i] = (real)((double)dpred[i] * 5 / 9);
    cr_assert_eq(se3_net_backward(h, dpred, &err), 0, "%s", se3_error_str(&err).s);
    double norm = se3_net_clip(h, 0.02);
    cr_assert(norm > 0.02, "the clipping must bite (norm %g)", norm);
    se3_net_adam(h, &adam, s, 1e-3);

    const struct se3_loss_spec ls = {NN_LOSS_HUBER, 1.0, 5, 9, 1};
    cr_assert_eq(se3_net_forward_loss(q, &bb.b, y, &ls, &err), 0, "%s", se3_error_str(&err).s);
    cr_assert_eq(se3_net_backward_loss(q, &err), 0, "%s", se3_error_str(&err).s);
    se3_net_clip_queued(q, 0.02);
    se3_net_adam(q, &adam, s, 1e-3);
    double part;
    cr_assert_eq(se3_net_loss_part(q, &part, &err), 0, "%s", se3_error_str(&err).s);
    se3_batch_buf_free(&bb);
  }
  cr_assert_eq(se3_net_loss_sum(q, &sum_q, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(sum_q, sum_h, "loss sums %.17g and %.17g", sum_q, sum_h);
  real *ph = params_of(h), *pq = params_of(q);
  cr_assert_eq(memcmp(ph, pq, se3_net_n_params(h) * sizeof *ph), 0, "the parameters differ");
  free(ph);
  free(pq);
  se3_net_free(h);
  se3_net_free(q);
}

/* se3_net_train_step padded (one more molecule, at most an eighth more
 * atoms and edges, its prediction left out of the loss) against the plain
 * calls: the same steps up to round-off (the sums run over more terms), and
 * a net reserved for the largest batch takes no more memory in its padded
 * steps. On the CPU nothing is recorded: every step runs eagerly. A padded
 * step split into its calls (se3_net_forward_loss, se3_net_backward_loss,
 * se3_net_clip_queued, se3_net_adam), as data-parallel and fp16 training
 * make it, is the whole padded step, bit for bit. */
Test(net, padded_steps_are_the_plain_steps) {
  static const int sizes[] = {5, 9, 3, 12, 7, 4};
  const struct nn_adam adam = {0.9, 0.999, 1e-8, 0.01, 1};
  struct se3_net *p = net_new(), *q = net_new(), *r = net_new(), *split = net_new();
  se3_net_set_steps(p, SE3_STEPS_PLAIN);
  se3_net_set_steps(q, SE3_STEPS_PADDED);
  se3_net_set_steps(r, SE3_STEPS_RECORDED); /* (the CPU records nothing: padded) */
  se3_net_set_steps(split, SE3_STEPS_PADDED);
  se3_net_set_loss_sum(split, 0);
  struct se3_error err;
  struct se3_batch_buf bb[8];
  int N = 0, E = 0, G = 0;
  for (int s = 0; s < 8; s++) {
    make_geometry(&bb[s], se3_net_model(p), sizes + s % 3, 3, 5 + s % 3, (uint64_t)(40 + s));
    if (bb[s].b.N > N) N = bb[s].b.N;
    if (bb[s].b.E > E) E = bb[s].b.E;
    if (bb[s].b.G > G) G = bb[s].b.G;
  }
  cr_assert_eq(se3_net_reserve(r, N, E, G, 1, &err), 0, "%s", se3_error_str(&err).s);
  size_t reserved = se3_net_memory_bytes(r);
  struct se3_net *all[3] = {p, q, r};
  for (int i = 0; i < 3; i++)
    se3_net_set_loss_sum(all[i], 0);
  real y[8];
  for (long s = 1; s <= 8; s++) {
    const struct se3_batch *b = &bb[s - 1].b;
    for (int i = 0; i < b->G; i++)
      y[i] = (real)(0.5 * (double)i - 1 + 0.1 * (double)s);
    const struct se3_loss_spec ls = {NN_LOSS_HUBER, 1.0, b->G, b->G + 2, 1};
    for (int i = 0; i < 3; i++)
      cr_assert_eq(se3_net_train_step(all[i], b, y, &ls, 0.02, &adam, s, 1e-3, &err), 0, "%s", se3_error_str(&err).s);
    cr_assert_eq(se3_net_forward_loss(split, b, y, &ls, &err), 0, "%s", se3_error_str(&err).s);
    cr_assert_eq(se3_net_backward_loss(split, &err), 0, "%s", se3_error_str(&err).s);
    se3_net_clip_queued(split, 0.02);
    se3_net_adam(split, &adam, s, 1e-3);
    cr_assert_eq(se3_net_memory_bytes(r), reserved, "step %ld (%d atoms, %d edges): the reserved net took more memory",
                 s, b->N, b->E);
  }
  double sum[3];
  for (int i = 0; i < 3; i++)
    cr_assert_eq(se3_net_loss_sum(all[i], &sum[i], &err), 0, "%s", se3_error_str(&err).s);
  cr_assert(fabs(sum[1] - sum[0]) <= 1e-5 * fabs(sum[0]), "loss sums %.9g (padded) and %.9g", sum[1], sum[0]);
  cr_assert_eq(sum[2], sum[1], "the reserved padded net's loss sum differs");
  real *pp = params_of(p), *pq = params_of(q), *pr = params_of(r);
  size_t np = se3_net_n_params(p);
  double worst = 0;
  for (size_t i = 0; i < np; i++) {
    cr_assert(isfinite(pq[i]), "parameter %zu is not finite after padded steps", i);
    if (fabs(pq[i] - pp[i]) > worst) worst = fabs(pq[i] - pp[i]);
  }
  cr_assert_leq(worst, 2e-6, "padded and plain parameters differ by %g (8 steps of lr 1e-3)", worst);
  cr_assert_eq(memcmp(pq, pr, np * sizeof *pq), 0, "the reserved padded net's parameters differ");
  double ssplit;
  cr_assert_eq(se3_net_loss_sum(split, &ssplit, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(ssplit, sum[1], "the split padded steps' loss sum %.17g differs from the whole steps' %.17g", ssplit,
               sum[1]);
  real *ps = params_of(split);
  size_t ndiff = 0;
  for (size_t i = 0; i < np; i++)
    ndiff += memcmp(&ps[i], &pq[i], sizeof *ps) != 0;
  cr_assert_eq(ndiff, 0, "%zu of %zu parameters differ between the split padded steps and the whole ones", ndiff, np);
  free(ps);
  se3_net_free(split);
  struct se3_step_stats st;
  se3_net_step_stats(r, &st);
  cr_assert_eq(st.eager, 8);
  cr_assert_eq(st.recorded + st.replayed + st.refused, 0);
  free(pp), free(pq), free(pr);
  for (int s = 0; s < 8; s++)
    se3_batch_buf_free(&bb[s]);
  for (int i = 0; i < 3; i++)
    se3_net_free(all[i]);
}

/* Three batches through the pipeline, two under way at a time, give the
 * plain forward's predictions; calls out of turn are refused. */
Test(net, the_pipeline_predicts_as_the_forward) {
  static const int s1[] = {4, 8}, s2[] = {11, 2, 6}, s3[] = {9};
  struct se3_net *n = net_new();
  struct se3_batch_buf b[3];
  make_batch(&b[0], se3_net_model(n), s1, 2, 6, 1);
  make_batch(&b[1], se3_net_model(n), s2, 3, 7, 2);
  make_batch(&b[2], se3_net_model(n), s3, 1, 3, 3);
  struct se3_error err;
  real want[3][8], got[3][8];
  for (int i = 0; i < 3; i++)
    cr_assert_eq(se3_net_forward(n, &b[i].b, want[i], 0, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_predict_finish(n, got[0], &err), -1, "finish with nothing under way");
  cr_assert_eq(se3_net_predict_start(n, &b[0].b, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_predict_start(n, &b[1].b, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_predict_start(n, &b[2].b, &err), -1, "a third under way");
  cr_assert_eq(se3_net_predict_finish(n, got[0], &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_predict_start(n, &b[2].b, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_predict_finish(n, got[1], &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_predict_finish(n, got[2], &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(memcmp(got[0], want[0], 6 * sizeof(real)), 0);
  cr_assert_eq(memcmp(got[1], want[1], 7 * sizeof(real)), 0);
  cr_assert_eq(memcmp(got[2], want[2], 3 * sizeof(real)), 0);
  /* dropped: nothing left under way */
  cr_assert_eq(se3_net_predict_start(n, &b[0].b, &err), 0, "%s", se3_error_str(&err).s);
  se3_net_predict_drop(n);
  cr_assert_eq(se3_net_predict_finish(n, got[0], &err), -1, "finish after a drop");
  for (int i = 0; i < 3; i++)
    se3_batch_buf_free(&b[i]);
  se3_net_free(n);
}

/* Batches growing from small to large: without a reservation the net's
 * memory grows with them; reserved for the largest first, it does not, and
 * the steps give the same bits. */
Test(net, memory_reserved_for_the_largest_batch_is_all_a_run_takes) {
  static const int sizes[][3] = {{3, 4, 2}, {6, 9, 5}, {12, 14, 10}, {20, 17, 22}};
  const int count[] = {3, 5, 6, 8};
  const struct nn_adam adam = {0.9, 0.999, 1e-8, 0.0, 1};
  struct se3_batch_buf b[4];
  struct se3_net *n = net_new(), *r = net_new();
  int N = 0, E = 0, G = 0;
  for (int i = 0; i < 4; i++) {
    make_batch(&b[i], se3_net_model(n), sizes[i], 3, count[i], (uint64_t)(10 + i));
    if (b[i].N > N) N = b[i].N;
    if (b[i].E > E) E = b[i].E;
    if (b[i].G > G) G = b[i].G;
  }
  struct se3_error err;
  cr_assert_eq(se3_net_reserve(r, N, E, G, 1, &err), 0, "%s", se3_error_str(&err).s);
  size_t reserved = se3_net_memory_bytes(r), first = 0;
  real y[8] = {0.1f, -0.4f, 0.7f, 0.2f, -1.0f, 0.3f, 0.9f, -0.2f}, pn[8], pr[8];
  for (int i = 0; i < 4; i++) {
    const struct se3_loss_spec ls = {NN_LOSS_L1, 1.0, count[i], count[i], 1};
    struct se3_net *both[2] = {n, r};
    for (int k = 0; k < 2; k++) {
      cr_assert_eq(se3_net_forward_loss(both[k], &b[i].b, y, &ls, &err), 0, "%s", se3_error_str(&err).s);
      cr_assert_eq(se3_net_backward_loss(both[k], &err), 0, "%s", se3_error_str(&err).s);
      se3_net_adam(both[k], &adam, i + 1, 1e-3);
      cr_assert_eq(se3_net_predict_start(both[k], &b[i].b, &err), 0, "%s", se3_error_str(&err).s);
    }
    cr_assert_eq(se3_net_predict_finish(n, pn, &err), 0, "%s", se3_error_str(&err).s);
    cr_assert_eq(se3_net_predict_finish(r, pr, &err), 0, "%s", se3_error_str(&err).s);
    cr_assert_eq(memcmp(pn, pr, (size_t)count[i] * sizeof(real)), 0, "batch %d: the reservation changed results", i);
    if (i == 0) first = se3_net_memory_bytes(n);
    cr_assert_eq(se3_net_memory_bytes(r), reserved, "batch %d (%d atoms, %d edges): the reserved net took more memory",
                 i, b[i].N, b[i].E);
  }
  cr_assert_gt(se3_net_memory_bytes(n), first,
               "the unreserved net's memory should grow with the batches (else this "
               "test shows nothing)");
  real *pa = params_of(n), *pb = params_of(r);
  cr_assert_eq(memcmp(pa, pb, se3_net_n_params(n) * sizeof *pa), 0, "the parameters differ");
  free(pa);
  free(pb);
  for (int i = 0; i < 4; i++)
    se3_batch_buf_free(&b[i]);
  se3_net_free(n);
  se3_net_free(r);
}

/* A batch without bases (se3_batch_geometry) gets them from the net's
 * backend: the predictions and gradient are those of the host's bases, bit
 * for bit. Nets sharing a workspace (an ensemble's members) compute one
 * batch's bases once: the profiled table counts the backend's calls. */
Test(net, bases_where_the_model_runs) {
  static const int sizes[] = {6, 10, 3};
  struct se3_batch_buf host, geo;
  struct se3_net *a = net_new();
  make_batch(&host, se3_net_model(a), sizes, 3, 5, 77);
  make_geometry(&geo, se3_net_model(a), sizes, 3, 5, 77);
  cr_assert_null(geo.b.basis);
  struct se3_error err;
  real pa[5], pb[5], dout[5] = {0.3f, -0.2f, 0.1f, 0.5f, -0.4f};
  cr_assert_eq(se3_net_forward(a, &host.b, pa, 1, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_backward(a, dout, &err), 0, "%s", se3_error_str(&err).s);
  size_t np = se3_net_n_params(a);
  real *ga = malloc(np * sizeof *ga), *gb = malloc(np * sizeof *gb);
  se3_net_get(a, SE3_NET_GRAD, ga);
  cr_assert_eq(se3_net_forward(a, &geo.b, pb, 1, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_backward(a, dout, &err), 0, "%s", se3_error_str(&err).s);
  se3_net_get(a, SE3_NET_GRAD, gb);
  cr_assert_eq(memcmp(pa, pb, sizeof pa), 0, "predictions differ");
  cr_assert_eq(memcmp(ga, gb, np * sizeof *ga), 0, "gradients differ");
  se3_net_free(a);

  struct nn_profile prof;
  nn_profile_clear(&prof);
  const struct nn_backend *be = nn_backend_profiled(nn_backend_cpu(), &prof);
  struct se3_net *m[3];
  for (int i = 0; i < 3; i++) {
    cr_assert(m[i] = se3_net_create(be, &cfg, 0, &err), "%s", se3_error_str(&err).s);
    cr_assert_eq(se3_net_init_params(m[i], (uint64_t)(5 + i)), 0);
    if (i) se3_net_share_workspace(m[i], m[0]);
  }
  prof.on = 1;
  real out[3][5];
  for (int i = 0; i < 3; i++)
    cr_assert_eq(se3_net_forward(m[i], &geo.b, out[i], 0, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(prof.calls[NN_PROF_BASIS], 1, "three members, one batch: %ld computations of its bases",
               (long)prof.calls[NN_PROF_BASIS]);
  cr_assert_eq(memcmp(out[0], pb, sizeof pb), 0, "the first member is the net above (same seed)");
  se3_batch_geometry(&geo); /* the same molecules as a new batch: computed again */
  cr_assert_eq(se3_net_forward(m[1], &geo.b, out[1], 0, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(prof.calls[NN_PROF_BASIS], 2);
  prof.on = 0;
  for (int i = 2; i >= 0; i--)
    se3_net_free(m[i]);
  free(ga);
  free(gb);
  se3_batch_buf_free(&host);
  se3_batch_buf_free(&geo);
}
