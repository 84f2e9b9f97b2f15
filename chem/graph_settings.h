/* graph_settings.h — a workflow's graph settings (its stages.graph node)
 * as graph_build takes them, and a stored graph loaded or, where the graph
 * stage kept no blob (stages.graph.store: false), rebuilt from its molecule
 * exactly as that stage built it. The one reader of stages.graph: the graph,
 * basis, train and score stages all go through it, and the model takes its
 * cutoff and edge kind from here. */
#ifndef SE3_GRAPH_SETTINGS_H
#define SE3_GRAPH_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "common/cfgtree.h"

/* Not to be copied: go.elements points into it. */
struct graph_settings {
  struct graph_opts go;
  uint8_t elements[128];
  uint8_t atom_features[GRAPH_AF_COUNT], bond_features[GRAPH_BF_COUNT];
};

/* gs from a resolved stages.graph node c (configs/defaults.yaml filled in
 * its defaults). Returns 0, or -1 with err (SE3_ERR_USAGE, its message
 * naming the key; the place left to the caller) and *bad set to the node
 * at fault (NULL when none). */
int graph_settings_read(const struct cfg_node *c, struct graph_settings *gs, const struct cfg_node **bad,
                        struct se3_error *err);

/* A molecule blob's graph under gs into g (overwritten): -1 with err set
 * ("molecule: ..." for a damaged blob, else what is missing or wrong). */
int graph_from_mol_blob(const struct graph_settings *gs, const void *blob, size_t len, struct graph *g,
                        struct se3_error *err);

/* The graph of the molecule m's conformer conf (0 .. mol_n_conformers - 1)
 * under gs into g (overwritten): -1 with err set. m is left as it came. */
int graph_of_conformer(const struct graph_settings *gs, struct mol *m, int conf, struct graph *g,
                       struct se3_error *err);

/* A graphs row's graph into g (freed first): `blob` is the stored graph or,
 * where it was not stored, the molecule's blob (stages select one or the
 * other in SQL, stage.h's STAGE_GRAPH_COLUMN). Returns 0, or -1 with err
 * set (a damaged blob, a molecule without 3D coordinates). A row of several
 * conformers (stages.ingest.conformers) holds a graph a conformer
 * (common/confset.h); graph_load reads conformer 0, graph_load_conf
 * conformer conf (0 .. graph_row_conformers - 1). */
int graph_load(const struct graph_settings *gs, const void *blob, size_t len, struct graph *g, struct se3_error *err);
int graph_load_conf(const struct graph_settings *gs, const void *blob, size_t len, int conf, struct graph *g,
                    struct se3_error *err);
/* The conformers of a graphs row's blob (as graph_load takes it): 1 for one,
 * or for a blob that cannot be read (graph_load then says why). */
int graph_row_conformers(const void *blob, size_t len);

#endif
