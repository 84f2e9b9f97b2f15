/* nn.h — the SE(3)-Transformer's layers on the CPU: the CPU backend's
 * functions, each a forward and a backward over flat arrays (llm.c style),
 * with shapes in comments and what the backward needs saved by the forward.
 * The conventions they share (layouts, gradients, graphs), the shapes and
 * the arena are backend-neutral and live in models/layers.h; each function
 * here is also an operation of the backend table (models/backend.h), which
 * every backend implements with the semantics written here.
 */
#ifndef SE3_NN_H
#define SE3_NN_H

#include <stddef.h>
#include <stdint.h>

#include "models/cpu/real.h"
#include "models/kernels/envelope.h"
#include "models/layers.h"


/* ---- equivariant linear (per degree, no bias) ------------------------------
 * y[n,m,o] = sum_i W[o,i] x[n,m,i] for one degree: x (rows x cin), W (cout x
 * cin), y (rows x cout), rows = N (2d+1). One GEMM. */
void nn_linear_forward(real *y, const real *x, const real *W, int rows, int cin, int cout);
/* dx (rows x cin) = dy W (overwritten; may be NULL); dW += dy^T x. */
void nn_linear_backward(real *dx, real *dW, const real *dy, const real *x, const real *W, int rows, int cin, int cout);

/* ---- norm nonlinearity (one degree) ----------------------------------------
 * For each node n and channel c: s = max(|x[n,:,c]|, 2^-24) (norm over the
 * 2d+1 components), then a layer norm of s over the channels of the node,
 * t = relu(gamma * (s - mean) / sqrt(var + 1e-5) + beta), and
 * y[n,m,c] = x[n,m,c] * t[n,c] / s[n,c]. Equivariant (only norms are touched).
 * x, y: N x dim x C; gamma, beta: C. Saves s, the normalised norms and
 * 1/sqrt(var + eps) in `save` (nn_norm_save_size(N, C) reals). A norm at
 * the clamp counts as clamped (no gradient through it); ReLU'(0) = 0. */
void nn_norm_forward(real *y, real *save, const real *x, const real *gamma, const real *beta, int N, int dim, int C);
void nn_norm_backward(real *dx, real *dgamma, real *dbeta, const real *dy, const real *x, const real *save,
                      const real *gamma, const real *beta, int N, int dim, int C);

/* ---- dense layers (radial network, MLP head) -------------------------------
 * y (rows x out) = x (rows x in) W^T + b; b may be NULL (no bias). */
void nn_dense_forward(real *y, const real *x, const real *W, const real *b, int rows, int in, int out);
/* dx = dy W (may be NULL), dW += dy^T x, db += column sums of dy (when b). */
void nn_dense_backward(real *dx, real *dW, real *db, const real *dy, const real *x, const real *W, int rows, int in,
                       int out);
/* Layer norm over the last dimension then ReLU (rows x n):
 * y = relu(gamma (x - mean)/sqrt(var + 1e-5) + beta); y may alias x in the
 * forward (the backward needs the pre-norm x, kept by the caller). save:
 * 2 rows reals, the means then the 1/sqrt(var + eps). ReLU'(0) = 0. */
void nn_lnrelu_forward(real *y, real *save, const real *x, const real *gamma, const real *beta, int rows, int n);
void nn_lnrelu_backward(real *dx, real *dgamma, real *dbeta, const real *dy, const real *x, const real *save,
                        const real *gamma, const real *beta, int rows, int n);

/* ---- radial network ----------------------------------------------------------
 * Per edge, from its features (bond one-hot and distance, `in` reals) to the
 * convolution's radial weights (`out` reals, nn_conv_radial_size):
 *   a1 = x W1^T + b1, s1 = lnrelu(a1; g1, be1), a2 = s1 W2^T + b2,
 *   s2 = lnrelu(a2; g2, be2), R = s2 W3^T (no bias).
 * Parameters, one block in this order: W1 (H x in), b1, g1, be1 (H each),
 * W2 (H x H), b2, g2, be2 (H each), W3 (out x H); nn_radial_params counts
 * them. The forward keeps a1, s1, a2, s2 and the norm statistics in `save`
 * (nn_radial_save_size reals) for the backward.
 * The model never forms R: nn_radial_hidden_forward stops at s2 and the
 * convolution applies W3 itself (nn_conv_forward). nn_radial_s2 and
 * nn_radial_w3 find s2 in `save` and W3 in a parameter block. */
void nn_radial_hidden_forward(real *save, const real *x, const real *params, int E, int in, int H);
/* From d s2 (E x H): dparams += gradients of W1..be2; dx (E x in,
 * overwritten) may be NULL. */
void nn_radial_hidden_backward(real *dx, real *dparams, const real *ds2, const real *x, const real *save,
                               const real *params, int E, int in, int H);
void nn_radial_forward(real *R, real *save, const real *x, const real *params, int E, int in, int H, int out);
/* dparams += gradients; dx (E x in, overwritten) may be NULL. */
void nn_radial_backward(real *dx, real *dparams, const real *dR, const real *x, const real *save, const real *params,
                        int E, int in, int H, int out);

/* ---- TFN convolution ---------------------------------------------------------
 * Messages along edges e = (src -> dst):
 *   out_l[e, i_l, o] = sum_{k, J', c} R_e[l][o][(k, J', c)] *
 *                      sum_{i_k} B_e[k, l][i_l, J', i_k] x_k[src(e), i_k, c]
 * for every output degree l with fout.ch[l] > 0 and input degree k with
 * fin.ch[k] > 0, where R_e = W3 s2_e is the radial network's output: per
 * edge nn_conv_radial_size reals, for each output degree l (ascending) a
 * row-major block of fout.ch[l] rows by K_l = sum_k (2 min(k,l) + 1) fin.ch[k]
 * columns ordered (k ascending, J', c). The convolution takes the radial
 * network's last hidden features s2 (E x H) and its last weights W3
 * (nn_conv_radial_size rows x H) and never stores R (conv.c says how).
 * B is the edge's basis (plan.per_edge reals; the plan's max_degree >= every
 * degree used). With pool, messages are summed over each node's incoming
 * edges: y[l] is N x (2l+1) x fout.ch[l]; otherwise y[l] holds the per-edge
 * messages, E x (2l+1) x fout.ch[l]. Self-interaction is a separate
 * nn_linear on the target's own features. Both return 0, or -1 when out of
 * memory. */
/* x[d], y[d]: per-degree arrays (NULL where the degree is absent). */
int nn_conv_forward(real *const y[], const struct nn_conv_shape *s, const real *const x[], const real *basis,
                    const real *s2, const real *W3, int H, int pool);
/* dx[d] (N rows, overwritten; a NULL entry is skipped), ds2 (E x H,
 * overwritten; may be NULL) and dW3 (added to; may be NULL) from dy (shaped
 * like y). */
int nn_conv_backward(real *const dx[], real *ds2, real *dW3, const struct nn_conv_shape *s, const real *const dy[],
                     const real *const x[], const real *basis, const real *s2, const real *W3, int H, int pool);
/* nn_conv_forward with the radial product R = s2 W3 in bf16: s2 and W3
 * rounded to bf16 (ties to even), the products summed in fp32 (vdpbf16ps,
 * twice an fp32 FMA's products an instruction); the rest in fp32. For
 * scoring with `precision: bf16`. Where the processor lacks AVX512-BF16
 * (nn_bf16_supported in isa.h), nn_conv_forward itself. */
int nn_conv_forward_bf16(real *const y[], const struct nn_conv_shape *s, const real *const x[], const real *basis,
                         const real *s2, const real *W3, int H, int pool);
/* Tests set this to run the generic tiles where the fast ones would run
 * (channel counts multiples of 32 and H = 32), to compare the two. */
extern int nn_conv_generic_only;

/* ---- attention -------------------------------------------------------------
 * Keys and values come per edge from one fused convolution: kv[d] is
 * E x (2d+1) x (fv.ch[d] + fk.ch[d]), values in channels 0..fv.ch[d]-1 and
 * keys after them. Queries are per node: q[d], N x (2d+1) x fk.ch[d]. With H
 * heads, head h of degree d owns channels [h C/H, (h+1) C/H) of the keys
 * (C = fk.ch[d]) and of the values (C = fv.ch[d]), all components; every
 * channel count is a multiple of H.
 *   logit[e,h] = sum_d sum_{m, c in h} key[d][e,m,c] q[d][dst(e),m,c] / sqrt(W),
 *   W = sum_d fk.ch[d] (2d+1) (the total key width, as NVIDIA),
 *   a[e,h] = softmax of logit[., h] over the incoming edges of dst(e),
 *   z[d][n,m,c] = sum_{e into n} a[e, head of c] value[d][e,m,c],
 * z[d]: N x (2d+1) x fv.ch[d]; a node without incoming edges gets z = 0.
 * alpha (E x H) keeps a for the backward. in_start[0] = 0 and in_start[N] =
 * E. With no keys at all (W = 0) every incoming edge gets the same weight.
 * Heads must divide every channel count (the model checks; the layer does
 * not).
 * Edge weights: with w (E reals >= 0, the smooth cutoff envelope of
 * model.h), each edge's term in the softmax is weighted,
 *   a[e,h] = w_e exp(logit[e,h]) / sum_{e'} w_e' exp(logit[e',h]),
 * so an edge of weight 0 takes no part and one of small weight little; a
 * node whose edges all weigh 0 gets a = 0 and z = 0. This is the softmax of
 * logit + log w, so the backward (from alpha) is the same formula. */
void nn_attn_forward(real *const z[], real *alpha, const struct nn_attn_shape *s, const real *const kv[],
                     const real *const q[]);
/* dkv[d] (E rows, overwritten) and dq[d] (N rows, overwritten) from dz; NULL
 * arrays or entries are skipped, and a NULL dz[d] counts as zero. */
void nn_attn_backward(real *const dkv[], real *const dq[], const struct nn_attn_shape *s, const real *const dz[],
                      const real *alpha, const real *const kv[], const real *const q[]);

/* ---- smooth cutoff envelope (models/kernels/envelope.h has the weights) ----
 * x[r, :] *= w[r] for rows x n (in place): an edge's weight applied to its
 * per-edge features, and the same to their gradient in the backward. */
void nn_scale_rows(real *x, const real *w, int rows, int n);

/* ---- pooling ---------------------------------------------------------------
 * Degree-0 features x (N x C) of G molecules (nodes graph_start[g] ..
 * graph_start[g+1]-1, graph_start[0] = 0, graph_start[G] = N) to y (G x C):
 * the maximum (argmax saved in `arg`, G x C ints, ties to the first node) or
 * the mean over each molecule's atoms. A molecule without atoms gives y = 0
 * (arg -1) and takes no gradient. The backwards overwrite dx. */
void nn_pool_max_forward(real *y, int32_t *arg, const real *x, const int32_t *graph_start, int G, int C);
void nn_pool_max_backward(real *dx, const real *dy, const int32_t *arg, int N, int G, int C);
void nn_pool_mean_forward(real *y, const real *x, const int32_t *graph_start, int G, int C);
void nn_pool_mean_backward(real *dx, const real *dy, const int32_t *graph_start, int G, int C);

#endif
