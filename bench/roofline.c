/* roofline.c — what the GPU's three convolution paths (models/cuda/conv.cu:
 * the direct kernels, gpu_conv: direct; the GEMMs, gpu_conv: gemm; the
 * fused tensor-core kernels, gpu_conv: fused) must compute and move for one
 * molecule of se3_qm9, and the throughput each implies on an H100 and an
 * H200 (docs/gpu.md). It counts from the model's
 * layer shapes (models/se3.c's block layouts and models/layout.c's radial
 * columns), not from a run; bench/RESULTS.md sets the GPU's measurements
 * beside it.
 *
 *   roofline [--edges-bonds 38.0] [--edges-radius 301.2] [--atoms 18]
 *
 * Per convolution and edge, with Rt = sum_l cout_l K_l radial weights
 * (the entries of R) and us = sum_l (2l+1) K_l entries of U:
 *   FLOPs   R = s2 W3^T: 2 H Rt; the contraction: 2 sum_l (2l+1) cout_l K_l;
 *   direct  R lives in registers, W3 comes from L2: bytes from DRAM are the
 *           edge's basis, s2 and messages (a few KB), so the path is bound
 *           by its fp32 FMAs on CUDA cores (and below that by the shared-
 *           memory loads that feed them);
 *   gemm    R (Rt) and U (us) written once and read once by the contraction,
 *           in the storage type (2 bytes in bf16/fp16, 4 in fp32/tf32);
 *           training adds the backward: R written and read again (its
 *           recomputation), dR written once and read twice (dW3, ds2), dU
 *           in fp32 written and read once (conv_dx_edge).
 *   fused   R's tiles on tensor cores (2 H Rt), never stored; on the CUDA
 *           cores the contraction (2 sum_l (2l+1) cout_l K_l), U from the
 *           basis and the source's features (2 (2k+1) a U entry of input
 *           degree k, once a block of 32 output channels) and, in fp32, the
 *           split of W3 into tf32 halves; from DRAM each edge's basis, s2,
 *           source features and messages (W3 from L2). Training: dU
 *           recomputes R on tensor cores and contracts it with the output
 *           gradient G on the CUDA cores; dW3 and ds2 are formed from G, U,
 *           s2 and W3 a tile at a time (dW3 = sum_i G_i^T (U_i x s2),
 *           ds2 = sum_i,j U_i (G_i W3)): 2 (2l+1) H cout_l K_l FLOPs each
 *           on tensor cores, the U s2 products and the contraction with U
 *           on the CUDA cores, dR never stored; dU in fp32 written and read
 *           once. "fused-dr-stored" (SE3_FUSED_DR=store, and the degrees
 *           whose tiles do not fit shared memory): dR on the CUDA cores,
 *           stored (bf16/fp16, or fp32) and read by the dW3 and ds2 GEMMs
 *           (2 x 2 H Rt on tensor cores).
 *           The bound is the largest of the three times (tensor cores,
 *           CUDA cores, memory), the ceiling assuming they overlap; the
 *           line gives all three (the rest of the model, about 3 % of its
 *           FLOPs, counted at the CUDA cores' fp32 rate).
 * The GEMM path's FLOPs run on tensor cores, so its ceiling is the memory's;
 * a training step's FLOPs are 3 forwards' (model_bench's count).
 *
 * Peaks (NVIDIA's datasheets, SXM parts, dense): fp32 67 TFLOP/s, tf32 495,
 * bf16 and fp16 989; memory 3.35 TB/s (H100 80 GB HBM3), 4.8 TB/s (H200 141 GB
 * HBM3e). One JSON line per graph, mode, path and storage. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/layers.h"
#include "models/se3.h"

struct convsum {
  double flops; /* per edge, all convolutions of the model */
  double rt;    /* entries of R per edge, all convolutions */
  double us;    /* entries of U per edge */
  double contr; /* the contraction's FLOPs per edge, 2 sum_l (2l+1) cout_l K_l */
  double ufl;   /* the fused kernels' FLOPs for U per edge (once a block of 32 channels) */
  double rd;    /* the fused forward's DRAM bytes per edge: basis, s2, source features, messages */
  double dwb;   /* conv_fused_dw's B operand, U s2: a multiply each, once a block of 32 channels */
  double dsu;   /* conv_fused_ds2's contraction of G W3 with U: a multiply-add each */
};

static void add_conv(struct convsum *s, const struct nn_fiber *fin, const struct nn_fiber *fout, int H,
                     const struct basis_plan *plan) {
  double msg = 0, xin = 0;
  for (int l = 0; l <= NN_MAX_DEG; l++) {
    const double K = nn_conv_radial_cols(fin, l), c = fout->ch[l];
    s->flops += c * K * (2.0 * H + 2.0 * NN_DIM(l));
    s->rt += c * K;
    s->contr += 2.0 * NN_DIM(l) * c * K;
    if (c > 0) s->us += NN_DIM(l) * K;
    const double blocks = c > 0 ? (double)(((int)c + 31) / 32) : 0;
    s->dwb += blocks * NN_DIM(l) * K * H;
    if (c > 0) s->dsu += 2.0 * NN_DIM(l) * K * H;
    for (int k = 0; k <= NN_MAX_DEG && c > 0; k++) /* U entries of input degree k: (2l+1) (2min+1) cin_k */
      s->ufl += blocks * NN_DIM(l) * (2.0 * (k < l ? k : l) + 1) * fin->ch[k] * 2.0 * NN_DIM(k);
    msg += NN_DIM(l) * c;
    xin += NN_DIM(l) * fin->ch[l];
  }
  s->rd += 4.0 * ((double)plan->per_edge + H + xin + msg);
}

int main(int argc, char **argv) {
  double e_bonds = 38.0, e_radius = 301.2, atoms = 18; /* model_bench's synthetic QM9 molecules */
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--edges-bonds"))
      e_bonds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--edges-radius"))
      e_radius = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--atoms"))
      atoms = atof(argv[i + 1]);
    else {
      fprintf(stderr, "usage: roofline [--edges-bonds E] [--edges-radius E] [--atoms N]\n");
      return 2;
    }
  }
  /* se3_qm9 (configs/models/se3_qm9.yaml), as model_bench builds it */
  struct se3_config cfg = {.layers = 7,
                           .degrees = 4,
                           .channels = 32,
                           .heads = 8,
                           .channels_div = 2,
                           .node_in = 6,
                           .edge_in = 6,
                           .radial_hidden = 32,
                           .mlp_hidden = 128,
                           .pool_max = 1,
                           .outputs = 1,
                           .cutoff = 5.0f};
  struct se3_model m;
  struct se3_error err;
  if (se3_model_init(&m, &cfg, &err)) {
    fprintf(stderr, "roofline: %s\n", se3_error_str(&err).s);
    return 1;
  }
  struct convsum cs = {0};
  for (int b = 0; b < cfg.layers; b++)
    add_conv(&cs, &m.block[b].fin, &m.block[b].fkv, cfg.radial_hidden, &m.plan);
  add_conv(&cs, &m.hidden, &m.fout, cfg.radial_hidden, &m.plan);
  const double fp32_peak = 67e12, mem[2] = {3.35e12, 4.8e12};
  const double tc_peak[3] = {989e12, 495e12, 495e12 / 3}; /* bf16/fp16; tf32; fp32 as three tf32 products */
  const char *tc_name[3] = {"bf16/fp16", "tf32", "fp32"};
  const char *gpu[2] = {"H100", "H200"};
  const char *graphs[2] = {"bonds", "radius"};
  const double edges[2] = {e_bonds, e_radius};
  for (int g = 0; g < 2; g++) {
    const double E = edges[g];
    const double model_flops = se3_model_flops(&m, atoms, E, 1); /* one molecule */
    for (int train = 0; train < 2; train++) {
      const double mult = train ? 3 : 1, conv_flops = mult * E * cs.flops, all = mult * model_flops;
      /* direct: fp32 FMAs on CUDA cores (its DRAM traffic is small) */
      printf("{\"bench\":\"roofline\",\"graph\":\"%s\",\"edges_per_mol\":%.1f,\"mode\":\"%s\",\"path\":\"direct\","
             "\"storage\":\"fp32\",\"flops_per_mol\":%.4g,\"conv_flops_per_mol\":%.4g,\"bytes_per_mol\":null,"
             "\"bound\":\"fp32 FMA\",\"H100_mol_per_ms\":%.1f,\"H200_mol_per_ms\":%.1f}\n",
             graphs[g], E, train ? "train" : "infer", all, conv_flops, fp32_peak / all / 1e3, fp32_peak / all / 1e3);
      for (int half = 0; half < 2; half++) {
        const double tb = half ? 2 : 4;
        /* forward: R and U written and read once */
        double per_edge = 2 * tb * (cs.rt + cs.us);
        /* backward: R again (written, read), dR written and read twice, dU (fp32) written and read */
        if (train) per_edge += 2 * tb * cs.rt + 3 * tb * cs.rt + 2 * 4 * cs.us;
        const double bytes = E * per_edge;
        printf("{\"bench\":\"roofline\",\"graph\":\"%s\",\"edges_per_mol\":%.1f,\"mode\":\"%s\",\"path\":\"gemm\","
               "\"storage\":\"%s\",\"flops_per_mol\":%.4g,\"conv_flops_per_mol\":%.4g,\"bytes_per_mol\":%.4g,"
               "\"flops_per_byte\":%.1f,\"bound\":\"memory\",\"%s_mol_per_ms\":%.1f,\"%s_mol_per_ms\":%.1f}\n",
               graphs[g], E, train ? "train" : "infer", half ? "bf16/fp16" : "fp32/tf32", all, conv_flops, bytes,
               conv_flops / bytes, gpu[0], mem[0] / bytes / 1e3, gpu[1], mem[1] / bytes / 1e3);
      }
    }
  }
  /* the fused path: tensor cores, CUDA cores and memory, each a time per edge */
  const double H = cfg.radial_hidden, r_tc = 2 * H * cs.rt;
  const double xf = cs.contr / 2; /* sum_l (2l+1) cout_l K_l over every convolution: the contraction's multiply-adds */
  for (int g = 0; g < 2; g++) {
    const double E = edges[g], other = se3_model_flops(&m, atoms, E, 1) - E * cs.flops; /* the rest of the model */
    for (int train = 0; train < 2; train++)
      for (int p = 0; p < 3; p++)
        for (int dr = 0; dr < 1 + train; dr++) {
          const double tb = p == 0 ? 2 : 4;
          double tc = r_tc, cuda = cs.contr + cs.ufl + (p == 2 ? 4.0 * cs.rt : 0), bytes = cs.rd;
          if (train) {
            tc += r_tc;                        /* dU: R again */
            cuda += cs.contr + cs.ufl;         /* dU's contraction with the gradient; dR's U */
            bytes += 2 * 4.0 * cs.us + cs.rd;  /* dU written and read; the gradient, basis, s2 again */
            if (dr) {
              tc += 2 * 2 * H * xf;            /* dW3 and ds2 from G, U, s2, W3 a tile at a time */
              cuda += cs.dwb + cs.dsu + cs.ufl; /* U x s2, the contraction of G W3 with U; ds2's U */
            } else {
              cuda += cs.contr;                /* dR = G^T U */
              tc += 2 * r_tc;                  /* dW3 = dR^T s2, ds2 = dR W3 */
              bytes += 3 * tb * cs.rt;         /* dR written once, read twice */
            }
          }
          const double t_tc = E * tc / tc_peak[p], t_cuda = E * (cuda + (train ? 3 : 1) * other / E) / fp32_peak,
                       t_mem[2] = {E * bytes / mem[0], E * bytes / mem[1]};
          for (int d = 0; d < 2; d++) {
            const double t = fmax(t_tc, fmax(t_cuda, t_mem[d]));
            printf("{\"bench\":\"roofline\",\"graph\":\"%s\",\"edges_per_mol\":%.1f,\"mode\":\"%s\",\"path\":\"%s\","
                   "\"precision\":\"%s\",\"gpu\":\"%s\",\"tc_flops_per_mol\":%.4g,\"cuda_flops_per_mol\":%.4g,"
                   "\"bytes_per_mol\":%.4g,\"us_tensor_cores\":%.3f,\"us_cuda_cores\":%.3f,\"us_memory\":%.3f,"
                   "\"bound\":\"%s\",\"mol_per_ms\":%.1f}\n",
                   graphs[g], E, train ? "train" : "infer", train && !dr ? "fused-dr-stored" : "fused", tc_name[p], gpu[d], E * tc,
                   E * cuda + (train ? 3 : 1) * other, E * bytes, t_tc * 1e6, t_cuda * 1e6, t_mem[d] * 1e6,
                   t == t_tc ? "tensor cores" : t == t_cuda ? "CUDA cores" : "memory", 1e-3 / t);
          }
        }
  }
  printf("{\"bench\":\"roofline\",\"per_edge\":{\"conv_flops\":%.4g,\"R_entries\":%.0f,\"U_entries\":%.0f,"
         "\"contraction_flops\":%.4g,\"fused_u_flops\":%.4g,\"fused_dram_bytes\":%.4g}}\n",
         cs.flops, cs.rt, cs.us, cs.contr, cs.ufl, cs.rd);
  se3_model_free(&m);
  return 0;
}
