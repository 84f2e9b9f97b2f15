/* obbridge.h — the C face of the Open Babel bridge (obbridge.cc, the only C++).
 *
 * Open Babel 3.1.1 is not thread-safe and crashes or hangs on some inputs:
 * call these only in single-threaded worker processes (chem/workers.h).
 */
#ifndef SE3_OBBRIDGE_H
#define SE3_OBBRIDGE_H

#include <stddef.h>
#include "chem/mol.h"

struct se3_error;

enum ob_gen3d { OB_GEN3D_NEVER = 0, OB_GEN3D_AUTO, OB_GEN3D_ALWAYS };
/* The 3D generator's version: raised whenever the same molecule, settings
 * and seed come out with another shape, so that shapes made by an older
 * generator are made again (ingest keys its parts by it). 1: before
 * 2026-11-28; 2: rings laid from templates within one rigid piece, every
 * shape checked bond by bond (chem/shape.h), UFF set up around its
 * uninitialised torsions (issue 67); 3: an angle at a fusion or spiro atom
 * held to what crystal structures show (chem/shape.c). */
#define OB_GEN3D_VERSION "3"
/* fast: builder + hydrogens; medium: + 250 steps of MMFF94 conjugate
 * gradients (UFF if MMFF94 has no parameters); best: + 2000 steps. */
enum ob_quality { OB_Q_FAST = 0, OB_Q_MEDIUM, OB_Q_BEST };

/* A record of several fragments (a salt's counter-ion, a solvent): keep the
 * largest organic fragment (the most heavy atoms among those with carbon;
 * the first of equals), reject the record, or keep every fragment. */
enum ob_fragments { OB_FRAG_LARGEST = 0, OB_FRAG_REJECT, OB_FRAG_KEEP };
/* Protonation: as the input has it, neutralised (+1/-1 charges that a
 * hydrogen can undo), or at ph by our table of ionisable groups (ionise.h). */
enum ob_protonate { OB_PROT_KEEP = 0, OB_PROT_NEUTRAL, OB_PROT_PH };
/* The standardiser (ionise.h): basic (ionic metal bonds broken, one form for
 * nitro, N-oxide, azide, diazo, sulfoxide and the like, no stereo on an N
 * carrying a hydrogen) or none. */
enum ob_standardize { OB_STD_BASIC = 0, OB_STD_NONE };

struct ob_parse_opts {
  const char *format;       /* Open Babel format id: "sdf", "mol2", "smi", ... */
  int add_hydrogens;
  enum ob_gen3d gen3d;      /* auto: only molecules without 3D coordinates */
  enum ob_quality quality;
  unsigned seed;            /* gen3d is deterministic for a given seed */
  int max_atoms;            /* refuse before canonicalisation/InChI/gen3d (they crash on huge inputs);
                               counts the hydrogens to be added; <= 0 means 999 */
  size_t max_record_bytes;  /* 0: REC_MAX_RECORD_DEFAULT (chem/records.h) */
  enum ob_fragments fragments;
  enum ob_protonate protonate;
  enum ob_standardize standardize;
  double ph;                /* OB_PROT_PH: the pH */
  int allow_radicals;       /* 0: an atom with unpaired electrons rejects the record ("radical") */
  int conformers;           /* shapes a generated molecule gets (chem/conformers.h); <= 1: one */
  long max_atom_conformers; /* refuse a molecule whose atoms (hydrogens counted) times its shapes (conformers
                               when generated, else one) pass this, before any shape is made; <= 0: no bound */
};

/* Once per process, before any parse: messages captured, formats and force
 * fields loaded. Every function here runs Open Babel on one OpenMP thread and
 * leaves the caller's thread count (omp_get_max_threads) as it found it. */
int ob_init(void);
/* Parse the first molecule in text. 0: *out filled (name, canonical SMILES,
 * InChIKey, formula, atoms with their mass numbers, bonds, input tags); 1:
 * rejected, with a reason (a NUL byte in the text is one).
 * In order: read; MOL2 records get the formal charges their Tripos atom
 * types imply (O.co2 of carboxylates, phosphates and sulfonates -1, N.4 and
 * four-valent N +1: DUD-E and ZINC files carry none, and Open Babel would
 * make radicals of them); the standardiser as o->standardize says;
 * fragments as o->fragments says; protonation as o->protonate says; the
 * radical check; then canonical SMILES, InChIKey and 3D coordinates (where
 * they are generated, the stereo the molecule left free counted and the
 * isomer the shape has named: out->stereo_free, out->isomer_smiles); for a
 * molecule whose coordinates were generated, up to o->conformers - 1 other
 * conformers (out->n_confs, out->confs; chem/conformers.h), none for one
 * that keeps its input's. */
int ob_parse(const char *text, size_t len, const struct ob_parse_opts *o, struct mol *out,
             char *reason, size_t reason_len);
/* ob_parse with the reason of a rejection as a struct mol_why (a fixed text
 * per kind, the atom, the detail): what the rejects table stores. On a
 * rejection out->name is the record's name where Open Babel read one (the
 * reject row's name; NULL otherwise) and the rest of out empty: the caller
 * frees it with mol_free either way. (ob_parse leaves out empty.) */
int ob_parse_why(const char *text, size_t len, const struct ob_parse_opts *o, struct mol *out,
                 struct mol_why *why);
/* The molecule as an SD record (with its tags and its atoms' mass numbers as
 * M  ISO lines), for hits.sdf and export. Caller frees. */
char *ob_write_sdf(const struct mol *m);
/* Open Babel's canonical SMILES of m (atoms with their charges, aromatic
 * flags and implicit hydrogens, and bonds; no stereo, no isotopes, no title:
 * a key of the graph, for scaffolds), malloc'd; NULL when Open Babel fails. */
char *ob_canonical_smiles(const struct mol *m);
/* The canonical isomeric SMILES of the configuration m's 3D coordinates
 * (its atoms' own: conformer 0, or the one mol_swap_conformer put there)
 * have, every stereocentre and stereo double bond perceived from them (but
 * a nitrogen carrying a hydrogen, with skip_nh: as ingest leaves it under
 * its default standardize or any protonate), with isotopes, no title;
 * malloc'd. NULL when m is not 3D or Open Babel fails. */
char *ob_isomer_smiles(const struct mol *m, int skip_nh);
/* A 2D depiction of a SMILES as one <svg> element (Open Babel's layout and
 * drawing; px pixels square, <= 0: 160, larger for a large molecule: a
 * bond is drawn at least 25 px long however many atoms there are), without
 * XML prolog so it can sit inline in HTML; malloc'd; NULL when Open Babel
 * cannot read or draw it. */
char *ob_depict_svg(const char *smiles, int px);
/* Docking's conversions (chem/dock.h). m as an AutoDock PDBQT ligand
 * (Open Babel's writer: a torsion tree, Gasteiger charges), with the
 * hydrogens m holds as counts placed in 3D and the non-polar ones (on
 * carbon) left out, as AutoDock's ligands are. Each ATOM's serial number s
 * is an atom of m: (*map)[s - 1], its 0-based number in m, or -1 for a
 * hydrogen placed here (*n_map entries, malloc'd), so that a docked pose
 * maps back. The text malloc'd, or NULL with err (may be NULL). */
char *ob_write_pdbqt(const struct mol *m, int **map, int *n_map, struct se3_error *err);
/* The first molecule of the file at path (its format by its extension) as
 * a rigid PDBQT receptor, with polar hydrogens placed for pH ph. malloc'd,
 * or NULL with err (SE3_ERR_INPUT: the file cannot be read, its file the
 * path; SE3_ERR_RUN: Open Babel failed). */
char *ob_receptor_pdbqt(const char *path, double ph, struct se3_error *err);
/* The box around the first molecule of the file at path: its atoms' least
 * and greatest coordinates, and their count. 0, or -1 with err (no 3D
 * coordinates included; its file the path where the file is at fault). */
int ob_file_extent(const char *path, double lo[3], double hi[3], int *n_atoms, struct se3_error *err);
/* Open Babel's version string. */
const char *ob_version(void);
/* The embedder 3D generation falls back on when the builder's fixes fail
 * ("RDKit ETKDGv3"), or NULL when this build has none (no RDKit). */
const char *ob_gen3d_fallback(void);

#endif
