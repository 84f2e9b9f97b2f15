/* model.c — the SE(3)-Transformer's speed: molecules per second for
 * inference (forward) and for a training step (forward, backward and the
 * AdamW update), at the se3_qm9 settings (7 blocks, degrees 0-3, 32
 * channels, 8 heads), on a batch of synthetic QM9-sized molecules (18 atoms),
 * the same kind of batch the reference figures in
 * ../shared/notes/se3_reference.md were measured on.
 *
 *   model_bench [--graph bonds|radius] [--mode infer|train] [--batch 100]
 *               [--reps 3] [--layers 7] [--channels 32] [--low-memory 0|1]
 *               [--envelope auto|poly|cosine|none]
 *               [--device cpu|cuda|cuda:N|auto] [--precision fp32|tf32|bf16|fp16]
 *               [--profile 0|1] [--model se3_qm9|small]
 *               [--steps auto|plain|padded|recorded] [--conv direct|gemm|fused]
 *               [--dp none|eager|whole]
 *
 * --steps: how training steps run (models/model.h's se3_steps); auto, as
 * the train stage, records them on a GPU (CUDA graphs: the timed steps are
 * replays) except in fp16, and runs them plainly on the CPU. The profiled
 * step (--profile 1) runs padded instead of replayed, so its operations
 * are seen.
 *
 * --dp: a data-parallel training step of a process joined to MPI (under
 * mpirun, or alone with SE3_COMM=mpi in the environment), as the train
 * stage takes it: eager, each step's calls in turn (the loss part read
 * back, the gradient summed through se3_net_backward_sum, the host's
 * agreement after it: the stage's way on the CPU and without NCCL); whole,
 * se3_net_train_step_dp after the agreement (a GPU with NCCL: the step
 * recorded with its collectives and replayed). The gradient is summed in
 * buckets of 4 MB, the stage's default. Each timed step ends with a sync,
 * as the others do, so what whole saves is the host's calls and waits
 * inside a step.
 *
 * --conv: the convolution's path on a GPU, as the workflow's `gpu_conv:`
 * (models/cuda/conv.cu: direct kernels, GEMMs on tensor cores, or the
 * fused tensor-core kernels); the CPU has one path and refuses the others.
 *
 * --model small: the train stage's default model (configs/models/small.yaml:
 * 2 blocks, degrees 0-2, 8 channels, 2 heads, 16 radial and 32 MLP
 * features), for the cost of a screen with the defaults.
 * --envelope: the smooth cutoff at 5 Å (models/se3.h); auto, as the
 * train stage, is poly for radius graphs and none for bond graphs.
 * --device, --precision: the backend (models/backend.h), as the workflow's
 * `device:` and `precision:`; the model runs through models/model.h
 * (se3_net), as the stages run it, so the same program measures every
 * backend. On the CPU the net uses the host's arrays as they are (no
 * copies). A device that cannot be opened is an error (exit 1) with the
 * backend's message.
 *
 * Bases are recomputed from the graphs inside the timed step, by the
 * backend (backend.h's `bases`: on the GPU for --device cuda), as the
 * stages compute them (the default path); activations live in the net's
 * workspace, kept across steps. step_s is the fastest of the --reps timed
 * steps, after one warm-up step. FLOPs are counted from the layer shapes
 * (se3_model_flops; a training step is 3 forwards).
 *
 * Yardsticks, on the CPU only (on a GPU they are null: the yardstick there
 * is the GPU's tensor-core peak, not measured here), both measured in the
 * same run with the same threads:
 *   sgemm_gflops, mfu   what OpenBLAS sgemm reaches on a large square
 *                       product (2048^3), and GFLOP/s over it: how the
 *                       model compares with a good dense kernel.
 *   fma_peak_gflops,    the processor's fp32 peak for the instruction set the
 *   fma_peak_isa,       convolution runs (fma_peak_isa, the same as isa:
 *   peak_fraction       SE3_ISA chooses it), from multiply-add chains held in
 *                       registers on every thread at once (fmapeak.c:
 *                       512-bit FMAs for avx512, 256-bit for avx2, SSE
 *                       multiplies and adds for base), and GFLOP/s over it:
 *                       the fraction of the arithmetic units' ceiling the
 *                       model uses (no real kernel reaches 1).
 *   bf16_peak_gflops    with --precision bf16 on the CPU: the same for
 *                       vdpbf16ps (two bf16 products a lane), the ceiling of
 *                       the radial product that bf16 runs; peak_fraction
 *                       stays over the fp32 peak. null otherwise.
 *
 * ops (--profile 1, the default; null with 0): where a step's time goes, in
 * seconds, from one more step after the timed ones, run on the profiled
 * table (models/profile.h: each operation timed between syncs, so on a GPU
 * the times are the device's): basis (the backend's bases), radial
 * (the radial network's hidden layers), conv_forward, conv_backward,
 * attention, norm, linear (the node-wise linear maps and the MLP head),
 * pooling, glue (element-wise: concatenation, sums, ReLU, the envelope),
 * optimizer (AdamW), and other: the step's wall time, ops_step_s, minus all
 * those (memory copies, the model's own host code). The timed steps run on
 * the same table with the profile off, when it only forwards, so step_s and
 * mol_per_s are never profiled. One step varies by a few % from the next:
 * compare ops_step_s with step_s. The cost of profiling, steps alternately
 * on and off in one run on the idle 2-core Zen 5: none measurable on bonds
 * infer (median -0.7 %, fastest -0.1 %, 9 and 8 steps of 0.36 s) nor on
 * bonds train (the fastest profiled step 1.7 % faster than the fastest
 * unprofiled one, within the steps' spread of 1.52-1.80 s).
 *
 * One JSON object per line, with the backend's name and device (the
 * processor or GPU) and the peak workspace bytes.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <omp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench/fmapeak.h"
#include "chem/graph.h"
#include "chem/mol.h"
#include "common/comm.h"
#include "common/error.h"
#include "models/cpu/isa.h"
#include "models/cpu/real.h"
#include "models/device.h"
#include "models/model.h"
#include "models/profile.h"
#include "models/so3.h"

/* the convolution path the JSON names: direct, gemm or fused on a GPU, cpu on the CPU */
static const char *conv_used = "cpu";

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void add_atom(struct mol *m, int z, const double p[3]) {
  m->atoms = realloc(m->atoms, (size_t)(m->n_atoms + 1) * sizeof *m->atoms);
  struct mol_atom *a = &m->atoms[m->n_atoms++];
  memset(a, 0, sizeof *a);
  a->z = (uint8_t)z;
  a->x = p[0];
  a->y = p[1];
  a->z_ = p[2];
}

static void add_bond(struct mol *m, int a, int b) {
  m->bonds = realloc(m->bonds, (size_t)(m->n_bonds + 1) * sizeof *m->bonds);
  struct mol_bond *bd = &m->bonds[m->n_bonds++];
  bd->a = (uint32_t)(a < b ? a : b);
  bd->b = (uint32_t)(a < b ? b : a);
  bd->order = 1;
}

/* 18 atoms in a ball of radius 2.8 Å, at least 1 Å apart (so a 5 Å radius
 * graph joins nearly every pair, ~290 edges); 19 bonds (a chain and two ring
 * closures: 38 directed edges, NVIDIA's QM9 bond graphs average 37). */
static void synthetic(struct mol *m, uint64_t *rng) {
  static const int elem[18] = {6, 6, 6, 6, 6, 6, 6, 7, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  mol_init(m);
  double p[18][3];
  for (int a = 0; a < 18; a++) {
    for (int tries = 0;; tries++) {
      for (int k = 0; k < 3; k++)
        p[a][k] = 2.8 * (2 * so3_rng_uniform(rng) - 1);
      if (p[a][0] * p[a][0] + p[a][1] * p[a][1] + p[a][2] * p[a][2] > 2.8 * 2.8) continue;
      int ok = 1;
      for (int b = 0; b < a && ok; b++) {
        double d2 = 0;
        for (int k = 0; k < 3; k++)
          d2 += (p[a][k] - p[b][k]) * (p[a][k] - p[b][k]);
        ok = d2 >= 1.0;
      }
      if (ok || tries > 10000) break;
    }
    add_atom(m, elem[a], p[a]);
    if (a) add_bond(m, a - 1, a);
  }
  add_bond(m, 0, 5);
  add_bond(m, 8, 14);
  m->dim = 3;
}

/* OpenBLAS sgemm GFLOP/s on C = A B, n x n (best of 3, after a warm-up),
 * with OpenBLAS's own threads, as many as OpenMP's. */
static double sgemm_gflops(int n, int threads) {
  openblas_set_num_threads(threads);
  float *A = malloc((size_t)n * n * sizeof *A), *B = malloc((size_t)n * n * sizeof *B),
        *C = malloc((size_t)n * n * sizeof *C);
  for (size_t i = 0; i < (size_t)n * n; i++) {
    A[i] = (float)(i % 7) * 0.01f;
    B[i] = (float)(i % 5) * 0.01f;
  }
  double best = 1e30;
  for (int r = 0; r < 4; r++) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n);
    double dt = now() - t0;
    if (r > 0 && dt < best) best = dt;
  }
  free(A);
  free(B);
  free(C);
  openblas_set_num_threads(1); /* as the model runs it (nn_blas_init) */
  return 2.0 * n * n * (double)n / best * 1e-9;
}

/* One data-parallel step as the train stage takes it (models/trainer.c's
 * run_epoch): eager, or whole (se3_net_train_step_dp). 0, or -1 with err. */
static int dp_step(struct se3_net *net, const struct se3_comm *comm, int whole, const struct se3_batch *b,
                   const real *target, const struct se3_loss_spec *ls, const struct nn_adam *adam, long step,
                   size_t bucket_bytes, struct se3_error *err) {
  double agree[3] = {0, 0, 0};
  if (whole) {
    if (comm_sum_f64(comm, agree, 3)) {
      se3_error_set(err, SE3_ERR_RUN, "MPI failed");
      return -1;
    }
    return se3_net_train_step_dp(net, b, target, ls, 0, adam, step, 1e-6, comm, bucket_bytes, err);
  }
  struct se3_sum_stats ss;
  if (se3_net_forward_loss(net, b, target, ls, err) ||
      se3_net_backward_sum(net, se3_net_loss_grad(net), comm, bucket_bytes, &ss, err) ||
      se3_net_loss_part(net, &agree[0], err))
    return -1;
  if (comm_sum_f64(comm, agree, 3)) {
    se3_error_set(err, SE3_ERR_RUN, "MPI failed");
    return -1;
  }
  se3_net_adam(net, adam, step, 1e-6);
  return 0;
}

static int usage(FILE *f) {
  fprintf(f, "usage: model_bench [--graph bonds|radius] [--mode infer|train] [--batch 100] [--reps 3] [--layers 7]\n"
             "                   [--channels 32] [--low-memory 0|1] [--envelope auto|poly|cosine|none]\n"
             "                   [--device cpu|cuda|cuda:N|auto] [--precision fp32|tf32|bf16|fp16] [--profile 0|1]\n"
             "                   [--model se3_qm9|small] [--steps auto|plain|padded|recorded]\n"
             "                   [--conv direct|gemm|fused] [--dp none|eager|whole]\n");
  return f == stdout ? 0 : 2;
}

int main(int argc, char **argv) {
  const char *graph = "bonds", *mode = "infer", *envelope = "auto", *device = "cpu", *precision = "fp32",
             *model = "se3_qm9", *steps_opt = "auto", *conv = "direct", *dp = "none";
  int batch = 100, reps = 3, layers = 7, channels = 32, low_memory = 0, profile = 1;
  for (int i = 1; i < argc; i += 2) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout);
    if (i + 1 >= argc) {
      fprintf(stderr, "model_bench: %s needs a value\n", argv[i]);
      return usage(stderr);
    }
    if (!strcmp(argv[i], "--graph"))
      graph = argv[i + 1];
    else if (!strcmp(argv[i], "--mode"))
      mode = argv[i + 1];
    else if (!strcmp(argv[i], "--batch"))
      batch = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--reps"))
      reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--layers"))
      layers = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--channels"))
      channels = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--low-memory"))
      low_memory = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--envelope"))
      envelope = argv[i + 1];
    else if (!strcmp(argv[i], "--device"))
      device = argv[i + 1];
    else if (!strcmp(argv[i], "--precision"))
      precision = argv[i + 1];
    else if (!strcmp(argv[i], "--profile"))
      profile = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--model"))
      model = argv[i + 1];
    else if (!strcmp(argv[i], "--steps"))
      steps_opt = argv[i + 1];
    else if (!strcmp(argv[i], "--conv"))
      conv = argv[i + 1];
    else if (!strcmp(argv[i], "--dp"))
      dp = argv[i + 1];
    else {
      fprintf(stderr, "model_bench: unknown option %s\n", argv[i]);
      return usage(stderr);
    }
  }
  /* small: configs/models/small.yaml, the train stage's default model
   * (--layers and --channels still apply on top) */
  int small = !strcmp(model, "small");
  if (!small && strcmp(model, "se3_qm9")) {
    fprintf(stderr, "model_bench: --model %s is not se3_qm9 or small\n", model);
    return 2;
  }
  if (small) {
    int set_layers = 0, set_channels = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
      set_layers |= !strcmp(argv[i], "--layers");
      set_channels |= !strcmp(argv[i], "--channels");
    }
    if (!set_layers) layers = 2;
    if (!set_channels) channels = 8;
  }
  enum nn_precision prec;
  if (nn_precision_parse(precision, &prec)) {
    fprintf(stderr, "model_bench: --precision %s is not one of fp32, tf32, bf16, fp16\n", precision);
    return 2;
  }
  nn_cpu_reexec(argv); /* as se3screen's main: OpenBLAS's kernels, libgomp's spinning */
  /* as se3screen's main: freed blocks stay in the heap (no first-touch faults) */
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  struct se3_error e;
  struct nn_device dev;
  const struct nn_backend *be = NULL;
  if (nn_device_parse(device, &dev, &e) || !(be = nn_backend_open(&dev, (enum nn_precision)prec, &e))) {
    fprintf(stderr, "model_bench: %s\n", se3_error_str(&e).s);
    return 1;
  }
  enum nn_conv_path cpath;
  if (nn_conv_path_parse(conv, &cpath)) {
    fprintf(stderr, "model_bench: --conv %s is not one of direct, gemm, fused\n", conv);
    return 2;
  }
  if (cpath != NN_CONV_DIRECT) {
    if (!be->set_conv_path) {
      fprintf(stderr, "model_bench: --conv %s is a GPU's path; %s has one\n", conv, be->name);
      return 2;
    }
    be->set_conv_path(cpath);
  }
  conv_used = be->set_conv_path ? conv : "cpu";
  /* The net runs on the profiled table (models/profile.h) with the profile
   * off for the timed steps (it then only forwards), and on for one more. */
  struct nn_profile prof = {0};
  const struct nn_backend *net_be = profile ? nn_backend_profiled(be, &prof) : be;
  int train = !strcmp(mode, "train");
  if (train && be->host_memory && be->precision == NN_PREC_BF16) {
    fprintf(stderr,
            "model_bench: precision bf16 on the CPU is for scoring (--mode infer); training there runs in fp32\n");
    return 2;
  }
  static const uint8_t el[] = {1, 6, 7, 8, 9};
  struct graph_opts go = {.cutoff = 5.0,
                          .edges = strcmp(graph, "radius") ? GRAPH_EDGES_BONDS : GRAPH_EDGES_RADIUS,
                          .elements = el,
                          .n_elements = 5,
                          .with_atomic_number = 1};
  struct se3_config cfg = {.layers = layers,
                           .degrees = small ? 3 : 4,
                           .channels = channels,
                           .heads = small ? 2 : 8,
                           .channels_div = 2,
                           .node_in = 6,
                           .edge_in = 6,
                           .radial_hidden = small ? 16 : 32,
                           .mlp_hidden = small ? 32 : 128,
                           .pool_max = 1,
                           .outputs = 1,
                           .envelope = !strcmp(envelope, "cosine") ? SE3_ENVELOPE_COSINE
                                       : !strcmp(envelope, "poly") ||
                                               (!strcmp(envelope, "auto") && go.edges == GRAPH_EDGES_RADIUS)
                                           ? SE3_ENVELOPE_POLY
                                           : SE3_ENVELOPE_NONE,
                           .cutoff = 5.0f};
  struct se3_net *net = se3_net_create(net_be, &cfg, low_memory, &e);
  if (!net) {
    fprintf(stderr, "model_bench: %s\n", se3_error_str(&e).s);
    return 1;
  }
  const struct se3_model *m = se3_net_model(net);
  /* how training steps run (model.h's se3_steps): auto as the train stage
   * (recorded where the backend records, but plain with fp16, whose loss
   * scaler reads each step's norm) */
  enum se3_steps steps_mode = !strcmp(steps_opt, "plain")    ? SE3_STEPS_PLAIN
                              : !strcmp(steps_opt, "padded") ? SE3_STEPS_PADDED
                                                             : SE3_STEPS_RECORDED;
  if (!strcmp(steps_opt, "auto"))
    steps_mode = be->precision == NN_PREC_FP16 || !be->record_begin ? SE3_STEPS_PLAIN : SE3_STEPS_RECORDED;
  else if (strcmp(steps_opt, "plain") && strcmp(steps_opt, "padded") && strcmp(steps_opt, "recorded")) {
    fprintf(stderr, "model_bench: --steps %s is not auto, plain, padded or recorded\n", steps_opt);
    return 2;
  }
  se3_net_set_steps(net, steps_mode);
  /* --dp: the processes (one, joined alone, is enough to time the step) */
  int dp_mode = !strcmp(dp, "eager") ? 1 : !strcmp(dp, "whole") ? 2 : 0;
  if (!dp_mode && strcmp(dp, "none")) {
    fprintf(stderr, "model_bench: --dp %s is not none, eager or whole\n", dp);
    return 2;
  }
  struct se3_comm *comm = NULL;
  const size_t bucket_bytes = (size_t)4 << 20;
  if (dp_mode) {
    if (!train) {
      fprintf(stderr, "model_bench: --dp is for --mode train\n");
      return 2;
    }
    struct se3_error cerr;
    if (comm_open(&comm, &cerr)) {
      fprintf(stderr, "model_bench: %s\n", se3_error_str(&cerr).s);
      return 1;
    }
    if (!comm) {
      fprintf(stderr, "model_bench: --dp needs MPI: run under mpirun, or with SE3_COMM=mpi (one process joined "
                      "alone)\n");
      return 2;
    }
    int whole_ok = se3_net_dp_steps(net, comm, &e);
    if (whole_ok < 0) {
      fprintf(stderr, "model_bench: %s\n", se3_error_str(&e).s);
      return 1;
    }
    if (dp_mode == 2 && !whole_ok) {
      fprintf(stderr,
              "model_bench: --dp whole needs a backend that records its steps and has collectives of its "
              "own (a GPU with NCCL); %s has not\n",
              be->name);
      return 2;
    }
    /* eager: padded where the backend records, as the train stage does */
    if (dp_mode == 1 && be->record_begin) se3_net_set_steps(net, SE3_STEPS_PADDED);
  }
  if (train) { /* parameters and zero Adam moments, as the train stage starts */
    if (se3_net_init_params(net, 1)) {
      fprintf(stderr, "model_bench: out of memory\n");
      return 1;
    }
  } else { /* the parameters only, as the score stage loads them: the moments stay untouched */
    real *host = malloc(m->n_params * sizeof *host);
    if (!host) {
      fprintf(stderr, "model_bench: out of memory\n");
      return 1;
    }
    se3_model_init_params(m, host, 1);
    se3_net_set(net, SE3_NET_PARAMS, host);
    free(host);
  }

  /* the batch's graphs (built once: the graph stage stores them) */
  uint64_t rng = 12345;
  struct se3_batch_buf bb;
  se3_batch_buf_init(&bb, cfg.node_in, GRAPH_EDGE_WIDTH);
  for (int i = 0; i < batch; i++) {
    struct mol mol;
    struct graph g;
    synthetic(&mol, &rng);
    graph_init(&g);
    se3_error_clear(&e);
    if (graph_build(&mol, &go, &g, &e) ||
        se3_batch_add(&bb, g.n_nodes, g.node_feat, g.n_edges, g.src, g.dst, g.edge_feat, g.rel_pos)) {
      fprintf(stderr, "model_bench: %s\n", e.message[0] ? e.message : "out of memory");
      return 1;
    }
    graph_free(&g);
    mol_free(&mol);
  }
  const struct se3_batch *b = &bb.b;
  /* training's loss: L1 against targets far below every prediction, so
   * d loss / d out = 1 / batch for each molecule, as the train stage takes
   * it (se3_net_train_step: the loss and its gradient on the backend,
   * nothing waiting for the device inside the step) */
  real *out = malloc((size_t)batch * sizeof *out), *target = malloc((size_t)batch * sizeof *target);
  for (int i = 0; i < batch; i++)
    target[i] = -1e6f;
  const struct se3_loss_spec ls = {NN_LOSS_L1, 1.0, batch, batch, 1};

  struct nn_adam adam = {0.9, 0.999, 1e-8, 0.0, 1};
  double best = 1e30, prof_step = 0;
  long step = 0;
  /* the first round warms up; with --profile 1 one more, profiled, follows */
  for (int r = 0; r < reps + 1 + (profile != 0); r++) {
    int profiled = profile && r == reps + 1;
    if (profiled) {
      nn_profile_clear(&prof);
      prof.on = 1;
      if (steps_mode == SE3_STEPS_RECORDED) se3_net_set_steps(net, SE3_STEPS_PADDED); /* (a replay calls no op) */
    }
    double t0 = now();
    se3_batch_geometry(&bb); /* a new batch each step: its bases computed in the step, where the model runs */
    if (dp_mode ? dp_step(net, comm, dp_mode == 2, b, target, &ls, &adam, ++step, bucket_bytes, &e)
        : train ? se3_net_train_step(net, b, target, &ls, 0, &adam, ++step, 1e-6, &e)
                : se3_net_forward(net, b, out, 0, &e)) {
      fprintf(stderr, "model_bench: %s\n", se3_error_str(&e).s);
      return 1;
    }
    if (net_be->sync(&e)) { /* the update may still be queued on a device */
      fprintf(stderr, "model_bench: %s\n", se3_error_str(&e).s);
      return 1;
    }
    double dt = now() - t0;
    if (profiled) {
      prof.on = 0;
      prof_step = dt;
    } else if (r > 0 && dt < best)
      best = dt;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double flops = se3_model_flops(m, bb.N, bb.E, batch) * (train ? 3 : 1);
  double gflops = flops / best * 1e-9;
  /* what the JSON needs of the net and the batch, which are freed before the
   * yardsticks below: a process's peak memory (as /usr/bin/time sees it)
   * is then the model's, or the 2048^3 sgemm's if larger, not their sum */
  size_t n_params = m->n_params, ws_peak = se3_net_peak_bytes(net);
  struct se3_step_stats sst;
  se3_net_step_stats(net, &sst);
  /* how the timed training steps ran (model.h's se3_steps): recorded once
   * and replayed (a GPU's default), padded, or plain (the CPU's) */
  const char *steps = !train                          ? "null"
                      : sst.replayed                  ? "\"recorded\""
                      : steps_mode == SE3_STEPS_PLAIN ? "\"plain\""
                                                      : "\"padded\"";
  char dp_json[64] = "null";
  if (dp_mode)
    snprintf(dp_json, sizeof dp_json, "{\"steps\":\"%s\",\"processes\":%d}", dp_mode == 2 ? "whole" : "eager",
             comm_size(comm));
  int nodes = bb.N, edges = bb.E;
  se3_batch_buf_free(&bb);
  free(out);
  free(target);
  se3_net_free(net);
  char sgemm[32] = "null", mfu[32] = "null", fma[32] = "null", fma_isa[16] = "null", frac[32] = "null";
  char bpeak[32] = "null";
  if (be->host_memory) { /* the CPU's yardsticks; a GPU's would be its tensor-core peak */
    /* the FMA peak before sgemm, whose OpenBLAS worker threads may still
     * be spinning for a while after it returns (after sgemm, one run in four
     * measured 10 % less on the idle 2-core Zen 5) */
    enum nn_isa isa = nn_isa_current();
    double fpeak = fma_peak_gflops(isa, omp_get_max_threads(), 0.2);
    if (fpeak > 0) {
      snprintf(fma, sizeof fma, "%.1f", fpeak);
      snprintf(fma_isa, sizeof fma_isa, "\"%s\"", nn_isa_name(isa));
      snprintf(frac, sizeof frac, "%.3f", gflops / fpeak);
    }
    double b16 = be->precision == NN_PREC_BF16 ? bf16_peak_gflops(omp_get_max_threads(), 0.2) : -1;
    if (b16 > 0) snprintf(bpeak, sizeof bpeak, "%.1f", b16);
    double peak = sgemm_gflops(2048, omp_get_max_threads());
    snprintf(sgemm, sizeof sgemm, "%.1f", peak);
    snprintf(mfu, sizeof mfu, "%.3f", gflops / peak);
  }
  char ops[512] = "null", ops_step[32] = "null";
  if (profile) { /* the profiled step: each category, and the rest of its wall time */
    size_t k = 0;
    k += (size_t)snprintf(ops + k, sizeof ops - k, "{");
    for (int c = 0; c < NN_PROF_COUNT; c++)
      k += (size_t)snprintf(ops + k, sizeof ops - k, "\"%s\":%.5f,", nn_profile_name((enum nn_prof_cat)c),
                            prof.seconds[c]);
    snprintf(ops + k, sizeof ops - k, "\"other\":%.5f}", prof_step - nn_profile_total(&prof));
    snprintf(ops_step, sizeof ops_step, "%.4f", prof_step);
  }
  char dev_json[2 * sizeof be->device];
  size_t k = 0;
  for (const char *c = be->device; *c && k + 2 < sizeof dev_json; c++) { /* a JSON string */
    if (*c == '"' || *c == '\\') dev_json[k++] = '\\';
    dev_json[k++] = (unsigned char)*c < 0x20 ? ' ' : *c;
  }
  dev_json[k] = 0;
  printf("{\"bench\":\"model\",\"model\":\"%s\",\"mode\":\"%s\",\"graph\":\"%s\",\"batch\":%d,\"atoms_per_mol\":%.1f,"
         "\"edges_per_mol\":%.1f,\"layers\":%d,\"channels\":%d,\"params\":%zu,\"precision\":\"%s\","
         "\"backend\":\"%s\",\"device\":\"%s\",\"real\":\"%s\","
         "\"low_memory\":%d,\"conv\":\"%s\",\"steps\":%s,\"dp\":%s,\"envelope\":\"%s\",\"step_s\":%.4f,\"mol_per_s\":%."
         "2f,\"peak_rss_mb\":%.0f,"
         "\"workspace_peak_bytes\":%zu,\"flops_per_mol\":%.4g,\"gflops\":%.1f,"
         "\"sgemm_gflops\":%s,\"mfu\":%s,\"fma_peak_gflops\":%s,\"fma_peak_isa\":%s,\"peak_fraction\":%s,"
         "\"bf16_peak_gflops\":%s,"
         "\"isa\":\"%s\",\"blas_core\":\"%s\",\"threads\":%d,\"ops_step_s\":%s,\"ops\":%s,\"note\":\"%s\"}\n",
         model, mode, graph, batch, (double)nodes / batch, (double)edges / batch, layers, channels, n_params,
         nn_precision_name(be->precision), be->name, dev_json, NN_REAL_NAME, low_memory, conv_used, steps, dp_json,
         cfg.envelope == SE3_ENVELOPE_POLY ? "poly"
         : cfg.envelope                    ? "cosine"
                                           : "none",
         best, batch / best, ru.ru_maxrss / 1024.0, ws_peak, flops / batch, gflops, sgemm, mfu, fma, fma_isa, frac,
         bpeak, nn_isa_name(nn_isa_current()), nn_blas_core(), omp_get_max_threads(), ops_step, ops,
         train ? "forward, backward and AdamW update; bases recomputed in the step; FLOPs = 3 forwards"
               : "bases recomputed in the step");
  comm_close(comm);
  return 0;
}
