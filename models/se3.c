/* se3.c — the SE(3)-Transformer's forward and backward over one batch
 * (se3.h has the architecture), written once against the backend table
 * (backend.h): every array here is the backend's memory, and every
 * arithmetic step is one of the table's operations. Activations are kept in
 * a tape; the backward walks the blocks in reverse. */
#include "models/se3.h"

#include "models/device.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/so3.h"

int se3_model_init(struct se3_model *m, const struct se3_config *c, struct se3_error *err) {
  memset(m, 0, sizeof *m);
  m->cfg = *c;
  m->be = nn_backend_host();
  if (se3_config_check(c, err)) return -1;
  int kv = c->channels / c->channels_div;
  if (c->channels % c->channels_div || kv % c->heads) {
    se3_error_set(err, SE3_ERR_USAGE,
                  "model: channels (%d) / channels_div (%d) = %d must be a whole multiple of heads (%d)", c->channels,
                  c->channels_div, kv, c->heads);
    return -1;
  }
  if (basis_plan_init(&m->plan, c->degrees - 1)) {
    se3_error_set(err, SE3_ERR_MEMORY, "model: out of memory");
    return -1;
  }
  size_t n = 0;
  for (int d = 0; d < c->degrees; d++)
    m->hidden.ch[d] = c->channels;
  /* the embedding first, so that a model without one lays out as before */
  m->w_embed = 0;
  n += (size_t)c->embed * (size_t)c->node_in;
  struct nn_fiber fin = {{c->embed ? c->embed : c->node_in}};
  for (int b = 0; b < c->layers; b++) {
    struct se3_block_layout *B = &m->block[b];
    B->fin = fin;
    for (int d = 0; d < c->degrees; d++) {
      B->fv.ch[d] = kv;
      B->fk.ch[d] = fin.ch[d] ? kv : 0;
      B->fkv.ch[d] = B->fv.ch[d] + B->fk.ch[d];
    }
    B->radial_out = nn_conv_radial_size(&B->fin, &B->fkv);
    B->radial = n;
    n += nn_radial_params(c->edge_in, c->radial_hidden, (int)B->radial_out);
    for (int d = 0; d < c->degrees; d++) {
      B->wq[d] = n;
      n += (size_t)B->fk.ch[d] * (size_t)fin.ch[d];
      B->wo[d] = n;
      n += (size_t)c->channels * (size_t)(B->fv.ch[d] + fin.ch[d]);
      B->gamma[d] = n;
      n += (size_t)c->channels;
      B->beta[d] = n;
      n += (size_t)c->channels;
    }
    fin = m->hidden;
  }
  m->fout.ch[0] = c->mlp_hidden;
  m->final_radial_out = nn_conv_radial_size(&fin, &m->fout);
  m->final_radial = n;
  n += nn_radial_params(c->edge_in, c->radial_hidden, (int)m->final_radial_out);
  m->w_self = n;
  n += (size_t)c->mlp_hidden * (size_t)fin.ch[0];
  m->w1 = n;
  n += (size_t)c->mlp_hidden * (size_t)c->mlp_hidden;
  m->b1 = n;
  n += (size_t)c->mlp_hidden;
  m->w2 = n;
  n += (size_t)c->outputs * (size_t)c->mlp_hidden;
  m->b2 = n;
  n += (size_t)c->outputs;
  m->n_params = n;
  if (n > SE3_MAX_PARAMS) {
    se3_error_set(err, SE3_ERR_LIMIT, "model: %zu parameters, more than the %zu a model may have", n, SE3_MAX_PARAMS);
    basis_plan_free(&m->plan);
    return -1;
  }
  return 0;
}

void se3_model_free(struct se3_model *m) { basis_plan_free(&m->plan); }

#define SE3_CONFIG_WORDS                                                                                               \
  "layers=%d degrees=%d channels=%d heads=%d channels_div=%d node_in=%d edge_in=%d radial_hidden=%d mlp_hidden=%d "    \
  "pool_max=%d outputs=%d"

/* The envelope's words, after the others; only written with an envelope. */
#define SE3_ENVELOPE_WORDS " envelope=%15s cutoff=%f bonds_kept=%d"

void se3_config_format(const struct se3_config *c, char *out, size_t n) {
  int k = snprintf(out, n, SE3_CONFIG_WORDS, c->layers, c->degrees, c->channels, c->heads, c->channels_div, c->node_in,
                   c->edge_in, c->radial_hidden, c->mlp_hidden, c->pool_max, c->outputs);
  if (c->envelope != SE3_ENVELOPE_NONE && k >= 0 && (size_t)k < n)
    k += snprintf(out + k, n - (size_t)k, " envelope=%s cutoff=%.9g bonds_kept=%d",
                  c->envelope == SE3_ENVELOPE_COSINE ? "cosine"
                  : c->envelope == SE3_ENVELOPE_POLY ? "poly"
                                                     : "unknown",
                  (double)c->cutoff, c->bonds_kept);
  if (c->embed > 0 && k >= 0 && (size_t)k < n) snprintf(out + k, n - (size_t)k, " embed=%d", c->embed);
}

/* The words of the configuration in their stored order: name, and where the
 * int goes (the envelope's words are read apart). */
#define CFG_INT_WORDS 11
static int *config_int(struct se3_config *c, int i) {
  int *at[CFG_INT_WORDS] = {&c->layers,  &c->degrees,       &c->channels,   &c->heads,    &c->channels_div, &c->node_in,
                            &c->edge_in, &c->radial_hidden, &c->mlp_hidden, &c->pool_max, &c->outputs};
  return at[i];
}
static const char *const CFG_NAMES[CFG_INT_WORDS] = {"layers",  "degrees",       "channels",   "heads",
                                                     "channels_div", "node_in", "edge_in", "radial_hidden",
                                                     "mlp_hidden",   "pool_max", "outputs"};

/* One word "name=value" at *s (then a space or the end); the value's text in
 * val. 0, or -1 when the word is not there. */
static int config_word(const char **s, const char *name, char *val, size_t n) {
  size_t k = strlen(name);
  if (strncmp(*s, name, k) != 0 || (*s)[k] != '=') return -1;
  const char *v = *s + k + 1, *e = v;
  while (*e && *e != ' ')
    e++;
  if (e == v || (size_t)(e - v) >= n) return -1;
  memcpy(val, v, (size_t)(e - v));
  val[e - v] = 0;
  *s = *e ? e + 1 : e;
  return 0;
}

/* The last word, embed=K (K > 0), and nothing after it. */
static int parse_embed(const char *s, struct se3_config *c) {
  char val[32], *end;
  if (config_word(&s, "embed", val, sizeof val)) return -1;
  errno = 0;
  long v = strtol(val, &end, 10);
  if (*end || errno || v < 1 || v > INT_MAX) return -1;
  c->embed = (int)v;
  return *s ? -1 : 0;
}

int se3_config_parse(const char *s, struct se3_config *c) {
  memset(c, 0, sizeof *c);
  char val[32];
  for (int i = 0; i < CFG_INT_WORDS; i++) {
    if (config_word(&s, CFG_NAMES[i], val, sizeof val)) return -1;
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (*end || errno || v < INT_MIN || v > INT_MAX) return -1;
    *config_int(c, i) = (int)v;
  }
  if (!*s) return 0; /* stored before the envelope existed, or without one */
  if (!strncmp(s, "embed=", 6)) return parse_embed(s, c);
  if (config_word(&s, "envelope", val, sizeof val)) return -1;
  if (!strcmp(val, "cosine"))
    c->envelope = SE3_ENVELOPE_COSINE;
  else if (!strcmp(val, "poly"))
    c->envelope = SE3_ENVELOPE_POLY;
  else
    return -1;
  if (config_word(&s, "cutoff", val, sizeof val)) return -1;
  char *end;
  double cut = strtod(val, &end);
  if (*end) return -1;
  c->cutoff = (float)cut;
  if (config_word(&s, "bonds_kept", val, sizeof val)) return -1;
  long b = strtol(val, &end, 10);
  if (*end || (b != 0 && b != 1)) return -1;
  c->bonds_kept = (int)b;
  return *s ? parse_embed(s, c) : 0;
}

/* Each size's allowed range (the workflow schema's for the arch keys). */
static const int CFG_MIN[CFG_INT_WORDS] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1};
static const int CFG_MAX[CFG_INT_WORDS] = {SE3_MAX_LAYERS, NN_MAX_DEG + 1, 1024, 64,   64,  SE3_MAX_NODE_IN,
                                           SE3_MAX_EDGE_IN, 1024,          4096, 1,    SE3_MAX_OUTPUTS};

int se3_config_check(const struct se3_config *c, struct se3_error *err) {
  struct se3_config w = *c;
  for (int i = 0; i < CFG_INT_WORDS; i++) {
    int v = *config_int(&w, i);
    if (v < CFG_MIN[i] || v > CFG_MAX[i]) {
      se3_error_set(err, SE3_ERR_USAGE, "model: %s=%d is out of range (%d to %d)", CFG_NAMES[i], v, CFG_MIN[i],
                    CFG_MAX[i]);
      return -1;
    }
  }
  if (c->envelope != SE3_ENVELOPE_NONE && ((c->envelope != SE3_ENVELOPE_COSINE && c->envelope != SE3_ENVELOPE_POLY) ||
                                           !(c->cutoff > 0) || !(c->cutoff <= 1000) || c->bonds_kept < 0 ||
                                           c->bonds_kept > 1)) {
    se3_error_set(err, SE3_ERR_USAGE,
                  "model: the cutoff envelope needs a known kind (%d) and a positive cutoff of at most 1000 Å (%g)",
                  c->envelope, (double)c->cutoff);
    return -1;
  }
  if (c->embed < 0 || c->embed > SE3_MAX_EMBED) {
    se3_error_set(err, SE3_ERR_USAGE, "model: embed=%d is out of range (0 to %d)", c->embed, SE3_MAX_EMBED);
    return -1;
  }
  return 0;
}

void se3_edge_weights(const struct se3_config *c, const real *edge_feat, int E, real *w) {
  for (int e = 0; e < E; e++)
    w[e] = nn_edge_weight(edge_feat + (size_t)e * (size_t)c->edge_in, c->edge_in, c->envelope, (real)c->cutoff,
                          c->bonds_kept);
}

/* The final input fiber: the hidden one, or the node features with no layers. */
static struct nn_fiber final_in(const struct se3_model *m) {
  if (m->cfg.layers > 0) return m->hidden;
  struct nn_fiber f = {{m->cfg.embed ? m->cfg.embed : m->cfg.node_in}};
  return f;
}

static void fill_uniform(real *p, size_t n, int fan_in, uint64_t *rng) {
  double a = sqrt(3.0 / (fan_in > 0 ? fan_in : 1));
  for (size_t i = 0; i < n; i++)
    p[i] = (real)(a * (2 * so3_rng_uniform(rng) - 1));
}

static void init_radial(real *p, int in, int H, int out, uint64_t *rng) {
  size_t h = (size_t)H;
  fill_uniform(p, h * (size_t)in, in, rng); /* W1 */
  p += h * (size_t)in;
  memset(p, 0, h * sizeof *p); /* b1 */
  for (size_t j = 0; j < h; j++)
    p[h + j] = 1;                      /* g1 */
  memset(p + 2 * h, 0, h * sizeof *p); /* be1 */
  p += 3 * h;
  fill_uniform(p, h * h, H, rng); /* W2 */
  p += h * h;
  memset(p, 0, h * sizeof *p);
  for (size_t j = 0; j < h; j++)
    p[h + j] = 1;
  memset(p + 2 * h, 0, h * sizeof *p);
  p += 3 * h;
  fill_uniform(p, (size_t)out * h, H, rng); /* W3 */
}

void se3_model_init_params(const struct se3_model *m, real *params, uint64_t seed) {
  const struct se3_config *c = &m->cfg;
  uint64_t rng = seed ? seed : 1;
  if (c->embed) fill_uniform(params + m->w_embed, (size_t)c->embed * (size_t)c->node_in, c->node_in, &rng);
  for (int b = 0; b < c->layers; b++) {
    const struct se3_block_layout *B = &m->block[b];
    init_radial(params + B->radial, c->edge_in, c->radial_hidden, (int)B->radial_out, &rng);
    for (int d = 0; d < c->degrees; d++) {
      fill_uniform(params + B->wq[d], (size_t)B->fk.ch[d] * (size_t)B->fin.ch[d], B->fin.ch[d], &rng);
      int cat = B->fv.ch[d] + B->fin.ch[d];
      fill_uniform(params + B->wo[d], (size_t)c->channels * (size_t)cat, cat, &rng);
      for (int j = 0; j < c->channels; j++) {
        params[B->gamma[d] + (size_t)j] = 1;
        params[B->beta[d] + (size_t)j] = 0;
      }
    }
  }
  struct nn_fiber fin = final_in(m);
  init_radial(params + m->final_radial, c->edge_in, c->radial_hidden, (int)m->final_radial_out, &rng);
  fill_uniform(params + m->w_self, (size_t)c->mlp_hidden * (size_t)fin.ch[0], fin.ch[0], &rng);
  fill_uniform(params + m->w1, (size_t)c->mlp_hidden * (size_t)c->mlp_hidden, c->mlp_hidden, &rng);
  memset(params + m->b1, 0, (size_t)c->mlp_hidden * sizeof *params);
  fill_uniform(params + m->w2, (size_t)c->outputs * (size_t)c->mlp_hidden, c->mlp_hidden, &rng);
  memset(params + m->b2, 0, (size_t)c->outputs * sizeof *params);
}

/* ---- the tape ---------------------------------------------------------------- */

struct block_tape {
  real *h_in[NN_MAX_DEG + 1]; /* the block's input (not owned: the previous block's h_out, or node_feat) */
  real *rsave;                /* the radial network's activations (s2 feeds the convolution) */
  real *kv[NN_MAX_DEG + 1], *q[NN_MAX_DEG + 1], *alpha;
  real *cat[NN_MAX_DEG + 1]; /* [z, h_in] per row */
  real *o[NN_MAX_DEG + 1], *nsave[NN_MAX_DEG + 1], *h_out[NN_MAX_DEG + 1];
};

struct se3_tape {
  struct block_tape blk[SE3_MAX_LAYERS];
  real *rfsave, *f, *g, *u, *v;
  real *w;   /* the edges' envelope weights (E), NULL without an envelope */
  real *emb; /* the embedded node features (N x embed), NULL without an embedding */
  int32_t *arg;
  real *h_final[NN_MAX_DEG + 1];
  struct nn_arena *arena; /* the caller's, or own */
  struct nn_arena own;
  int oom;
};

static real *talloc(struct se3_tape *t, size_t n) {
  real *p = nn_arena_alloc(t->arena, n * sizeof *p);
  if (!p) t->oom = 1;
  return p;
}

void se3_tape_free(struct se3_tape *t) {
  if (!t) return;
  nn_arena_free(&t->own);
  free(t);
}

const real *se3_tape_hidden(const struct se3_tape *t, const struct se3_model *m, int block, int d) {
  if (!t || block < 0 || block >= m->cfg.layers || d < 0 || d >= m->cfg.degrees) return NULL;
  return t->blk[block].h_out[d];
}

/* The per-edge arrays of block B (radial activations, keys and values,
 * attention weights) and the attention output z, from the arena. */
static int block_edge_alloc(struct se3_tape *t, const struct se3_model *m, const struct se3_block_layout *B,
                            const struct se3_batch *b, real *kv[], real **rsave, real **alpha, real *z[]) {
  const struct se3_config *c = &m->cfg;
  size_t N = (size_t)b->N, E = (size_t)b->E;
  *rsave = talloc(t, nn_radial_save_size(b->E, c->radial_hidden));
  *alpha = talloc(t, E * (size_t)c->heads);
  for (int d = 0; d < c->degrees; d++) {
    kv[d] = talloc(t, E * (size_t)(NN_DIM(d) * B->fkv.ch[d]));
    z[d] = talloc(t, N * (size_t)(NN_DIM(d) * B->fv.ch[d]));
  }
  return t->oom ? -1 : 0;
}

/* The radial network's last hidden features s2 inside its save area, for
 * the envelope to scale in place (the radial backward reads only a2 and
 * the statistics, not s2, so the saved activations stay valid). */
static real *radial_s2(real *rsave, int E, int H) { return (real *)nn_radial_s2(rsave, E, H); }

/* Block bi's edge work from its input h and queries q: the radial network
 * (its s2 scaled by the envelope weights w, when there are any), the fused
 * convolution (keys and values) and the attention (alpha, z). */
static int block_edges(const struct se3_model *m, const real *params, const struct se3_batch *b, int bi,
                       const real *const h[], const real *const q[], const real *w, real *rsave, real *kv[],
                       real *alpha, real *z[]) {
  const struct se3_config *c = &m->cfg;
  const struct se3_block_layout *B = &m->block[bi];
  const struct nn_backend *be = m->be;
  int H = c->radial_hidden;
  be->radial_hidden_forward(rsave, b->edge_feat, params + B->radial, b->E, c->edge_in, H);
  if (w) be->scale_rows(radial_s2(rsave, b->E, H), w, b->E, H);
  struct nn_conv_shape cs = {B->fin, B->fkv, &m->plan, b->N, b->E, b->src, b->in_start};
  if (be->conv_forward(kv, &cs, h, b->basis, nn_radial_s2(rsave, b->E, H),
                       params + B->radial + nn_radial_w3(c->edge_in, H), H, 0))
    return -1;
  struct nn_attn_shape as = {B->fk, B->fv, c->heads, b->N, b->E, b->in_start, w};
  be->attn_forward(z, alpha, &as, (const real *const *)kv, q);
  return 0;
}

struct se3_tape *se3_model_forward(const struct se3_model *m, const real *params, const struct se3_batch *b,
                                   real *out) {
  return se3_model_forward_ws(m, params, b, out, NULL);
}

/* The forward pass; with keep = 0 only the outputs count: each block's
 * activations are released once the next block's input is made, and the
 * block outputs alternate between two buffers, so the workspace holds one
 * block at a time instead of all of them (the tape is then only good for
 * se3_tape_free). */
static struct se3_tape *forward(const struct se3_model *m, const real *params, const struct se3_batch *b, real *out,
                                struct nn_arena *ws, int keep) {
  const struct se3_config *c = &m->cfg;
  const struct nn_backend *be = m->be;
  struct se3_tape *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  nn_backend_arena(be, &t->own);
  t->arena = ws ? ws : &t->own;
  nn_arena_reset(t->arena);
  size_t N = (size_t)b->N;
  if (c->envelope != SE3_ENVELOPE_NONE) {
    t->w = talloc(t, (size_t)b->E + 1);
    if (t->oom) goto fail;
    be->edge_weights(t->w, b->edge_feat, b->E, c->edge_in, c->envelope, (real)c->cutoff, c->bonds_kept);
  }
  real *h[NN_MAX_DEG + 1] = {(real *)b->node_feat};
  if (c->embed) {
    t->emb = talloc(t, N * (size_t)c->embed);
    if (t->oom) goto fail;
    be->linear_forward(t->emb, b->node_feat, params + m->w_embed, b->N, c->node_in, c->embed);
    h[0] = t->emb;
  }
  real *hbuf[2][NN_MAX_DEG + 1] = {{0}}; /* the block outputs, when not kept */
  if (!keep)
    for (int k = 0; k < 2; k++)
      for (int d = 0; d < c->degrees; d++)
        hbuf[k][d] = talloc(t, N * (size_t)(NN_DIM(d) * c->channels));
  for (int bi = 0; bi < c->layers; bi++) {
    const struct se3_block_layout *B = &m->block[bi];
    struct block_tape *T = &t->blk[bi];
    struct nn_arena_mark block = nn_arena_mark(t->arena);
    memcpy(T->h_in, h, sizeof h);
    for (int d = 0; d < c->degrees; d++) { /* per node: kept */
      if (B->fk.ch[d]) T->q[d] = talloc(t, N * (size_t)(NN_DIM(d) * B->fk.ch[d]));
      T->cat[d] = talloc(t, N * (size_t)(NN_DIM(d) * (B->fv.ch[d] + B->fin.ch[d])));
      T->o[d] = talloc(t, N * (size_t)(NN_DIM(d) * c->channels));
      T->nsave[d] = talloc(t, nn_norm_save_size(b->N, c->channels));
      T->h_out[d] = keep ? talloc(t, N * (size_t)(NN_DIM(d) * c->channels)) : hbuf[bi & 1][d];
    }
    /* per edge: kept too, unless low_memory (the backward recomputes them) */
    struct nn_arena_mark edges = nn_arena_mark(t->arena);
    real *z[NN_MAX_DEG + 1] = {0};
    if (block_edge_alloc(t, m, B, b, T->kv, &T->rsave, &T->alpha, z)) goto fail;
    for (int d = 0; d < c->degrees; d++)
      if (B->fk.ch[d])
        be->linear_forward(T->q[d], h[d], params + B->wq[d], b->N * NN_DIM(d), B->fin.ch[d], B->fk.ch[d]);
    if (block_edges(m, params, b, bi, (const real *const *)h, (const real *const *)T->q, t->w, T->rsave, T->kv,
                    T->alpha, z))
      goto fail;
    for (int d = 0; d < c->degrees; d++) {
      size_t rows = N * (size_t)NN_DIM(d);
      int cat = B->fv.ch[d] + B->fin.ch[d];
      be->concat_rows(T->cat[d], z[d], B->fv.ch[d], h[d], B->fin.ch[d], rows);
      be->linear_forward(T->o[d], T->cat[d], params + B->wo[d], (int)rows, cat, c->channels);
      be->norm_forward(T->h_out[d], T->nsave[d], T->o[d], params + B->gamma[d], params + B->beta[d], b->N, NN_DIM(d),
                       c->channels);
    }
    if (m->low_memory) {
      nn_arena_release(t->arena, edges);
      T->rsave = T->alpha = NULL;
      memset(T->kv, 0, sizeof T->kv);
    }
    if (!keep) nn_arena_release(t->arena, block);
    memcpy(h, T->h_out, sizeof h);
  }
  memcpy(t->h_final, h, sizeof h);

  /* final convolution to degree 0, self-interaction, pooling, MLP */
  struct nn_fiber fin = final_in(m);
  int M = c->mlp_hidden;
  t->rfsave = talloc(t, nn_radial_save_size(b->E, c->radial_hidden));
  t->f = talloc(t, N * (size_t)M);
  real *self = talloc(t, N * (size_t)M);
  t->g = talloc(t, (size_t)b->G * (size_t)M);
  t->arg = (int32_t *)talloc(t, (size_t)b->G * (size_t)M);
  t->u = talloc(t, (size_t)b->G * (size_t)M);
  t->v = talloc(t, (size_t)b->G * (size_t)M);
  if (t->oom) goto fail;
  int H = c->radial_hidden;
  be->radial_hidden_forward(t->rfsave, b->edge_feat, params + m->final_radial, b->E, c->edge_in, H);
  if (t->w) be->scale_rows(radial_s2(t->rfsave, b->E, H), t->w, b->E, H);
  struct nn_conv_shape fs = {fin, m->fout, &m->plan, b->N, b->E, b->src, b->in_start};
  real *fy[NN_MAX_DEG + 1] = {t->f};
  if (be->conv_forward(fy, &fs, (const real *const *)h, b->basis, nn_radial_s2(t->rfsave, b->E, H),
                       params + m->final_radial + nn_radial_w3(c->edge_in, H), H, 1))
    goto fail;
  be->linear_forward(self, h[0], params + m->w_self, b->N, fin.ch[0], M);
  be->add(t->f, self, N * (size_t)M);
  if (c->pool_max)
    be->pool_max_forward(t->g, t->arg, t->f, b->graph_start, b->G, M);
  else
    be->pool_mean_forward(t->g, t->f, b->graph_start, b->G, M);
  be->dense_forward(t->u, t->g, params + m->w1, params + m->b1, b->G, M, M);
  be->relu(t->v, t->u, (size_t)b->G * (size_t)M);
  be->dense_forward(out, t->v, params + m->w2, params + m->b2, b->G, M, c->outputs);
  return t;
fail:
  se3_tape_free(t);
  return NULL;
}

struct se3_tape *se3_model_forward_ws(const struct se3_model *m, const real *params, const struct se3_batch *b,
                                      real *out, struct nn_arena *ws) {
  return forward(m, params, b, out, ws, 1);
}

int se3_model_infer_ws(const struct se3_model *m, const real *params, const struct se3_batch *b, real *out,
                       struct nn_arena *ws) {
  struct se3_tape *t = forward(m, params, b, out, ws, 0);
  int rc = t ? 0 : -1;
  se3_tape_free(t);
  return rc;
}

/* An arena allocation of n reals for the backward; sets *oom on failure. */
static real *tmp_alloc(struct nn_arena *A, size_t n, int *oom) {
  real *p = nn_arena_alloc(A, n * sizeof(real));
  if (!p) *oom = 1;
  return p;
}

int se3_model_grad_stages(const struct se3_model *m, size_t from[SE3_MAX_LAYERS + 1]) {
  int k = 0;
  from[k++] = m->cfg.layers ? m->final_radial : 0; /* without blocks the head's stage ends with the embedding */
  for (int bi = m->cfg.layers - 1; bi >= 0; bi--)
    from[k++] = bi ? m->block[bi].radial : 0; /* the first block's stage ends with the embedding */
  return k;
}

int se3_model_backward(const struct se3_model *m, const real *params, const struct se3_batch *b,
                       const struct se3_tape *t, const real *dout, real *dparams, real *dnode) {
  return se3_model_backward_staged(m, params, b, t, dout, dparams, dnode, NULL, NULL);
}

/* The embedding's gradients from dh, d loss / d its output (the first
 * block's input), within the first block's stage: dW, and dnode when asked. */
static void embed_backward(const struct se3_model *m, const real *params, const struct se3_batch *b, const real *dh,
                           real *dparams, real *dnode) {
  const struct se3_config *c = &m->cfg;
  if (!c->embed) return;
  m->be->linear_backward(dnode, dparams + m->w_embed, dh, b->node_feat, params + m->w_embed, b->N, c->node_in,
                         c->embed);
}

int se3_model_backward_staged(const struct se3_model *m, const real *params, const struct se3_batch *b,
                              const struct se3_tape *t, const real *dout, real *dparams, real *dnode,
                              void (*done)(void *ctx, int stage), void *ctx) {
  const struct se3_config *c = &m->cfg;
  const struct nn_backend *be = m->be;
  size_t N = (size_t)b->N, E = (size_t)b->E, G = (size_t)b->G;
  int M = c->mlp_hidden;
  struct nn_fiber fin = final_in(m);
  struct nn_arena *A = t->arena;
  struct nn_arena_mark start = nn_arena_mark(A);
  int oom = 0; /* an allocation failed: stop, the gradients are incomplete */
#define TMP(n) tmp_alloc(A, (size_t)(n), &oom)
  /* d loss / d h, the features between blocks, in two buffers used in turn */
  int width = c->node_in > c->channels ? c->node_in : c->channels;
  if (c->embed > width) width = c->embed;
  real *dh[NN_MAX_DEG + 1] = {0}, *dh_next[NN_MAX_DEG + 1] = {0};
  for (int d = 0; d < c->degrees; d++) {
    dh[d] = TMP(N * (size_t)(NN_DIM(d) * width));
    dh_next[d] = TMP(N * (size_t)(NN_DIM(d) * width));
  }
  int H = c->radial_hidden;
  size_t w3 = nn_radial_w3(c->edge_in, H);
  real *ds2 = TMP(E * (size_t)H + 1); /* d loss / d s2 of each radial network in turn */
  if (oom) goto fail;
  struct nn_arena_mark head = nn_arena_mark(A);
  real *dv = TMP(G * (size_t)M), *dg = TMP(G * (size_t)M), *df = TMP(N * (size_t)M);
  real *dself = TMP(N * (size_t)fin.ch[0]);
  if (oom) goto fail;
  be->dense_backward(dv, dparams + m->w2, dparams + m->b2, dout, t->v, params + m->w2, b->G, M, c->outputs);
  be->relu_backward(dv, t->u, G * (size_t)M);
  be->dense_backward(dg, dparams + m->w1, dparams + m->b1, dv, t->g, params + m->w1, b->G, M, M);
  if (c->pool_max)
    be->pool_max_backward(df, dg, t->arg, b->N, b->G, M);
  else
    be->pool_mean_backward(df, dg, b->graph_start, b->G, M);
  struct nn_conv_shape fs = {fin, m->fout, &m->plan, b->N, b->E, b->src, b->in_start};
  const real *dfy[NN_MAX_DEG + 1] = {df};
  if (be->conv_backward(dh, ds2, dparams + m->final_radial + w3, &fs, dfy, (const real *const *)t->h_final, b->basis,
                        nn_radial_s2(t->rfsave, b->E, H), params + m->final_radial + w3, H, 1))
    goto fail;
  if (t->w) be->scale_rows(ds2, t->w, b->E, H); /* d s2 before the envelope */
  be->radial_hidden_backward(NULL, dparams + m->final_radial, ds2, b->edge_feat, t->rfsave, params + m->final_radial,
                             b->E, c->edge_in, H);
  be->linear_backward(dself, dparams + m->w_self, df, t->h_final[0], params + m->w_self, b->N, fin.ch[0], M);
  be->add(dh[0], dself, N * (size_t)fin.ch[0]);
  nn_arena_release(A, head);
  if (c->layers == 0) embed_backward(m, params, b, dh[0], dparams, dnode);
  if (done) done(ctx, 0);

  for (int bi = c->layers - 1; bi >= 0; bi--) {
    const struct se3_block_layout *B = &m->block[bi];
    const struct block_tape *T = &t->blk[bi];
    struct nn_arena_mark mark = nn_arena_mark(A);
    real *rsave = T->rsave, *alpha = T->alpha, *kv[NN_MAX_DEG + 1];
    memcpy(kv, T->kv, sizeof kv);
    if (!rsave) {                                 /* low_memory: this block's edge work again, from its input */
      struct se3_tape *tw = (struct se3_tape *)t; /* only its arena and oom flag are touched */
      real *z[NN_MAX_DEG + 1] = {0};
      if (block_edge_alloc(tw, m, B, b, kv, &rsave, &alpha, z) ||
          block_edges(m, params, b, bi, (const real *const *)T->h_in, (const real *const *)T->q, t->w, rsave, kv, alpha,
                      z))
        goto fail;
    }
    real *dz[NN_MAX_DEG + 1] = {0}, *dq[NN_MAX_DEG + 1] = {0}, *dkv[NN_MAX_DEG + 1] = {0};
    real *dconv[NN_MAX_DEG + 1] = {0}, *dhin[NN_MAX_DEG + 1] = {0};
    for (int d = 0; d < c->degrees; d++) {
      size_t rows = N * (size_t)NN_DIM(d);
      int cat = B->fv.ch[d] + B->fin.ch[d];
      real *d_o = TMP(rows * (size_t)c->channels), *dcat = TMP(rows * (size_t)cat);
      dz[d] = TMP(rows * (size_t)B->fv.ch[d]);
      dkv[d] = TMP(E * (size_t)(NN_DIM(d) * B->fkv.ch[d]));
      if (B->fk.ch[d]) dq[d] = TMP(rows * (size_t)B->fk.ch[d]);
      if (oom) goto fail;
      be->norm_backward(d_o, dparams + B->gamma[d], dparams + B->beta[d], dh[d], T->o[d], T->nsave[d],
                        params + B->gamma[d], params + B->beta[d], b->N, NN_DIM(d), c->channels);
      be->linear_backward(dcat, dparams + B->wo[d], d_o, T->cat[d], params + B->wo[d], (int)rows, cat, c->channels);
      if (B->fin.ch[d]) dhin[d] = dh_next[d];
      be->split_rows(dz[d], B->fv.ch[d], dhin[d], B->fin.ch[d], dcat, rows);
    }
    struct nn_attn_shape as = {B->fk, B->fv, c->heads, b->N, b->E, b->in_start, t->w};
    be->attn_backward(dkv, dq, &as, (const real *const *)dz, alpha, (const real *const *)kv, (const real *const *)T->q);
    /* the block input's gradient: the concatenation, the queries and the convolution */

    for (int d = 0; d <= NN_MAX_DEG; d++)
      if (B->fin.ch[d]) dconv[d] = TMP(N * (size_t)(NN_DIM(d) * B->fin.ch[d]));
    if (oom) goto fail;
    struct nn_conv_shape cs = {B->fin, B->fkv, &m->plan, b->N, b->E, b->src, b->in_start};
    if (be->conv_backward(dconv, ds2, dparams + B->radial + w3, &cs, (const real *const *)dkv,
                          (const real *const *)T->h_in, b->basis, nn_radial_s2(rsave, b->E, H), params + B->radial + w3,
                          H, 0))
      goto fail;
    if (t->w) be->scale_rows(ds2, t->w, b->E, H);
    be->radial_hidden_backward(NULL, dparams + B->radial, ds2, b->edge_feat, rsave, params + B->radial, b->E,
                               c->edge_in, H);
    for (int d = 0; d <= NN_MAX_DEG; d++) {
      if (!B->fin.ch[d]) continue;
      size_t n = N * (size_t)(NN_DIM(d) * B->fin.ch[d]);
      be->add(dhin[d], dconv[d], n);
      if (B->fk.ch[d]) {
        real *dql = TMP(n);
        if (oom) goto fail;
        be->linear_backward(dql, dparams + B->wq[d], dq[d], T->h_in[d], params + B->wq[d], b->N * NN_DIM(d),
                            B->fin.ch[d], B->fk.ch[d]);
        be->add(dhin[d], dql, n);
      }
    }
    nn_arena_release(A, mark);
    if (bi == 0) embed_backward(m, params, b, dh_next[0], dparams, dnode);
    if (done) done(ctx, c->layers - bi);
    for (int d = 0; d <= NN_MAX_DEG; d++) { /* swap: this block's input gradient is the next one's dh */
      real *tmp = dh[d];
      dh[d] = dh_next[d];
      dh_next[d] = tmp;
    }
  }
  if (dnode && !c->embed) be->copy(dnode, dh[0], N * (size_t)c->node_in * sizeof *dnode);
#undef TMP
  nn_arena_release(A, start);
  return 0;
fail:
  nn_arena_release(A, start);
  return -1;
}

double se3_model_flops(const struct se3_model *m, double N, double E, double G) {
  const struct se3_config *c = &m->cfg;
  double H = c->radial_hidden, f = 0;
  double radial = 2 * E * (c->edge_in * H + H * H); /* the two hidden layers; W3 is in the convolution */
  for (int b = 0; b < c->layers; b++) {
    const struct se3_block_layout *B = &m->block[b];
    f += radial + E * nn_conv_flops(&B->fin, &B->fkv, &m->plan, c->radial_hidden);
    for (int d = 0; d < c->degrees; d++) {
      double rows = N * NN_DIM(d);
      f += 2 * rows * B->fin.ch[d] * B->fk.ch[d];                 /* queries */
      f += 2 * E * NN_DIM(d) * (B->fk.ch[d] + B->fv.ch[d]);       /* logits and the weighted values */
      f += 2 * rows * (B->fv.ch[d] + B->fin.ch[d]) * c->channels; /* output projection */
    }
  }
  struct nn_fiber fin = final_in(m);
  f += radial + E * nn_conv_flops(&fin, &m->fout, &m->plan, c->radial_hidden);
  f += 2 * N * fin.ch[0] * c->mlp_hidden;                                                    /* self-interaction */
  f += 2 * N * (double)c->node_in * c->embed;                                                /* the embedding */
  f += 2 * G * (c->mlp_hidden * (double)c->mlp_hidden + c->mlp_hidden * (double)c->outputs); /* the MLP */
  return f;
}
