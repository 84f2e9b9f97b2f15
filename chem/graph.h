/* graph.h — a molecule as a graph for the SE(3)-Transformer: directed edges
 * found with a cell list, node and edge features, relative positions, and the
 * stored graph blob.
 *
 * Edges. An edge i→j has source i and target j; messages flow from source to
 * target and the model sums them over each node's incoming edges. The distance
 * of a pair is d = sqrt(dx² + dy² + dz²), computed in double from the mol's
 * coordinates with (dx, dy, dz) = x_j − x_i. By mode:
 *   GRAPH_EDGES_RADIUS        every ordered pair i ≠ j with 0 < d <= cutoff.
 *   GRAPH_EDGES_BONDS         every bonded pair, both directions, at any
 *                             distance; cutoff and max_neighbors are ignored.
 *   GRAPH_EDGES_RADIUS_BONDS  the radius edges (after the max_neighbors cap)
 *                             plus every bonded pair in both directions, also
 *                             beyond the cutoff.
 * Coincident atoms (d = 0) are never joined, in any mode, bonded or not: the
 * basis needs a direction. A bond listed twice gives one edge per direction;
 * its features come from the first listing.
 *
 * max_neighbors (> 0, radius modes) caps each target's incoming radius edges:
 * target j keeps the max_neighbors sources nearest to it, ordered by
 * (distance, source index), so ties go to the smaller source index and the
 * result is deterministic. The cap counts incoming edges only, so a node may
 * still be the source of more than max_neighbors edges. In radius+bonds mode
 * bonded pairs are added after the cap and are never dropped by it: a target
 * may then have up to max_neighbors + (its bond count) incoming edges.
 * graph_build counts the radius edges the cap leaves out (edges_dropped; a
 * bonded pair it drops that radius+bonds adds back is not counted). The cap
 * is off by default (stages.graph.max_neighbors: 0): at a near-tie in
 * distance a round-off move of an atom swaps which neighbour is kept, so the
 * graph, and a model's output, jump; without it, the edge set changes only
 * at the cutoff, where the model's envelope fades an edge in or out
 * (models/se3.h).
 *
 * Order. Edges are sorted by target, then by source (both ascending); no pair
 * appears twice.
 *
 * Cost. The radius search puts atoms in cells of side cutoff (a spatial hash,
 * so far-flung atoms cost no memory) and tests each target against the 27
 * cells around it: O(N) for atoms at bounded density, like a protein.
 *
 * Node features, node_width floats per atom, in this order:
 *   [0, n_elements)  one-hot over opts.elements: slot k is 1 when the atom's
 *                    atomic number is elements[k] (the first match when the
 *                    list repeats one); an element not in the list gets all
 *                    zeros there
 *   +1 when with_other: "other element", 1 exactly when the atom's element is
 *                    not in the list
 *   +1 when with_charge: the formal charge
 *   +1 when with_atomic_number: the atomic number
 *   then each of atom_features, in the order listed (chem/perceive.h defines
 *   what each value is):
 *     hybridisation  4: one-hot none (hydrogen), sp, sp2, sp3
 *     aromatic       1: 1 for an aromatic atom
 *     ring           7: in a ring; then a one-hot of its smallest ring's
 *                       size, 3, 4, 5, 6, 7, 8 or more (all 0 in no ring)
 *     degree         6: one-hot of the neighbours, hydrogens included, 0..4, 5+
 *     hydrogens      5: one-hot of the hydrogens on it, 0..3, 4+
 *     chirality      2: one-hot of the stereocentre's sign, +1, -1 (0 0: none)
 * graph_node_width(opts) gives the width.
 *
 * Edge features, graph_edge_width(opts) floats per edge, GRAPH_EDGE_WIDTH (6)
 * without bond_features:
 *   [0..4] bond type one-hot: none, single, double, triple, aromatic
 *   then each of bond_features, in the order listed (0 for a pair that is
 *   not bonded):
 *     conjugated     1: 1 for a conjugated bond
 *     ring           1: 1 for a ring bond
 *     stereo         2: one-hot of a double bond's cis (+1), trans (-1)
 *   [last] distance d (Å): the model reads the distance from the last column
 *          and "no bond" from the first, whatever lies between
 * rel_pos, 3 floats per edge: x_target − x_source (Å), i.e. (dx, dy, dz).
 *
 * Blob layout (version 2, little-endian):
 *   offset 0  char[4]  magic "SE3G"
 *          4  u16      version (2)
 *          6  u16      flags (0; no flags are defined)
 *          8  u32      n_nodes
 *         12  u32      n_edges
 *         16  u16      node_width
 *         18  u16      edge_width (6)
 *         20  n_edges x i32 src
 *             n_edges x i32 dst
 *             n_nodes x node_width f32 node features (row-major)
 *             n_edges x edge_width f32 edge features (row-major)
 *             n_edges x 3 f32 rel_pos
 *             u32      CRC-32C (common/crc32c.h) of every byte before it
 * The size is exactly 20 + 4 * (2 E + N W + E w + 3 E) + 4 bytes. A blob is
 * accepted only when its checksum matches, edges are in range, without self
 * loops, in the order above, and every float is finite. Version 1 is the
 * same without the checksum: still read (unchecked; `se3screen verify`
 * counts it as "unchecked, old format"), never written.
 */
#ifndef SE3_GRAPH_H
#define SE3_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "chem/mol.h"

#define GRAPH_BLOB_MAGIC "SE3G"
#define GRAPH_BLOB_VERSION 2
#define GRAPH_BLOB_HEADER 20
#define GRAPH_BLOB_CRC 4 /* trailing checksum bytes, version 2 on */

/* Edge feature columns of the basic layout (without bond_features, where
 * GRAPH_EF_DISTANCE is the last; with them the distance moves to the end). */
enum {
  GRAPH_EF_NONE = 0,
  GRAPH_EF_SINGLE,
  GRAPH_EF_DOUBLE,
  GRAPH_EF_TRIPLE,
  GRAPH_EF_AROMATIC,
  GRAPH_EF_DISTANCE,
  GRAPH_EDGE_WIDTH
};

enum graph_edges { GRAPH_EDGES_RADIUS = 0, GRAPH_EDGES_BONDS, GRAPH_EDGES_RADIUS_BONDS };

/* The optional atom and bond features (widths above; names as
 * stages.graph.atom_features and bond_features spell them). */
enum graph_atom_feature {
  GRAPH_AF_HYBRIDISATION = 0,
  GRAPH_AF_AROMATIC,
  GRAPH_AF_RING,
  GRAPH_AF_DEGREE,
  GRAPH_AF_HYDROGENS,
  GRAPH_AF_CHIRALITY,
  GRAPH_AF_COUNT
};
enum graph_bond_feature { GRAPH_BF_CONJUGATED = 0, GRAPH_BF_RING, GRAPH_BF_STEREO, GRAPH_BF_COUNT };
#define GRAPH_EDGE_WIDTH_MAX 64 /* the widest edge a blob may declare */

/* A feature's name, its width; -1 / NULL for one out of range. The lookup by
 * name returns the feature, or -1 for a name that is none. */
const char *graph_atom_feature_name(int f);
int graph_atom_feature_width(int f);
int graph_atom_feature_of(const char *name);
const char *graph_bond_feature_name(int f);
int graph_bond_feature_width(int f);
int graph_bond_feature_of(const char *name);

struct graph_opts {
  double cutoff;     /* Å; must be > 0 and finite in the radius modes */
  int max_neighbors; /* per target, incoming radius edges; 0 = no cap */
  enum graph_edges edges;
  const uint8_t *elements; /* atomic numbers for the one-hot; may be NULL when n_elements is 0 */
  int n_elements;
  int with_other; /* add an "other element" slot after the one-hot */
  int with_charge;
  int with_atomic_number;
  /* optional features, each listed at most once (enum graph_atom_feature /
   * graph_bond_feature); NULL with a count of 0 for none */
  const uint8_t *atom_features;
  int n_atom_features;
  const uint8_t *bond_features;
  int n_bond_features;
};

struct graph {
  int n_nodes, n_edges, node_width, edge_width;
  int32_t *src, *dst;     /* n_edges each */
  float *node_feat;       /* n_nodes x node_width */
  float *edge_feat;       /* n_edges x edge_width */
  float *rel_pos;         /* n_edges x 3, x_dst - x_src */
  int64_t pairs_examined; /* distances computed by graph_build (not stored): the
                             cell list keeps this O(N); tests check it */
  int64_t edges_dropped;  /* radius edges the max_neighbors cap left out (not stored) */
};

void graph_init(struct graph *g);
void graph_free(struct graph *g); /* frees the arrays and re-initialises */

/* Floats per node for these options; -1 when the options are invalid (an
 * element count without an array, or a width beyond 65535). */
int graph_node_width(const struct graph_opts *o);
/* Floats per edge: GRAPH_EDGE_WIDTH plus the bond features'; -1 when they
 * are invalid (a feature out of range or listed twice, a count without an
 * array). */
int graph_edge_width(const struct graph_opts *o);

/* Builds the graph of m. g is overwritten (re-initialised, not freed).
 * Returns 0, or -1 with err (SE3_ERR_USAGE: bad options; SE3_ERR_RUN: a
 * bad bond, a non-finite coordinate, an edge whose distance or relative
 * position overflows a float; SE3_ERR_LIMIT: too many edges;
 * SE3_ERR_MEMORY); g is empty then. err may be NULL. */
int graph_build(const struct mol *m, const struct graph_opts *o, struct graph *g, struct se3_error *err);

/* The stored blob. Caller frees *blob. Returns 0, or -1 for a malformed graph
 * or on allocation failure. */
int graph_to_blob(const struct graph *g, uint8_t **blob, size_t *len);
/* Fills g (overwritten) from a blob. Returns 0, or -1 with err (SE3_ERR_RUN:
 * a damaged blob; SE3_ERR_MEMORY; err may be NULL). */
int graph_from_blob(const uint8_t *blob, size_t len, struct graph *g, struct se3_error *err);

#endif
