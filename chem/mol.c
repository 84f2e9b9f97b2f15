/* mol.c — the molecule type, its stored blob, its packed form and the sanity
 * checks (see mol.h for the blob layout).
 *
 * Output structs (mol_from_blob, mol_unpack) are overwritten: they are
 * re-initialised, not freed, so pass a fresh or mol_free'd struct.
 */
#define _POSIX_C_SOURCE 200809L
#include "chem/mol.h"
#include "chem/cells.h"
#include "common/crc32c.h"
#include "common/error.h"
#include "common/le.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- basics */

void mol_init(struct mol *m) { memset(m, 0, sizeof *m); }

void mol_free(struct mol *m) {
  if (!m) return;
  free(m->name);
  free(m->smiles);
  free(m->inchikey);
  free(m->formula);
  free(m->atoms);
  free(m->bonds);
  for (int i = 0; i < m->n_tags; i++) {
    free(m->tags[i].name);
    free(m->tags[i].value);
  }
  free(m->tags);
  free(m->confs);
  free(m->isomer_smiles);
  mol_init(m);
}

int mol_n_conformers(const struct mol *m) { return 1 + (m->n_confs > 0 && m->confs ? m->n_confs : 0); }

void mol_swap_conformer(struct mol *m, int c) {
  if (c < 1 || c > m->n_confs || !m->confs) return;
  double *x = m->confs + (size_t)(c - 1) * (size_t)m->n_atoms * 3;
  for (int i = 0; i < m->n_atoms; i++, x += 3) {
    struct mol_atom *a = &m->atoms[i];
    double t[3] = {a->x, a->y, a->z_};
    a->x = x[0];
    a->y = x[1];
    a->z_ = x[2];
    memcpy(x, t, sizeof t);
  }
}

int mol_n_heavy(const struct mol *m) {
  int n = 0;
  for (int i = 0; i < m->n_atoms; i++)
    if (m->atoms[i].z > 1) n++;
  return n;
}

const char *mol_tag(const struct mol *m, const char *name) {
  for (int i = 0; i < m->n_tags; i++)
    if (m->tags[i].name && strcmp(m->tags[i].name, name) == 0) return m->tags[i].value;
  return NULL;
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

int mol_add_tag(struct mol *m, const char *name, const char *value) {
  struct mol_tag *t = realloc(m->tags, (size_t)(m->n_tags + 1) * sizeof *t);
  if (!t) return -1;
  m->tags = t;
  char *n = dup_str(name ? name : "");
  char *v = dup_str(value ? value : "");
  if (!n || !v) {
    free(n);
    free(v);
    return -1;
  }
  t[m->n_tags].name = n;
  t[m->n_tags].value = v;
  m->n_tags++;
  return 0;
}

/* ------------------------------------------------------------------ blob */

enum { BLOB_HEADER = 16, BLOB_ATOM = 16, BLOB_BOND = 12, BLOB_ISOTOPE = 8 };
enum { BLOB_FLAG_3D = 1, BLOB_FLAG_2D = 2 };

int mol_to_blob(const struct mol *m, uint8_t **blob, size_t *len) {
  *blob = NULL;
  *len = 0;
  if (m->n_atoms < 0 || m->n_bonds < 0) return -1;
  /* Version 3 only when there are isotopes, 4 only when there are several
   * conformers: other molecules keep version 2's bytes. */
  uint32_t n_iso = 0, n_extra = m->confs && m->n_confs > 0 ? (uint32_t)m->n_confs : 0;
  for (int i = 0; i < m->n_atoms; i++)
    n_iso += m->atoms[i].isotope != 0;
  unsigned version = n_extra ? 4 : n_iso ? 3 : 2;
  size_t n = BLOB_HEADER + (size_t)m->n_atoms * BLOB_ATOM + (size_t)m->n_bonds * BLOB_BOND +
             (version >= 3 ? 4 + (size_t)n_iso * BLOB_ISOTOPE : 0) +
             (n_extra ? 4 + (size_t)n_extra * (size_t)m->n_atoms * 12 : 0) + MOL_BLOB_CRC;
  uint8_t *b = calloc(1, n);
  if (!b) return -1;
  memcpy(b, MOL_BLOB_MAGIC, 4);
  le_put_u16(b + 4, (uint16_t)version);
  le_put_u16(b + 6, m->dim == 3 ? BLOB_FLAG_3D : m->dim == 2 ? BLOB_FLAG_2D : 0);
  le_put_u32(b + 8, (uint32_t)m->n_atoms);
  le_put_u32(b + 12, (uint32_t)m->n_bonds);
  uint8_t *p = b + BLOB_HEADER;
  for (int i = 0; i < m->n_atoms; i++, p += BLOB_ATOM) {
    const struct mol_atom *a = &m->atoms[i];
    p[0] = a->z;
    p[1] = (uint8_t)a->charge;
    p[2] = a->aromatic ? 1 : 0;
    p[3] = a->implicit_h;
    le_put_f32(p + 4, a->x);
    le_put_f32(p + 8, a->y);
    le_put_f32(p + 12, a->z_);
  }
  for (int i = 0; i < m->n_bonds; i++, p += BLOB_BOND) {
    const struct mol_bond *bd = &m->bonds[i];
    le_put_u32(p, bd->a);
    le_put_u32(p + 4, bd->b);
    p[8] = bd->order;
  }
  if (version >= 3) {
    le_put_u32(p, n_iso);
    p += 4;
    for (int i = 0; i < m->n_atoms; i++)
      if (m->atoms[i].isotope) {
        le_put_u32(p, (uint32_t)i);
        le_put_u16(p + 4, m->atoms[i].isotope);
        p += BLOB_ISOTOPE;
      }
  }
  if (n_extra) {
    le_put_u32(p, n_extra);
    p += 4;
    const double *x = m->confs;
    for (size_t k = 0; k < (size_t)n_extra * (size_t)m->n_atoms; k++, x += 3, p += 12) {
      le_put_f32(p, x[0]);
      le_put_f32(p + 4, x[1]);
      le_put_f32(p + 8, x[2]);
    }
  }
  crc32c_seal(b, n);
  *blob = b;
  *len = n;
  return 0;
}

static int valid_order(unsigned o) { return o == 1 || o == 2 || o == 3 || o == MOL_BOND_AROMATIC; }

int mol_from_blob(const uint8_t *blob, size_t len, struct mol *m, struct se3_error *err) {
  mol_init(m);
  if (!blob || len < BLOB_HEADER) {
    se3_error_set(err, SE3_ERR_RUN, "molecule blob too short (%zu bytes, header is %d)", blob ? len : 0, BLOB_HEADER);
    return -1;
  }
  if (memcmp(blob, MOL_BLOB_MAGIC, 4) != 0) {
    se3_error_set(err, SE3_ERR_RUN, "not a molecule blob (bad magic, expected \"%s\")", MOL_BLOB_MAGIC);
    return -1;
  }
  unsigned version = le_get_u16(blob + 4);
  if (version < 1 || version > MOL_BLOB_VERSION) {
    se3_error_set(err, SE3_ERR_RUN, "unsupported molecule blob version %u (this se3screen reads 1 to %d)", version,
                  MOL_BLOB_VERSION);
    return -1;
  }
  unsigned crc = version >= 2 ? MOL_BLOB_CRC : 0; /* version 1 has no checksum */
  unsigned flags = le_get_u16(blob + 6);
  uint32_t na = le_get_u32(blob + 8), nb = le_get_u32(blob + 12);
  uint64_t want = BLOB_HEADER + (uint64_t)na * BLOB_ATOM + (uint64_t)nb * BLOB_BOND + crc;
  uint32_t n_iso = 0, n_extra = 0;
  if (version >= 3) { /* the isotopes section: its count sits after the bonds */
    if (want + 4 <= len) n_iso = le_get_u32(blob + (want - crc));
    want += 4 + (uint64_t)n_iso * BLOB_ISOTOPE;
  }
  if (version >= 4) { /* the conformers: their count after the isotopes */
    if (want + 4 <= len) n_extra = le_get_u32(blob + (want - crc));
    if (n_extra < 1 || n_extra >= MOL_MAX_CONFORMERS) {
      se3_error_set(err, SE3_ERR_RUN, "molecule blob: %u extra conformers (1 to %d)", (unsigned)n_extra,
                    MOL_MAX_CONFORMERS - 1);
      return -1;
    }
    want += 4 + (uint64_t)n_extra * na * 12;
  }
  if (want != len || na > (uint32_t)INT32_MAX || nb > (uint32_t)INT32_MAX) {
    se3_error_set(err, SE3_ERR_RUN, "molecule blob size mismatch: %zu bytes, expected %llu for %u atoms and %u bonds",
                  len, (unsigned long long)want, (unsigned)na, (unsigned)nb);
    return -1;
  }
  uint32_t stored, computed;
  if (crc && crc32c_verify(blob, len, &stored, &computed)) {
    se3_error_set(err, SE3_ERR_RUN, "molecule blob checksum mismatch (stored 0x%08x, computed 0x%08x)",
                  (unsigned)stored, (unsigned)computed);
    return -1;
  }
  struct mol_atom *atoms = na ? calloc(na, sizeof *atoms) : NULL;
  struct mol_bond *bonds = nb ? calloc(nb, sizeof *bonds) : NULL;
  if ((na && !atoms) || (nb && !bonds)) {
    free(atoms);
    free(bonds);
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory decoding a molecule blob of %u atoms", (unsigned)na);
    return -1;
  }
  const uint8_t *p = blob + BLOB_HEADER;
  for (uint32_t i = 0; i < na; i++, p += BLOB_ATOM) {
    atoms[i].z = p[0];
    atoms[i].charge = (int8_t)p[1];
    atoms[i].aromatic = p[2] & 1;
    atoms[i].implicit_h = p[3];
    atoms[i].x = le_get_f32(p + 4);
    atoms[i].y = le_get_f32(p + 8);
    atoms[i].z_ = le_get_f32(p + 12);
  }
  for (uint32_t i = 0; i < nb; i++, p += BLOB_BOND) {
    bonds[i].a = le_get_u32(p);
    bonds[i].b = le_get_u32(p + 4);
    bonds[i].order = p[8];
    if (bonds[i].a >= bonds[i].b || bonds[i].b >= na) {
      se3_error_set(err, SE3_ERR_RUN, "molecule blob: bond %u joins atoms %u and %u (of %u)", (unsigned)i,
                    (unsigned)bonds[i].a, (unsigned)bonds[i].b, (unsigned)na);
      goto bad;
    }
    if (!valid_order(bonds[i].order)) {
      se3_error_set(err, SE3_ERR_RUN, "molecule blob: bond %u has order %u", (unsigned)i, bonds[i].order);
      goto bad;
    }
  }
  if (version >= 3) {
    if ((version == 3 && n_iso == 0) || n_iso > na) {
      se3_error_set(err, SE3_ERR_RUN, "molecule blob: %u isotopes for %u atoms", (unsigned)n_iso, (unsigned)na);
      goto bad;
    }
    p += 4;
    int64_t prev = -1;
    for (uint32_t k = 0; k < n_iso; k++, p += BLOB_ISOTOPE) {
      uint32_t at = le_get_u32(p);
      unsigned mass = le_get_u16(p + 4);
      if ((int64_t)at <= prev || at >= na || mass == 0) {
        se3_error_set(err, SE3_ERR_RUN, "molecule blob: isotope %u (atom %u, mass number %u) out of order or range",
                      (unsigned)k, (unsigned)at, mass);
        goto bad;
      }
      atoms[at].isotope = (uint16_t)mass;
      prev = at;
    }
  }
  if (n_extra) {
    p += 4;
    size_t nx = (size_t)n_extra * na * 3;
    if (!na || !(m->confs = malloc(nx * sizeof *m->confs))) {
      se3_error_set(err, na ? SE3_ERR_MEMORY : SE3_ERR_RUN,
                    na ? "out of memory decoding a molecule's conformers" : "molecule blob: conformers of no atoms");
      goto bad;
    }
    for (size_t k = 0; k < nx; k++, p += 4)
      m->confs[k] = le_get_f32(p);
    m->n_confs = (int)n_extra;
  }
  m->atoms = atoms;
  m->bonds = bonds;
  m->n_atoms = (int)na;
  m->n_bonds = (int)nb;
  m->dim = (flags & BLOB_FLAG_3D) ? 3 : (flags & BLOB_FLAG_2D) ? 2 : 0;
  return 0;
bad:
  free(atoms);
  free(bonds);
  mol_init(m);
  return -1;
}

/* ---------------------------------------------------------- pack/unpack
 * Private format: "SE3P", u32 version, then
 *   str name, str smiles, str inchikey, str formula,
 *   i32 dim, i32 coords_gen3d, i32 shape, i32 charge, u32 n_atoms, u32 n_bonds, u32 n_tags,
 *   atoms: u8 z, i8 charge, u8 aromatic, u8 implicit_h, f64 x, y, z, u16 isotope
 *   bonds: u32 a, u32 b, u8 order
 *   tags:  str name, str value
 *   i32 stereo_free, str isomer_smiles,
 *   u32 n_confs, then n_confs x n_atoms x 3 f64: the other conformers
 * where str is u32 length (0xffffffff = NULL) and that many bytes.
 */

#define PACK_MAGIC "SE3P"
enum { PACK_VERSION = 5, PACK_ATOM = 30, PACK_BOND = 9 };
static const uint32_t PACK_NULL = 0xffffffffu;

static size_t str_size(const char *s) { return 4 + (s ? strlen(s) : 0); }
static uint8_t *put_str(uint8_t *p, const char *s) {
  if (!s) {
    le_put_u32(p, PACK_NULL);
    return p + 4;
  }
  size_t n = strlen(s);
  le_put_u32(p, (uint32_t)n);
  memcpy(p + 4, s, n);
  return p + 4 + n;
}

int mol_pack(const struct mol *m, uint8_t **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  if (m->n_atoms < 0 || m->n_bonds < 0 || m->n_tags < 0) return -1;
  size_t n = 8 + str_size(m->name) + str_size(m->smiles) + str_size(m->inchikey) + str_size(m->formula) + 28 +
             (size_t)m->n_atoms * PACK_ATOM + (size_t)m->n_bonds * PACK_BOND;
  for (int i = 0; i < m->n_tags; i++)
    n += str_size(m->tags[i].name) + str_size(m->tags[i].value);
  uint32_t nc = m->confs && m->n_confs > 0 ? (uint32_t)m->n_confs : 0;
  n += 4 + str_size(m->isomer_smiles) + 4 + (size_t)nc * (size_t)m->n_atoms * 24;
  uint8_t *b = malloc(n), *p = b;
  if (!b) return -1;
  memcpy(p, PACK_MAGIC, 4);
  le_put_u32(p + 4, PACK_VERSION);
  p += 8;
  p = put_str(p, m->name);
  p = put_str(p, m->smiles);
  p = put_str(p, m->inchikey);
  p = put_str(p, m->formula);
  le_put_u32(p, (uint32_t)m->dim);
  le_put_u32(p + 4, (uint32_t)m->coords_gen3d);
  le_put_u32(p + 8, (uint32_t)m->shape);
  le_put_u32(p + 12, (uint32_t)m->charge);
  le_put_u32(p + 16, (uint32_t)m->n_atoms);
  le_put_u32(p + 20, (uint32_t)m->n_bonds);
  le_put_u32(p + 24, (uint32_t)m->n_tags);
  p += 28;
  for (int i = 0; i < m->n_atoms; i++, p += PACK_ATOM) {
    const struct mol_atom *a = &m->atoms[i];
    p[0] = a->z;
    p[1] = (uint8_t)a->charge;
    p[2] = a->aromatic;
    p[3] = a->implicit_h;
    le_put_f64(p + 4, a->x);
    le_put_f64(p + 12, a->y);
    le_put_f64(p + 20, a->z_);
    le_put_u16(p + 28, a->isotope);
  }
  for (int i = 0; i < m->n_bonds; i++, p += PACK_BOND) {
    le_put_u32(p, m->bonds[i].a);
    le_put_u32(p + 4, m->bonds[i].b);
    p[8] = m->bonds[i].order;
  }
  for (int i = 0; i < m->n_tags; i++) {
    p = put_str(p, m->tags[i].name);
    p = put_str(p, m->tags[i].value);
  }
  le_put_u32(p, (uint32_t)m->stereo_free);
  p = put_str(p + 4, m->isomer_smiles);
  le_put_u32(p, nc);
  p += 4;
  for (size_t k = 0; k < (size_t)nc * (size_t)m->n_atoms * 3; k++, p += 8)
    le_put_f64(p, m->confs[k]);
  *buf = b;
  *len = n;
  return 0;
}

struct cursor {
  const uint8_t *p, *end;
  int bad;
};

static const uint8_t *take(struct cursor *c, size_t n) {
  if (c->bad || (size_t)(c->end - c->p) < n) {
    c->bad = 1;
    return NULL;
  }
  const uint8_t *r = c->p;
  c->p += n;
  return r;
}
static uint32_t take_u32(struct cursor *c) {
  const uint8_t *p = take(c, 4);
  return p ? le_get_u32(p) : 0;
}
/* Reads a str; *ok = 0 on a malformed buffer or allocation failure. */
static char *take_str(struct cursor *c) {
  uint32_t n = take_u32(c);
  if (c->bad || n == PACK_NULL) return NULL;
  const uint8_t *p = take(c, n);
  if (!p) return NULL;
  char *s = malloc((size_t)n + 1);
  if (!s) {
    c->bad = 1;
    return NULL;
  }
  memcpy(s, p, n);
  s[n] = 0;
  return s;
}

int mol_unpack(const uint8_t *buf, size_t len, struct mol *m) {
  mol_init(m);
  struct cursor c = {buf, buf + len, 0};
  const uint8_t *h = buf ? take(&c, 8) : NULL;
  if (!h || memcmp(h, PACK_MAGIC, 4) != 0 || le_get_u32(h + 4) != PACK_VERSION) return -1;
  m->name = take_str(&c);
  m->smiles = take_str(&c);
  m->inchikey = take_str(&c);
  m->formula = take_str(&c);
  m->dim = (int32_t)take_u32(&c);
  m->coords_gen3d = (int32_t)take_u32(&c);
  m->shape = (int32_t)take_u32(&c);
  m->charge = (int32_t)take_u32(&c);
  uint32_t na = take_u32(&c), nb = take_u32(&c), nt = take_u32(&c);
  if (c.bad) goto bad;
  /* Sizes must fit in what is left before allocating anything. */
  if ((uint64_t)na * PACK_ATOM + (uint64_t)nb * PACK_BOND + (uint64_t)nt * 8 > (uint64_t)(c.end - c.p) ||
      na > INT32_MAX || nb > INT32_MAX || nt > INT32_MAX)
    goto bad;
  if (na && !(m->atoms = calloc(na, sizeof *m->atoms))) goto bad;
  if (nb && !(m->bonds = calloc(nb, sizeof *m->bonds))) goto bad;
  if (nt && !(m->tags = calloc(nt, sizeof *m->tags))) goto bad;
  m->n_atoms = (int)na;
  m->n_bonds = (int)nb;
  for (uint32_t i = 0; i < na; i++) {
    const uint8_t *p = take(&c, PACK_ATOM);
    struct mol_atom *a = &m->atoms[i];
    a->z = p[0];
    a->charge = (int8_t)p[1];
    a->aromatic = p[2];
    a->implicit_h = p[3];
    a->x = le_get_f64(p + 4);
    a->y = le_get_f64(p + 12);
    a->z_ = le_get_f64(p + 20);
    a->isotope = le_get_u16(p + 28);
  }
  for (uint32_t i = 0; i < nb; i++) {
    const uint8_t *p = take(&c, PACK_BOND);
    m->bonds[i].a = le_get_u32(p);
    m->bonds[i].b = le_get_u32(p + 4);
    m->bonds[i].order = p[8];
  }
  for (uint32_t i = 0; i < nt; i++) {
    m->tags[i].name = take_str(&c);
    m->tags[i].value = take_str(&c);
    m->n_tags = (int)i + 1;
    if (c.bad) goto bad;
  }
  m->stereo_free = (int32_t)take_u32(&c);
  m->isomer_smiles = take_str(&c);
  uint32_t nc = take_u32(&c);
  if (c.bad || nc >= MOL_MAX_CONFORMERS || (uint64_t)nc * na * 24 != (uint64_t)(c.end - c.p)) goto bad;
  if (nc && na) {
    size_t nx = (size_t)nc * na * 3;
    if (!(m->confs = malloc(nx * sizeof *m->confs))) goto bad;
    for (size_t k = 0; k < nx; k++)
      m->confs[k] = le_get_f64(take(&c, 8));
    m->n_confs = (int)nc;
  }
  if (c.bad || c.p != c.end) goto bad;
  return 0;
bad:
  mol_free(m);
  return -1;
}

/* -------------------------------------------------------------- elements */

static const char *const ELEMENTS[119] = {
    "*",  "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",  "Ne", "Na", "Mg", "Al", "Si", "P",  "S",
    "Cl", "Ar", "K",  "Ca", "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "As",
    "Se", "Br", "Kr", "Rb", "Sr", "Y",  "Zr", "Nb", "Mo", "Tc", "Ru", "Rh", "Pd", "Ag", "Cd", "In", "Sn",
    "Sb", "Te", "I",  "Xe", "Cs", "Ba", "La", "Ce", "Pr", "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho",
    "Er", "Tm", "Yb", "Lu", "Hf", "Ta", "W",  "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po",
    "At", "Rn", "Fr", "Ra", "Ac", "Th", "Pa", "U",  "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md",
    "No", "Lr", "Rf", "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og"};

/* Exact spelling first ("Co"), then any case ("CO", "cl"): symbols are
 * distinct ignoring case, so the fallback is unambiguous. */
int mol_element_z(const char *symbol) {
  if (!symbol || !*symbol) return 0;
  for (int z = 1; z <= 118; z++)
    if (strcmp(symbol, ELEMENTS[z]) == 0) return z;
  for (int z = 1; z <= 118; z++)
    if (strcasecmp(symbol, ELEMENTS[z]) == 0) return z;
  return 0;
}

/* "*" for 0 (dummy), "?" outside 0..118. */
const char *mol_element_symbol(int z) { return z >= 0 && z <= 118 ? ELEMENTS[z] : "?"; }

/* ------------------------------------------------------------- cell list
 * Neighbour searches use the shared cell list (chem/cells.h): a query visits
 * the 27 cells around an atom; hash collisions only cost extra distance
 * tests, never a missed pair.
 */

static double dist2(const struct mol_atom *a, const struct mol_atom *b) {
  double dx = a->x - b->x, dy = a->y - b->y, dz = a->z_ - b->z_;
  return dx * dx + dy * dy + dz * dz;
}

/* Visits the atoms of the 27 cells around atom i (each bucket once). fn
 * returns nonzero to stop. */
typedef int (*visit_fn)(void *ctx, int i, int j);
static int visit_around(const struct cells *g, int i, visit_fn fn, void *ctx) {
  uint32_t around[27];
  int n = cells_around(g, i, around);
  for (int s = 0; s < n; s++)
    for (uint32_t t = g->start[around[s]]; t < g->start[around[s] + 1]; t++) {
      int r = fn(ctx, i, (int)g->atom[t]);
      if (r) return r;
    }
  return 0;
}

struct close_ctx {
  const struct mol *m;
  double lim2;
  int best_j; /* smallest j > i closer than the limit, or -1 */
  double best_d2;
};

static int close_visit(void *vctx, int i, int j) {
  struct close_ctx *c = vctx;
  if (j <= i || (c->best_j >= 0 && j >= c->best_j)) return 0;
  double d2 = dist2(&c->m->atoms[i], &c->m->atoms[j]);
  if (d2 < c->lim2) {
    c->best_j = j;
    c->best_d2 = d2;
  }
  return 0;
}

/* First pair (i, j), i < j, in lexicographic order closer than lim; 1 when
 * found, 0 when none, -1 on allocation failure. */
static int find_close_pair(const struct mol *m, double lim, int *pi, int *pj, double *pd) {
  struct cells g;
  if (cells_build(&g, m, lim) != 0) return -1;
  struct close_ctx c = {m, lim * lim, -1, 0};
  int found = 0;
  for (int i = 0; i < m->n_atoms && !found; i++) {
    c.best_j = -1;
    visit_around(&g, i, close_visit, &c);
    if (c.best_j >= 0) {
      *pi = i;
      *pj = c.best_j;
      *pd = sqrt(c.best_d2);
      found = 1;
    }
  }
  cells_free(&g);
  return found;
}

/* Union-find with full path compression: afterwards parent[x] is the root. */
static int uf_find(int *parent, int x) {
  int r = x;
  while (parent[r] != r)
    r = parent[r];
  while (parent[x] != r) {
    int next = parent[x];
    parent[x] = r;
    x = next;
  }
  return r;
}

static void uf_union(int *parent, int a, int b) {
  a = uf_find(parent, a);
  b = uf_find(parent, b);
  if (a != b) parent[a < b ? b : a] = a < b ? a : b; /* the root is the lowest index */
}

/* Fragments (bonded components) within the gap of each other are joined into
 * groups; a molecule passes when there is one group. */
struct frag_ctx {
  const struct mol *m;
  const int *frag; /* fragment root of each atom */
  int *group;      /* union-find over fragment roots */
  int n_groups;
  double lim2;
};

static int frag_visit(void *vctx, int i, int j) {
  struct frag_ctx *c = vctx;
  if (c->frag[i] == c->frag[j]) return 0;
  int a = uf_find(c->group, c->frag[i]), b = uf_find(c->group, c->frag[j]);
  if (a == b) return 0;
  if (dist2(&c->m->atoms[i], &c->m->atoms[j]) <= c->lim2) {
    uf_union(c->group, a, b);
    if (--c->n_groups == 1) return 1;
  }
  return 0;
}

/* The smallest group of fragments (ties: the one holding the lowest atom
 * index) with no atom of another group within gap, when there are several
 * groups. 1 when found (*size atoms in *n_frags fragments, *dist to the
 * nearest atom outside, *first its lowest atom index), 0 when all fragments
 * hang together, -1 on allocation failure. */
static int find_far_fragment(const struct mol *m, double gap, int *size, int *n_frags, double *dist, int *first) {
  int n = m->n_atoms, rc = -1;
  int *frag = malloc((size_t)n * sizeof *frag);
  int *group = malloc((size_t)n * sizeof *group);
  int *count = calloc((size_t)n, sizeof *count);
  int *frags = calloc((size_t)n, sizeof *frags);
  if (!frag || !group || !count || !frags) goto out;
  for (int i = 0; i < n; i++)
    frag[i] = group[i] = i;
  for (int k = 0; k < m->n_bonds; k++)
    uf_union(frag, (int)m->bonds[k].a, (int)m->bonds[k].b);
  int n_frag = 0;
  for (int i = 0; i < n; i++) {
    frag[i] = uf_find(frag, i);
    n_frag += frag[i] == i;
  }
  rc = 0;
  if (n_frag < 2) goto out;
  struct cells g;
  if (cells_build(&g, m, gap) != 0) {
    rc = -1;
    goto out;
  }
  struct frag_ctx c = {m, frag, group, n_frag, gap * gap};
  for (int i = 0; i < n && c.n_groups > 1; i++)
    visit_around(&g, i, frag_visit, &c);
  cells_free(&g);
  if (c.n_groups == 1) goto out;
  for (int i = 0; i < n; i++) {
    int r = uf_find(group, frag[i]);
    count[r]++;
    frags[r] += frag[i] == i;
  }
  int pick = -1;
  for (int i = 0; i < n; i++)
    if (count[i] && (pick < 0 || count[i] < count[pick])) pick = i;
  double best = INFINITY;
  *first = -1;
  for (int i = 0; i < n; i++) {
    if (group[frag[i]] != pick) continue; /* flat after the finds above */
    if (*first < 0) *first = i;
    for (int j = 0; j < n; j++)
      if (group[frag[j]] != pick) {
        double d2 = dist2(&m->atoms[i], &m->atoms[j]);
        if (d2 < best) best = d2;
      }
  }
  *size = count[pick];
  *n_frags = frags[pick];
  *dist = sqrt(best);
  rc = 1;
out:
  free(frag);
  free(group);
  free(count);
  free(frags);
  return rc;
}

/* ----------------------------------------------------------------- check */

/* Most bonded neighbours (explicit + implicit H) an element can have, 0 for
 * no limit. Hypervalent main-group elements and metals are left alone. */
static int max_neighbours(int z, int charge) {
  switch (z) {
  case 14:
    return charge ? 6 : 4; /* Si: four neutral; hexafluorosilicate's six charged */
  case 1:
    return 1; /* H */
  case 5:
    return 4; /* B (borate) */
  case 6:
    return 4; /* C */
  case 7:
    return 4; /* N (ammonium, N-oxide) */
  case 8:
    return 3; /* O (oxonium) */
  case 9:
    return 1; /* F */
  default:
    return 0;
  }
}

/* Largest sum of bond orders (+ implicit H) for atoms without aromatic bonds,
 * 0 for no limit; N is left to the neighbour count because pentavalent nitro
 * groups (N(=O)=O) are common in old data sets. */
static int max_order_sum(int z) {
  switch (z) {
  case 1:
    return 1;
  case 5:
    return 4;
  case 6:
    return 4;
  case 8:
    return 3;
  case 9:
    return 1;
  default:
    return 0;
  }
}

void mol_why_clear(struct mol_why *w) {
  if (!w) return;
  w->reason[0] = w->detail[0] = 0;
  w->atom = 0;
}

void mol_why_set(struct mol_why *w, int atom, const char *reason, const char *detail_fmt, ...) {
  if (!w) return;
  snprintf(w->reason, sizeof w->reason, "%s", reason ? reason : "");
  w->atom = atom;
  w->detail[0] = 0;
  if (detail_fmt) {
    va_list ap;
    va_start(ap, detail_fmt);
    vsnprintf(w->detail, sizeof w->detail, detail_fmt, ap);
    va_end(ap);
  }
}

void mol_why_text(const struct mol_why *w, char *buf, size_t len) {
  if (!buf || !len) return;
  if (!w) {
    buf[0] = 0;
    return;
  }
  if (w->detail[0])
    snprintf(buf, len, "%s: %s", w->reason, w->detail);
  else
    snprintf(buf, len, "%s", w->reason);
}

/* mol_check_why's first step: every bond joins two atoms of the molecule,
 * every atom is a known, allowed element at finite coordinates in range.
 * 0, or 1 with the rejection in *why. */
static int check_atoms(const struct mol *m, const struct mol_check_opts *o, struct mol_why *why) {
  int n = m->n_atoms;
  for (int k = 0; k < m->n_bonds; k++) {
    const struct mol_bond *b = &m->bonds[k];
    if (b->a >= (uint32_t)n || b->b >= (uint32_t)n || b->a == b->b) {
      /* the atom only when the bond names a real one (its first end) */
      mol_why_set(why, b->a < (uint32_t)n ? (int)b->a + 1 : 0, "bad bond", "bond %d joins atoms %u and %u of %d", k + 1,
                  (unsigned)b->a + 1, (unsigned)b->b + 1, n);
      return 1;
    }
  }
  for (int i = 0; i < n; i++) {
    const struct mol_atom *a = &m->atoms[i];
    if (a->z == 0) {
      mol_why_set(why, i + 1, "dummy atom", "atom %d", i + 1);
      return 1;
    }
    if (a->z > 118) {
      mol_why_set(why, i + 1, "unknown element", "atomic number %d (atom %d)", a->z, i + 1);
      return 1;
    }
    if (o && o->elements) {
      int ok = 0;
      for (int k = 0; k < o->n_elements && !ok; k++)
        ok = o->elements[k] == a->z;
      if (!ok) {
        mol_why_set(why, i + 1, "element not allowed", "%s (atom %d)", mol_element_symbol(a->z), i + 1);
        return 1;
      }
    }
    const double c[3] = {a->x, a->y, a->z_};
    for (int k = 0; k < 3; k++)
      if (!isfinite(c[k])) {
        mol_why_set(why, i + 1, "non-finite coordinate", "atom %d: %c = %g", i + 1, "xyz"[k], c[k]);
        return 1;
      }
    /* Finite is not enough: two atoms at ±3e38 Å are 6e38 Å apart, which
     * overflows the float the graph stores, and nothing real is that far
     * out. Whatever the dimension (2D depictions use Å-like units too). */
    for (int k = 0; k < 3; k++)
      if (fabs(c[k]) > MOL_MAX_COORD) {
        mol_why_set(why, i + 1, "coordinate out of range", "atom %d: %c = %g Å, beyond ±%g Å", i + 1, "xyz"[k], c[k],
                    MOL_MAX_COORD);
        return 1;
      }
  }
  return 0;
}

/* mol_check_why's second: enough heavy atoms, no lone hydrogen, charges and
 * valences an atom can have (nbr, osum, arom: each atom's bonds, its bond
 * order sum with aromatic bonds as 1, whether it has an aromatic bond).
 * 0, or 1 with the rejection in *why. */
static int check_valences(const struct mol *m, const struct mol_check_opts *o, struct mol_why *why, const int *nbr,
                          const int *osum, const unsigned char *arom) {
  int n = m->n_atoms;
  if (o && o->min_heavy_atoms > 0 && mol_n_heavy(m) < o->min_heavy_atoms) {
    mol_why_set(why, 0, "too few heavy atoms", "%d heavy atom%s (fewer than %d)", mol_n_heavy(m),
                mol_n_heavy(m) == 1 ? "" : "s", o->min_heavy_atoms);
    return 1;
  }
  for (int i = 0; o && o->reject_lone_hydrogen && n > 1 && i < n; i++) {
    /* A neutral hydrogen bonded to nothing in a larger molecule is a broken
     * record (QM7's methane has two), not chemistry; H+ of a salt is fine. */
    const struct mol_atom *a = &m->atoms[i];
    if (a->z == 1 && nbr[i] == 0 && a->charge == 0) {
      mol_why_set(why, i + 1, "hydrogen without a bond", "hydrogen atom %d has no bond", i + 1);
      return 1;
    }
  }
  for (int i = 0; i < n; i++) {
    const struct mol_atom *a = &m->atoms[i];
    /* a formal charge no atom of a molecule carries: past +-4 for any
     * element ([N+9]), past +-3 for the organic elements and halogens ([C-4]) */
    int organic =
        a->z == 1 || (a->z >= 5 && a->z <= 9) || a->z == 15 || a->z == 16 || a->z == 17 || a->z == 35 || a->z == 53;
    int qmax = organic ? 3 : 4;
    if (a->charge > qmax || a->charge < -qmax) {
      mol_why_set(why, i + 1, "impossible charge", "%s atom %d has formal charge %+d (%d to %+d allowed)",
                  mol_element_symbol(a->z), i + 1, a->charge, -qmax, qmax);
      return 1;
    }
    int lim = max_neighbours(a->z, a->charge), have = nbr[i] + a->implicit_h;
    if (lim && have > lim) {
      mol_why_set(why, i + 1, "impossible valence", "%s atom %d has %d bonds", mol_element_symbol(a->z), i + 1, have);
      return 1;
    }
    lim = max_order_sum(a->z);
    have = osum[i] + a->implicit_h;
    if (lim && !arom[i] && have > lim) {
      mol_why_set(why, i + 1, "impossible valence", "%s atom %d has bond order sum %d", mol_element_symbol(a->z),
                  i + 1, have);
      return 1;
    }
  }
  return 0;
}

/* mol_check_why's third, in 3D: no two atoms too close, no fragment far
 * from the rest. 0, or 1 with the rejection (or running out of memory) in
 * *why. */
static int check_geometry(const struct mol *m, const struct mol_check_opts *o, struct mol_why *why) {
  int n = m->n_atoms;
  if (m->dim == 3 && o && o->min_distance > 0 && n > 1) {
    int i = 0, j = 0;
    double d = 0;
    int r = find_close_pair(m, o->min_distance, &i, &j, &d);
    if (r < 0) {
      mol_why_set(why, 0, "out of memory", "checking the distances of %d atoms", n);
      return 1;
    }
    if (r > 0) {
      mol_why_set(why, i + 1, "atoms too close", "atoms %d and %d are %.2f Å apart (< %g)", i + 1, j + 1, d,
                  o->min_distance);
      return 1;
    }
  }
  if (m->dim == 3 && o && o->max_fragment_gap > 0 && n > 1) {
    int size, n_frags, first;
    double d;
    int r = find_far_fragment(m, o->max_fragment_gap, &size, &n_frags, &d, &first);
    if (r < 0) {
      mol_why_set(why, 0, "out of memory", "checking the fragments of %d atoms", n);
      return 1;
    }
    if (r > 0 && n_frags == 1) {
      mol_why_set(why, first + 1, "fragment far from the rest", "fragment of %d atom%s is %.1f Å from the rest (> %g)",
                  size, size == 1 ? "" : "s", d, o->max_fragment_gap);
      return 1;
    }
    if (r > 0) {
      mol_why_set(why, first + 1, "fragment far from the rest",
                  "%d fragments of %d atoms together are %.1f Å from the rest (> %g)", n_frags, size, d,
                  o->max_fragment_gap);
      return 1;
    }
  }
  return 0;
}

/* Each rejection has its kind in why->reason, always the same words (the
 * rejects table and the report group by it), the atom it is about in
 * why->atom and the numbers in why->detail. */
int mol_check_why(const struct mol *m, const struct mol_check_opts *o, struct mol_why *why) {
  struct mol_why scratch;
  if (!why) why = &scratch;
  mol_why_clear(why);
  int n = m->n_atoms, rc = 1;
  int *nbr = NULL, *osum = NULL;
  unsigned char *arom = NULL;
  if (n <= 0 || !m->atoms) {
    mol_why_set(why, 0, "no atoms", NULL);
    return 1;
  }
  if (o && o->max_atoms > 0 && n > o->max_atoms) {
    mol_why_set(why, 0, "too many atoms", "%d > %d", n, o->max_atoms);
    return 1;
  }
  if (check_atoms(m, o, why)) return 1;

  nbr = calloc((size_t)n, sizeof *nbr);
  osum = calloc((size_t)n, sizeof *osum);
  arom = calloc((size_t)n, 1);
  if (!nbr || !osum || !arom) {
    mol_why_set(why, 0, "out of memory", "checking a molecule of %d atoms", n);
    goto out;
  }
  for (int k = 0; k < m->n_bonds; k++) {
    const struct mol_bond *b = &m->bonds[k];
    nbr[b->a]++;
    nbr[b->b]++;
    int ord = b->order == MOL_BOND_AROMATIC ? 1 : b->order;
    osum[b->a] += ord;
    osum[b->b] += ord;
    if (b->order == MOL_BOND_AROMATIC) arom[b->a] = arom[b->b] = 1;
  }
  if (check_valences(m, o, why, nbr, osum, arom) || check_geometry(m, o, why)) goto out;
  rc = 0;
out:
  free(nbr);
  free(osum);
  free(arom);
  return rc;
}

int mol_check(const struct mol *m, const struct mol_check_opts *o, char *reason, size_t len) {
  struct mol_why why;
  int rc = mol_check_why(m, o, &why);
  if (reason && len) {
    if (rc)
      mol_why_text(&why, reason, len);
    else
      reason[0] = 0;
  }
  return rc;
}
