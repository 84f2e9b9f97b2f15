/* mol.h — the molecule type, its stored blob, and the sanity checks.
 *
 * Blob layout (version 2 or 3, little-endian, stored in molecules.mol):
 *   offset 0  char[4]  magic "SE3M"
 *          4  u16      version (2, or 3 when an atom has a mass number)
 *          6  u16      flags (bit 0: coordinates are 3D; bit 1: coordinates are 2D)
 *          8  u32      n_atoms
 *         12  u32      n_bonds
 *         16  n_atoms x 16 bytes: u8 atomic number, i8 formal charge,
 *                      u8 flags (bit 0 aromatic), u8 implicit hydrogens,
 *                      f32 x, f32 y, f32 z (Å)
 *             n_bonds x 12 bytes: u32 begin, u32 end (0-based atom index,
 *                      begin < end), u8 order (1,2,3; 5 = aromatic),
 *                      u8[3] reserved 0
 *             version 3 and 4, the isotopes:
 *             u32      n_isotopes (version 3: 1..n_atoms; version 4: 0..n_atoms)
 *             n_isotopes x 8 bytes: u32 atom (0-based, increasing), u16 mass
 *                      number (> 0), u16 reserved 0
 *             version 4 only, the other conformers (stages.ingest.conformers):
 *             u32      n_extra (>= 1): conformers after the first (the atoms' own)
 *             n_extra x n_atoms x 12 bytes: f32 x, f32 y, f32 z (Å), conformer
 *                      by conformer, atoms in the order above
 *             u32      CRC-32C (common/crc32c.h) of every byte before it
 * Version 3 is version 2 with the isotopes section; it is written only for a
 * molecule with an atom of a given mass number ([13CH4], [2H]O[2H]), so a
 * molecule without one is stored byte for byte as before (and read by an
 * older se3screen). Version 4 is written only for a molecule with more than
 * one conformer, so a molecule of one is stored as before. Version 1 is version 2 without the checksum: it is still
 * read (unchecked; `se3screen verify` counts such rows as "unchecked, old
 * format"). A blob whose checksum does not match is refused ("checksum
 * mismatch"): the caller adds the table and row.
 */
#ifndef SE3_MOL_H
#define SE3_MOL_H

#include <stddef.h>
#include <stdint.h>

struct se3_error;

#define MOL_BLOB_MAGIC "SE3M"
#define MOL_BLOB_VERSION 4 /* the newest read and written (see above: 2 without isotopes, 4 with conformers) */
#define MOL_MAX_CONFORMERS 64 /* stages.ingest.conformers' bound; a blob with more is refused */
#define MOL_BLOB_CRC 4 /* trailing checksum bytes, version 2 on */
#define MOL_BOND_AROMATIC 5

struct mol_atom {
  uint8_t z;          /* atomic number, 0 for dummy atoms */
  int8_t charge;      /* formal charge */
  uint8_t aromatic;
  uint8_t implicit_h; /* hydrogens on this atom that are not in atoms[] */
  uint16_t isotope;   /* mass number ([13CH4]: 13, [2H]: 2); 0 = not given (the natural mixture).
                         Kept for identity and output (SMILES, InChIKey, SD M  ISO); the
                         model's features are by element and ignore it */
  double x, y, z_;    /* coordinates in Å (z_ to avoid clashing with z) */
};

struct mol_bond {
  uint32_t a, b;      /* 0-based, a < b */
  uint8_t order;      /* 1, 2, 3, or MOL_BOND_AROMATIC */
};

struct mol_tag {      /* an SD tag or other name/value pair from the input */
  char *name;
  char *value;
};

struct mol {
  char *name;         /* title; may be "" */
  char *smiles;       /* canonical SMILES (Open Babel "can") */
  char *inchikey;
  char *formula;
  int dim;            /* dimensionality of the coordinates as read: 0, 2 or 3 */
  int coords_gen3d;   /* 1 when coordinates came from 3D generation */
  int shape;          /* what became of its shape (not stored in the blob): MOL_SHAPE_* */
  int charge;         /* total formal charge */
  int n_atoms, n_bonds, n_tags;
  struct mol_atom *atoms;
  struct mol_bond *bonds;
  struct mol_tag *tags;
  /* Conformers after the first (whose coordinates are the atoms' own): 0 for
   * one shape. confs holds n_confs x n_atoms x 3 coordinates (Å), conformer
   * by conformer; the blob keeps them (version 4) and mol_pack carries them. */
  int n_confs;
  double *confs;
  /* Stereo the input left open (not stored in the blob; molecules columns):
   * stereo_free counts the stereocentres and stereo double bonds whose
   * configuration the input did not give and a generated 3D shape fixed (0
   * when none, or when the shape is the file's own); isomer_smiles, where
   * stereo_free > 0, is the isomer the shape has (canonical isomeric SMILES
   * perceived from its coordinates), else NULL. */
  int stereo_free;
  char *isomer_smiles;
};

/* struct mol's shape: as made, or what the check of chem/shape.h led to. */
enum {
  MOL_SHAPE_AS_MADE = 0,    /* generated and within bounds at once, or the file's own coordinates */
  MOL_SHAPE_FIXED = 1,      /* the first generated shape was out of bounds; a fix brought it within */
  MOL_SHAPE_REGENERATED = 2 /* the file's coordinates were out of bounds; generated instead */
};

void mol_init(struct mol *m);
void mol_free(struct mol *m);  /* frees members and re-initialises */
int mol_n_heavy(const struct mol *m);
/* Conformers of m: 1 + n_confs. */
int mol_n_conformers(const struct mol *m);
/* Swaps the atoms' coordinates with conformer c's (1..n_confs; 0 does
 * nothing): the atoms then hold conformer c, and a second call with the same
 * c puts them back. */
void mol_swap_conformer(struct mol *m, int c);
/* Value of a tag, NULL when absent. */
const char *mol_tag(const struct mol *m, const char *name);
/* Add a tag (copies both strings). Returns 0, or -1 on allocation failure. */
int mol_add_tag(struct mol *m, const char *name, const char *value);

/* The stored blob (coordinates as f32). Caller frees *blob. */
int mol_to_blob(const struct mol *m, uint8_t **blob, size_t *len);
/* Fills atoms/bonds/dim from a blob; other fields are left empty.
 * Returns 0, or -1 with err (SE3_ERR_RUN: a damaged blob; SE3_ERR_MEMORY;
 * err may be NULL). */
int mol_from_blob(const uint8_t *blob, size_t len, struct mol *m, struct se3_error *err);

/* The complete molecule (strings, tags, coordinates as f64) as bytes, for
 * passing between processes. */
int mol_pack(const struct mol *m, uint8_t **buf, size_t *len);
int mol_unpack(const uint8_t *buf, size_t len, struct mol *m);

/* mol_check refuses a coordinate beyond ±this (Å): far past any molecule or
 * depiction, and far enough below FLT_MAX that every distance and relative
 * position between two atoms is a finite float in the stored graph. */
#define MOL_MAX_COORD 1e6

struct mol_check_opts {
  int max_atoms;               /* reject above this many atoms (with H) */
  int min_heavy_atoms;         /* reject below this many non-hydrogen atoms; 0 = off */
  int reject_lone_hydrogen;    /* reject a neutral H bonded to nothing (in a molecule of > 1 atom) */
  const uint8_t *elements;     /* allowed atomic numbers, NULL = any */
  int n_elements;
  double min_distance;         /* reject two atoms closer than this (Å), 0.5 */
  double max_fragment_gap;     /* reject a fragment farther than this from the rest (Å); 0 = off */
};

/* Why a molecule was refused. reason is one fixed text per kind ("radical",
 * "atoms too close", ...) so that rejects group by it; atom is the 1-based
 * atom it concerns (0: none); detail says the specifics ("O atom 7 has 1
 * unpaired electron", "atoms 3 and 9 are 0.31 Å apart (< 0.5)"), "" when
 * the reason says all. */
struct mol_why {
  char reason[128];
  char detail[384];
  int atom;
};
void mol_why_clear(struct mol_why *w);
void mol_why_set(struct mol_why *w, int atom, const char *reason, const char *detail_fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* One line for messages: "reason" or "reason: detail". */
void mol_why_text(const struct mol_why *w, char *buf, size_t len);

/* mol_check_why: 0 when the molecule passes; 1 with why filled otherwise
 * (why may be NULL). mol_check: the same with why as one line of text
 * (mol_why_text; reason may be NULL or len 0; "" when it passes).
 * Checks, in this order, each with its reason (the atom: the one concerned):
 *   "no atoms"; "too many atoms" ("1204 > 999"); "bad bond" (a bond to an
 *   atom that is not there or to itself; the atom: its first end when real);
 *   "dummy atom"; "unknown element" (atomic number above 118); "element not
 *   allowed" (not in elements); "non-finite coordinate"; "coordinate out of
 *   range" (beyond ±MOL_MAX_COORD, whatever the dimension); "too few heavy
 *   atoms" (min_heavy_atoms); "hydrogen without a bond" (a neutral H in a
 *   molecule of more than one atom, when reject_lone_hydrogen); "impossible
 *   valence" (e.g. carbon with five bonds, neutral silicon with six);
 *   "impossible charge" (past +-3 on H, B-F, P, S, Cl, Br, I; past +-4 on
 *   any element); "atoms too close" (the first of
 *   the first pair in atom order closer than min_distance); "fragment far
 *   from the rest" (the lowest atom of the smallest group of fragments
 *   farther than max_fragment_gap from every other atom); "out of memory".
 * Distance checks only apply to 3D molecules and use a cell list (O(N)). */
int mol_check_why(const struct mol *m, const struct mol_check_opts *o, struct mol_why *why);
int mol_check(const struct mol *m, const struct mol_check_opts *o, char *reason, size_t len);

/* Atomic number of an element symbol ("C", "Cl"), 0 when unknown. */
int mol_element_z(const char *symbol);
const char *mol_element_symbol(int z);

#endif
