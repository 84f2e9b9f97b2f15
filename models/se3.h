/* se3.h — the SE(3)-Transformer assembled from the layers (layers.h), in the
 * layout of NVIDIA's optimised implementation (../shared/notes/se3_reference.md):
 *
 *   h = node features (degree 0)
 *   repeat `layers` times (an attention block, then the norm nonlinearity):
 *     R   = radial(edge features) w_e                 one network per block; w_e the
 *                                                     envelope weight (below), or 1
 *     kv  = conv(h; R) per edge, values then keys     one fused convolution
 *     q   = linear(h) per degree                      queries
 *     z   = attention(kv, q; w)                       softmax over incoming edges
 *     h   = norm(linear([z, h]) per degree)           the block's input joins its output
 *   f = conv(h; R_f) pooled to degree 0, + linear(h_0) (self-interaction)
 *   g = max (or mean) of f over each molecule's atoms
 *   y = W2 relu(W1 g + b1) + b2
 *
 * Hidden fibers have `channels` channels at every degree 0..degrees-1;
 * values and keys have channels / channels_div (keys only for degrees the
 * block's input has). All parameters live in one array (params), laid out
 * by se3_model_init; gradients have the same layout.
 *
 * The forward and the backward run on the model's backend (backend.h; the
 * CPU unless the caller sets m->be): their arrays (parameters, the batch's
 * arrays, outputs, gradients) are that backend's memory. Stages do not call
 * them directly: they use models/model.h, which moves batches and results
 * between the host and the backend.
 */
#ifndef SE3_SE3_H
#define SE3_SE3_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "models/backend.h"
#include "models/basis.h"
#include "models/kernels/envelope.h"
#include "models/layers.h"

struct se3_config {
  int layers;        /* attention blocks (7 for QM9) */
  int degrees;       /* feature degrees 0..degrees-1 (num_degrees; 4 for QM9), <= NN_MAX_DEG + 1 */
  int channels;      /* hidden channels per degree (32) */
  int heads;         /* attention heads (8) */
  int channels_div;  /* value and key channels = channels / channels_div (2) */
  int node_in;       /* node feature width */
  int edge_in;       /* edge feature width (bond one-hot and distance: 6) */
  int radial_hidden; /* radial network width (32) */
  int mlp_hidden;    /* final convolution channels and MLP width (128) */
  int pool_max;      /* 1: max over atoms, 0: mean */
  int outputs;       /* predicted values per molecule */
  int envelope;      /* smooth cutoff envelope: SE3_ENVELOPE_NONE (0), _COSINE or _POLY */
  int bonds_kept;    /* with an envelope: bonded edges weigh 1 (radius+bonds graphs) */
  float cutoff;      /* with an envelope: the radius graph's cutoff (Å) */
  int embed;         /* 0: the node features are the first block's input; K > 0: a learned
                        linear map of them to K degree-0 channels is (issue 68: a wide
                        featurisation otherwise widens the first block's radial networks) */
};

/* The smooth cutoff envelope. Every edge e of a radius graph gets a weight
 * w_e = u(r_e / cutoff) for r_e < cutoff, 0 beyond, where u is
 *   SE3_ENVELOPE_POLY    1 - 28 d^6 + 48 d^7 - 21 d^8 (NequIP's, p = 6; the
 *                        train stage's default): flat over bond lengths
 *                        (0.99 at d = 0.3, 0.86 at 0.5, 0.45 at 0.7)
 *   SE3_ENVELOPE_COSINE  0.5 (cos(pi d) + 1) (0.79 at 0.3, 0.5 at 0.5)
 * (1 at r = 0, falling to 0 with zero slope at the cutoff), read from the
 * edge's distance, the last edge feature (the layout of chem/graph.h). With
 * bonds_kept, an edge whose "no bond" feature (column 0) is below 0.5, i.e. a
 * bonded pair, weighs 1 at any distance: in a radius+bonds graph a bond is
 * always an edge, so it never appears or vanishes. The weight multiplies what
 * the edge contributes: the radial network's last hidden features s2 (so
 * every convolution's message along e, keys and values, and the final
 * convolution's, scale with w_e) and the edge's term in the attention softmax,
 * a[e] = w_e exp(logit_e) / sum_e' w_e' exp(logit_e'). An edge crossing the
 * cutoff therefore fades in or out, and the output is continuous, with a
 * continuous first derivative, in the atom coordinates. The weights depend on
 * the graph only, not on parameters. SE3_ENVELOPE_NONE (models trained before
 * the envelope existed, bond graphs) uses weight 1 everywhere, as before. */

/* One batch of molecules: graphs concatenated, edges sorted by target. */
struct se3_batch {
  int N, E, G;
  const real *node_feat;      /* N x node_in */
  const real *edge_feat;      /* E x edge_in */
  const int32_t *src;         /* E */
  const int32_t *in_start;    /* N + 1 */
  const int32_t *graph_start; /* G + 1 */
  const real *basis;          /* E x plan->per_edge; NULL: computed from rel where the model runs */
  const float *rel;           /* E x 3, relative positions (target minus source); may be NULL with basis */
  uint64_t id;                /* se3_batch_geometry's: this batch's contents, for reusing its bases; 0 none */
};

/* A batch assembled one molecule at a time from its graph (the arrays of
 * chem/graph.h: float features, edges sorted by target), then its bases
 * computed from the relative positions. b is valid after se3_batch_bases
 * or se3_batch_geometry. */
struct se3_batch_buf {
  struct se3_batch b;
  int node_in, edge_in, N, E, G;
  size_t cap_n, cap_e, cap_g, cap_basis;
  real *node, *edge, *basis;
  float *rel;
  int32_t *src, *in_start, *graph_start;
};
void se3_batch_buf_init(struct se3_batch_buf *bb, int node_in, int edge_in);
void se3_batch_buf_free(struct se3_batch_buf *bb);
/* Empties the batch, keeping its memory. */
void se3_batch_clear(struct se3_batch_buf *bb);
/* Appends one molecule: n nodes (n x node_in features), e edges with
 * molecule-local src/dst (sorted by dst), e x edge_in features and e x 3
 * relative positions. 0, or -1 when out of memory or dst is out of order. */
int se3_batch_add(struct se3_batch_buf *bb, int n, const float *node_feat, int e, const int32_t *src,
                  const int32_t *dst, const float *edge_feat, const float *rel_pos);
/* Computes every edge's basis for plan (in parallel) on the host and fills
 * bb->b. 0, or -1 when out of memory. */
int se3_batch_bases(struct se3_batch_buf *bb, const struct basis_plan *plan);
/* Fills bb->b without bases (basis NULL, rel set): models/model.h's net
 * computes them on its backend (on a GPU, from 12 bytes an edge instead of
 * uploading per_edge floats an edge), the same values. Each call gives the
 * batch a new id (process-wide), by which the members of an ensemble
 * (nets sharing a workspace) compute its bases once. */
void se3_batch_geometry(struct se3_batch_buf *bb);

#define SE3_MAX_LAYERS 32

/* One attention block's fibers and parameter offsets. */
struct se3_block_layout {
  struct nn_fiber fin, fk, fv, fkv; /* input, keys, values, the fused convolution's output */
  size_t radial, radial_out;        /* radial network parameters; its outputs per edge */
  size_t wq[NN_MAX_DEG + 1], wo[NN_MAX_DEG + 1], gamma[NN_MAX_DEG + 1], beta[NN_MAX_DEG + 1];
};

struct se3_model {
  struct se3_config cfg;
  const struct nn_backend *be; /* where forward and backward run; se3_model_init sets the CPU */
  /* 0 (se3_model_init's default): the forward keeps every block's per-edge
   * activations for the backward. 1: it keeps only per-node ones and the
   * backward recomputes a block's radial network, convolution and attention
   * from the block's input (one more convolution per block, per-edge memory
   * for one block instead of all). Results are identical. */
  int low_memory;
  struct basis_plan plan; /* degrees - 1 */
  size_t n_params;
  struct se3_block_layout block[SE3_MAX_LAYERS];
  struct nn_fiber hidden, fout;
  size_t final_radial, final_radial_out, w_self, w1, b1, w2, b2;
  size_t w_embed; /* embed x node_in, at offset 0 (with embed > 0) */
};

/* The configuration as one line of key=value words (what the models table
 * and the checkpoints store), and back: parse returns 0, or -1 when a word is
 * missing or malformed. The envelope words (envelope=cosine cutoff=5
 * bonds_kept=1) follow the others and are written only with an envelope, so a
 * configuration without one reads and writes as before the envelope existed,
 * and words stored before then parse to envelope none. The word embed=K
 * comes last, written only when K > 0, likewise. */
void se3_config_format(const struct se3_config *c, char *out, size_t n);
int se3_config_parse(const char *s, struct se3_config *c);

/* The bounds of a configuration beyond the workflow schema's arch keys (a
 * checkpoint's configuration is untrusted: se3_config_check holds every size
 * to a range before anything is laid out or allocated). */
#define SE3_MAX_NODE_IN 1024
#define SE3_MAX_EDGE_IN 64
#define SE3_MAX_EMBED 1024
#define SE3_MAX_OUTPUTS 1024
#define SE3_MAX_PARAMS ((size_t)1 << 31)
/* 0, or -1 with err naming the first size out of its range ("model:
 * radial_hidden=2147483647 is out of range (1 to 1024)") or a malformed
 * envelope. se3_model_init checks this first. */
int se3_config_check(const struct se3_config *c, struct se3_error *err);

/* Checks the configuration and lays out the parameters. 0, or -1 with a
 * message in err (e.g. channels not divisible by heads). */
int se3_model_init(struct se3_model *m, const struct se3_config *cfg, struct se3_error *err);
void se3_model_free(struct se3_model *m);
/* Random initial parameters (deterministic for a seed): weights uniform with
 * variance 1/fan_in, layer-norm gains 1, biases and shifts 0. */
void se3_model_init_params(const struct se3_model *m, real *params, uint64_t seed);

/* What the forward keeps for the backward. */
struct se3_tape;
/* out: G x outputs. Returns the tape (free with se3_tape_free), NULL when out
 * of memory. */
struct se3_tape *se3_model_forward(const struct se3_model *m, const real *params, const struct se3_batch *b, real *out);
/* The same, with activations (and the backward's temporaries) in ws, which
 * is reset first and keeps its memory for the next step; the tape is valid
 * until ws is reset or freed. */
struct se3_tape *se3_model_forward_ws(const struct se3_model *m, const real *params, const struct se3_batch *b,
                                      real *out, struct nn_arena *ws);
/* The outputs only (scoring): the same values as se3_model_forward_ws to
 * the bit, with the workspace holding one block's activations at a time
 * instead of every block's. 0, or -1 when out of memory. */
int se3_model_infer_ws(const struct se3_model *m, const real *params, const struct se3_batch *b, real *out,
                       struct nn_arena *ws);
/* dparams += d loss / d params from dout (G x outputs); dnode (N x node_in,
 * overwritten) may be NULL. Returns 0, or -1 when out of memory (dparams is
 * then incomplete: discard the step). */
int se3_model_backward(const struct se3_model *m, const real *params, const struct se3_batch *b,
                       const struct se3_tape *t, const real *dout, real *dparams, real *dnode);
/* The backward finishes the gradient stretch by stretch, from the end of
 * the parameters to their start: first the head's (the MLP, the final
 * convolution and its radial network), then each block's, the last block
 * first; no stretch is touched again once done. se3_model_grad_stages
 * writes the offsets where they start, in that order (from[0] the head's,
 * from[k] block layers - k's, the last 0: the first block's stage, or the
 * head's without blocks, ends with the embedding's gradient):
 * dparams[from[k] ..) is final
 * once stage k is done. Returns the count, layers + 1. */
int se3_model_grad_stages(const struct se3_model *m, size_t from[SE3_MAX_LAYERS + 1]);
/* se3_model_backward, calling done(ctx, k) when stage k is done (on a
 * device: once its work is queued). */
int se3_model_backward_staged(const struct se3_model *m, const real *params, const struct se3_batch *b,
                              const struct se3_tape *t, const real *dout, real *dparams, real *dnode,
                              void (*done)(void *ctx, int stage), void *ctx);
void se3_tape_free(struct se3_tape *t);
/* The envelope weights (E) of a batch's edges from their features (E x
 * edge_in), as the forward computes them; all 1 without an envelope. */
void se3_edge_weights(const struct se3_config *c, const real *edge_feat, int E, real *w);
/* Floating-point operations of one forward pass over a batch of N atoms, E
 * edges and G molecules, counted from the layer shapes (multiply and add
 * count 2; the norms, softmax and pooling, a few per element, are left out).
 * A training step is counted as 3 forwards (the backward's two products per
 * forward product), the usual convention; the backward's recomputation of
 * the radial weights is not counted. */
double se3_model_flops(const struct se3_model *m, double N, double E, double G);
/* The features of degree d after attention block `block` (after its norm):
 * N x (2d+1) x channels, inside the tape; NULL when out of range. */
const real *se3_tape_hidden(const struct se3_tape *t, const struct se3_model *m, int block, int d);

#endif
