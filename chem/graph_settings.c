/* graph_settings.c — stages.graph read once, and graphs loaded or rebuilt
 * (graph_settings.h). */
#include "chem/graph_settings.h"

#include <stdio.h>
#include <string.h>

#include "chem/mol.h"
#include "common/confset.h"
#include "common/error.h"
#include "common/le.h"

int graph_settings_read(const struct cfg_node *c, struct graph_settings *gs, const struct cfg_node **bad,
                        struct se3_error *err) {
  memset(gs, 0, sizeof *gs);
  *bad = NULL;
  const char *edges = cfg_str(c, "edges");
  gs->go.edges = !strcmp(edges, "bonds")          ? GRAPH_EDGES_BONDS
                 : !strcmp(edges, "radius+bonds") ? GRAPH_EDGES_RADIUS_BONDS
                                                  : GRAPH_EDGES_RADIUS;
  gs->go.cutoff = cfg_float(c, "cutoff");
  gs->go.max_neighbors = (int)cfg_int(c, "max_neighbors");
  const struct cfg_node *el = cfg_get(c, "elements");
  for (int i = 0; el && i < el->n_kids && i < (int)sizeof gs->elements; i++) {
    int z = mol_element_z(el->kids[i]->value);
    if (z <= 0) {
      *bad = el->kids[i];
      se3_error_set(err, SE3_ERR_USAGE, "stages.graph.elements: '%s' is not an element", el->kids[i]->value);
      return -1;
    }
    gs->elements[gs->go.n_elements++] = (uint8_t)z;
  }
  gs->go.elements = gs->elements;
  /* the optional features, each known and listed once (the schema checks
   * the names; a list from a model card or a hand-made config is checked
   * here again) */
  for (int kind = 0; kind < 2; kind++) {
    const char *key = kind ? "bond_features" : "atom_features";
    const struct cfg_node *fl = cfg_get(c, key);
    int count = kind ? GRAPH_BF_COUNT : GRAPH_AF_COUNT, *nf = kind ? &gs->go.n_bond_features : &gs->go.n_atom_features;
    uint8_t *to = kind ? gs->bond_features : gs->atom_features;
    for (int i = 0; fl && i < fl->n_kids; i++) {
      const char *name = fl->kids[i]->value;
      int f = kind ? graph_bond_feature_of(name) : graph_atom_feature_of(name);
      int twice = 0;
      for (int j = 0; j < *nf; j++)
        twice |= to[j] == f;
      if (f < 0 || twice || *nf >= count) {
        *bad = fl->kids[i];
        se3_error_set(err, SE3_ERR_USAGE, "stages.graph.%s: '%s' %s", key, name ? name : "",
                      f < 0 ? "is not a feature" : "is listed twice");
        return -1;
      }
      to[(*nf)++] = (uint8_t)f;
    }
  }
  gs->go.atom_features = gs->atom_features;
  gs->go.bond_features = gs->bond_features;
  gs->go.with_other = cfg_bool(c, "other_element");
  gs->go.with_charge = cfg_bool(c, "charge");
  gs->go.with_atomic_number = cfg_bool(c, "atomic_number");
  if (graph_node_width(&gs->go) < 0) {
    *bad = el;
    se3_error_set(err, SE3_ERR_USAGE, "stages.graph.elements: too many elements");
    return -1;
  }
  return 0;
}

int graph_of_conformer(const struct graph_settings *gs, struct mol *m, int conf, struct graph *g,
                       struct se3_error *err) {
  if (m->dim != 3 && m->n_atoms > 1) {
    se3_error_set(err, SE3_ERR_RUN,
                  "no 3D coordinates (%dD); set stages.ingest.gen3d: auto (generated for such records)", m->dim);
    return -1;
  }
  if (conf < 0 || conf >= mol_n_conformers(m)) {
    se3_error_set(err, SE3_ERR_RUN, "no conformer %d (the molecule has %d)", conf, mol_n_conformers(m));
    return -1;
  }
  mol_swap_conformer(m, conf);
  int rc = graph_build(m, &gs->go, g, err);
  mol_swap_conformer(m, conf); /* (back as it came) */
  if (rc) se3_error_context(err, "graph%s", conf ? " of a conformer" : "");
  return rc ? -1 : 0;
}

static int graph_from_mol_conf(const struct graph_settings *gs, const void *blob, size_t len, int conf, struct graph *g,
                               struct se3_error *err) {
  struct mol m;
  int rc = -1;
  mol_init(&m);
  if (mol_from_blob(blob, len, &m, err))
    se3_error_context(err, "molecule");
  else
    rc = graph_of_conformer(gs, &m, conf, g, err);
  mol_free(&m);
  return rc;
}

int graph_from_mol_blob(const struct graph_settings *gs, const void *blob, size_t len, struct graph *g,
                        struct se3_error *err) {
  return graph_from_mol_conf(gs, blob, len, 0, g, err);
}

int graph_load_conf(const struct graph_settings *gs, const void *blob, size_t len, int conf, struct graph *g,
                    struct se3_error *err) {
  /* a stored graph (one, or a set a conformer), or (store: false) the
   * molecule; anything else is a damaged graph, said as such */
  if (!blob || len < 4 || memcmp(blob, "SE3M", 4)) {
    const uint8_t *p = NULL;
    size_t pl = 0;
    if (confset_get(blob, len, conf, &p, &pl, err)) {
      graph_free(g);
      graph_init(g);
      return -1;
    }
    return graph_from_blob(p, pl, g, err);
  }
  int rc = graph_from_mol_conf(gs, blob, len, conf, g, err);
  if (rc) {
    graph_free(g);
    graph_init(g);
  }
  return rc;
}

int graph_load(const struct graph_settings *gs, const void *blob, size_t len, struct graph *g, struct se3_error *err) {
  return graph_load_conf(gs, blob, len, 0, g, err);
}

int graph_row_conformers(const void *blob, size_t len) {
  if (!blob || len < 4 || memcmp(blob, "SE3M", 4)) return confset_count(blob, len);
  /* a molecule: version 4 carries conformers (chem/mol.h) */
  if (len < 6 || le_get_u16((const uint8_t *)blob + 4) < 4) return 1;
  struct mol m;
  int nc = mol_from_blob(blob, len, &m, NULL) ? 1 : mol_n_conformers(&m);
  mol_free(&m);
  return nc;
}
