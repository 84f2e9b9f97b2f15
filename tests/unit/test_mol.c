/* test_mol.c — the molecule type: tags, elements, the stored blob (layout,
 * round trip, bad blobs), pack/unpack, and every mol_check rejection, with
 * the cell-list distance and fragment checks against brute force. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chem/mol.h"
#include "common/crc32c.h"
#include "common/error.h"
#include "tests/testutil.h"

/* ---- helpers ---------------------------------------------------------------- */

static char *dup(const char *s) { return s ? strdup(s) : NULL; }

/* Ethanol with hydrogens, 3D (approximate but sane geometry). */
static void ethanol(struct mol *m) {
  mol_init(m);
  m->name = dup("ethanol");
  m->smiles = dup("CCO");
  m->inchikey = dup("LFQSCWFLJHTTHZ-UHFFFAOYSA-N");
  m->formula = dup("C2H6O");
  m->dim = 3;
  tu_add_atom(m, 6, -1.2, 0.0, 0.0);
  tu_add_atom(m, 6, 0.3, 0.0, 0.0);
  tu_add_atom(m, 8, 0.8, 1.3, 0.0);
  tu_add_atom(m, 1, -1.6, 1.0, 0.0);
  tu_add_atom(m, 1, -1.6, -0.5, 0.9);
  tu_add_atom(m, 1, -1.6, -0.5, -0.9);
  tu_add_atom(m, 1, 0.7, -0.5, 0.9);
  tu_add_atom(m, 1, 0.7, -0.5, -0.9);
  tu_add_atom(m, 1, 1.8, 1.3, 0.0);
  tu_add_bond(m, 0, 1, 1);
  tu_add_bond(m, 1, 2, 1);
  tu_add_bond(m, 0, 3, 1);
  tu_add_bond(m, 0, 4, 1);
  tu_add_bond(m, 0, 5, 1);
  tu_add_bond(m, 1, 6, 1);
  tu_add_bond(m, 1, 7, 1);
  tu_add_bond(m, 2, 8, 1);
}

static struct mol_check_opts default_opts(void) {
  struct mol_check_opts o = {.max_atoms = 999, .min_distance = 0.5, .max_fragment_gap = 10};
  return o;
}

/* A rejection of one kind (reason, always the same words), about one atom
 * (1-based, 0 none), with its specifics in detail; mol_check's one line is
 * "reason: detail" ("reason" alone when there is no detail). */
static void expect_reject(const struct mol *m, const struct mol_check_opts *o, const char *reason, int atom,
                          const char *detail) {
  struct mol_why w;
  mol_why_set(&w, 99, "stale", "stale");
  cr_assert_eq(mol_check_why(m, o, &w), 1, "expected rejection '%s'", reason);
  cr_assert_str_eq(w.reason, reason);
  cr_assert_eq(w.atom, atom, "%s: atom %d, expected %d", reason, w.atom, atom);
  cr_assert_str_eq(w.detail, detail, "%s", reason);
  char line[512] = "", want[512];
  if (detail[0])
    snprintf(want, sizeof want, "%s: %s", reason, detail);
  else
    snprintf(want, sizeof want, "%s", reason);
  cr_assert_eq(mol_check(m, o, line, sizeof line), 1);
  cr_assert_str_eq(line, want);
  cr_assert_eq(mol_check(m, o, NULL, 0), 1, "no reason buffer");
  cr_assert_eq(mol_check_why(m, o, NULL), 1, "no why");
}

/* ---- basics ------------------------------------------------------------------ */

Test(mol, init_free_heavy_tags) {
  struct mol m;
  ethanol(&m);
  cr_assert_eq(mol_n_heavy(&m), 3);
  cr_assert_null(mol_tag(&m, "x"));
  cr_assert_eq(mol_add_tag(&m, "x", "1"), 0);
  cr_assert_eq(mol_add_tag(&m, "y", ""), 0);
  cr_assert_eq(mol_add_tag(&m, "x", "2"), 0);
  cr_assert_str_eq(mol_tag(&m, "x"), "1", "the first of a repeated tag");
  cr_assert_str_eq(mol_tag(&m, "y"), "");
  cr_assert_eq(m.n_tags, 3);
  mol_free(&m);
  cr_assert_eq(m.n_atoms, 0);
  cr_assert_null(m.atoms);
  cr_assert_null(m.tags);
  mol_free(&m); /* twice is harmless */
}

Test(mol, element_table) {
  cr_assert_str_eq(mol_element_symbol(1), "H");
  cr_assert_str_eq(mol_element_symbol(6), "C");
  cr_assert_str_eq(mol_element_symbol(54), "Xe");
  cr_assert_str_eq(mol_element_symbol(118), "Og");
  cr_assert_str_eq(mol_element_symbol(0), "*");
  cr_assert_str_eq(mol_element_symbol(119), "?");
  cr_assert_str_eq(mol_element_symbol(-1), "?");
  for (int z = 1; z <= 118; z++)
    cr_assert_eq(mol_element_z(mol_element_symbol(z)), z, "z=%d", z);
  cr_assert_eq(mol_element_z("Cl"), 17);
  cr_assert_eq(mol_element_z("CL"), 17);
  cr_assert_eq(mol_element_z("co"), 27);
  cr_assert_eq(mol_element_z("Co"), 27);
  cr_assert_eq(mol_element_z("Xx"), 0);
  cr_assert_eq(mol_element_z(""), 0);
  cr_assert_eq(mol_element_z(NULL), 0);
}

/* ---- blob -------------------------------------------------------------------- */

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

Test(mol, blob_layout_and_round_trip) {
  struct mol m;
  ethanol(&m);
  m.atoms[2].charge = -1;
  m.atoms[2].aromatic = 1;
  m.atoms[2].implicit_h = 2;
  m.atoms[0].x = 1.0 / 3.0;
  m.bonds[1].order = MOL_BOND_AROMATIC;
  uint8_t *b;
  size_t n;
  cr_assert_eq(mol_to_blob(&m, &b, &n), 0);
  cr_assert_eq(n, 16 + 9 * 16 + 8 * 12 + 4);
  cr_assert(memcmp(b, "SE3M", 4) == 0);
  cr_assert_eq(b[4] | b[5] << 8, 2, "version");
  cr_assert_eq(le32(b + n - 4), crc32c(0, b, n - 4), "trailer: CRC-32C of every byte before it");
  cr_assert_eq(b[6] | b[7] << 8, 1, "3D flag");
  cr_assert_eq(le32(b + 8), 9);
  cr_assert_eq(le32(b + 12), 8);
  const uint8_t *a2 = b + 16 + 2 * 16;
  cr_assert_eq(a2[0], 8);
  cr_assert_eq((int8_t)a2[1], -1);
  cr_assert_eq(a2[2], 1);
  cr_assert_eq(a2[3], 2, "implicit hydrogens");
  float fx;
  uint32_t u = le32(a2 + 8);
  memcpy(&fx, &u, 4);
  cr_assert_eq(fx, 1.3f, "y of atom 2 as f32 at offset 8");
  const uint8_t *b1 = b + 16 + 9 * 16 + 12;
  cr_assert_eq(le32(b1), 1);
  cr_assert_eq(le32(b1 + 4), 2);
  cr_assert_eq(b1[8], MOL_BOND_AROMATIC);

  struct mol back;
  struct se3_error e;
  cr_assert_eq(mol_from_blob(b, n, &back, &e), 0, "%s", se3_error_str(&e).s);
  cr_assert_eq(back.n_atoms, 9);
  cr_assert_eq(back.n_bonds, 8);
  cr_assert_eq(back.dim, 3);
  cr_assert_null(back.name);
  for (int i = 0; i < 9; i++) {
    cr_assert_eq(back.atoms[i].z, m.atoms[i].z);
    cr_assert_eq(back.atoms[i].charge, m.atoms[i].charge);
    cr_assert_eq(back.atoms[i].aromatic, m.atoms[i].aromatic);
    cr_assert_eq(back.atoms[i].implicit_h, m.atoms[i].implicit_h);
    cr_assert_eq(back.atoms[i].x, (double)(float)m.atoms[i].x);
    cr_assert_eq(back.atoms[i].y, (double)(float)m.atoms[i].y);
    cr_assert_eq(back.atoms[i].z_, (double)(float)m.atoms[i].z_);
  }
  for (int i = 0; i < 8; i++) {
    cr_assert_eq(back.bonds[i].a, m.bonds[i].a);
    cr_assert_eq(back.bonds[i].b, m.bonds[i].b);
    cr_assert_eq(back.bonds[i].order, m.bonds[i].order);
  }
  mol_free(&back);
  free(b);

  m.dim = 2;
  cr_assert_eq(mol_to_blob(&m, &b, &n), 0);
  cr_assert_eq(mol_from_blob(b, n, &back, &e), 0);
  cr_assert_eq(back.dim, 2);
  mol_free(&back);
  free(b);
  m.dim = 0;
  cr_assert_eq(mol_to_blob(&m, &b, &n), 0);
  cr_assert_eq(b[6], 0);
  cr_assert_eq(mol_from_blob(b, n, &back, &e), 0);
  cr_assert_eq(back.dim, 0);
  mol_free(&back);
  free(b);
  mol_free(&m);
}

Test(mol, blob_empty_molecule) {
  struct mol m, back;
  mol_init(&m);
  uint8_t *b;
  size_t n;
  struct se3_error e;
  cr_assert_eq(mol_to_blob(&m, &b, &n), 0);
  cr_assert_eq(n, 16 + 4);
  cr_assert_eq(mol_from_blob(b, n, &back, &e), 0);
  cr_assert_eq(back.n_atoms, 0);
  free(b);
}

static void expect_bad_blob(const uint8_t *b, size_t n, const char *want) {
  struct mol m;
  struct se3_error e;
  cr_assert_eq(mol_from_blob(b, n, &m, &e), -1, "expected '%s'", want);
  cr_assert(strstr(se3_error_str(&e).s, want), "'%s' not in '%s'", want, se3_error_str(&e).s);
  cr_assert_eq(m.n_atoms, 0);
  cr_assert_null(m.atoms);
}

Test(mol, blob_bad_inputs) {
  struct mol m;
  ethanol(&m);
  uint8_t *b;
  size_t n;
  cr_assert_eq(mol_to_blob(&m, &b, &n), 0);
  uint8_t *c = malloc(n + 4);

  expect_bad_blob(b, 10, "too short (10 bytes");
  expect_bad_blob(NULL, 0, "too short");
  memcpy(c, b, n);
  c[0] = 'X';
  expect_bad_blob(c, n, "bad magic");
  memcpy(c, b, n);
  c[4] = 5;
  expect_bad_blob(c, n, "unsupported molecule blob version 5 (this se3screen reads 1 to 4)");
  c[4] = 3; /* version 3 has an isotopes section */
  expect_bad_blob(c, n, "size mismatch");
  expect_bad_blob(b, n - 1, "size mismatch: 259 bytes, expected 260 for 9 atoms and 8 bonds");
  memcpy(c, b, n);
  memset(c + n, 0, 4);
  expect_bad_blob(c, n + 4, "size mismatch");
  memcpy(c, b, n);
  c[8] = 0xff; /* n_atoms huge: the sizes do not add up, nothing allocated */
  c[9] = 0xff;
  c[10] = 0xff;
  c[11] = 0xff;
  expect_bad_blob(c, n, "size mismatch");
  /* structural damage behind a valid checksum (resealed): still refused */
  memcpy(c, b, n);
  uint8_t *bond3 = c + 16 + 9 * 16 + 3 * 12;
  bond3[4] = 9; /* end = n_atoms */
  crc32c_seal(c, n);
  expect_bad_blob(c, n, "bond 3 joins atoms 0 and 9 (of 9)");
  memcpy(c, b, n);
  bond3 = c + 16 + 9 * 16 + 3 * 12;
  bond3[0] = 3; /* begin = end */
  bond3[4] = 3;
  crc32c_seal(c, n);
  expect_bad_blob(c, n, "bond 3 joins atoms 3 and 3");
  memcpy(c, b, n);
  c[16 + 9 * 16 + 12 + 8] = 4;
  crc32c_seal(c, n);
  expect_bad_blob(c, n, "bond 1 has order 4");
  free(c);
  free(b);
  mol_free(&m);
}

/* The reported bug: one flipped byte in a stored coordinate turned an atom's
 * x into -9.75e34 Å and nothing noticed. Every single-bit flip anywhere in the
 * blob is now refused; in the atom and bond records it is the checksum that
 * says so, with both values. */
Test(mol, blob_checksum_catches_every_flipped_bit) {
  struct mol m;
  ethanol(&m);
  uint8_t *b;
  size_t n;
  cr_assert_eq(mol_to_blob(&m, &b, &n), 0);
  uint8_t *c = malloc(n);
  for (size_t i = 0; i < n; i++)
    for (int bit = 0; bit < 8; bit++) {
      memcpy(c, b, n);
      c[i] ^= (uint8_t)(1u << bit);
      struct mol back;
      struct se3_error e;
      cr_assert_eq(mol_from_blob(c, n, &back, &e), -1, "byte %zu bit %d: accepted", i, bit);
      if (i >= 16) /* past the header: only the checksum can tell */
        cr_assert(strstr(se3_error_str(&e).s, "molecule blob checksum mismatch (stored 0x"), "byte %zu: %s", i,
                  se3_error_str(&e).s);
    }
  /* the exact case: the high byte of atom 0's x, so x becomes huge */
  memcpy(c, b, n);
  c[16 + 4 + 3] ^= 0xf0;
  struct mol back;
  char want[128];
  struct se3_error e;
  cr_assert_eq(mol_from_blob(c, n, &back, &e), -1);
  snprintf(want, sizeof want, "(stored 0x%08x, computed 0x%08x)", (unsigned)le32(b + n - 4),
           (unsigned)crc32c(0, c, n - 4));
  cr_assert(strstr(se3_error_str(&e).s, want), "'%s' not in '%s'", want, se3_error_str(&e).s);
  free(c);
  free(b);
  mol_free(&m);
}

/* Blobs written before the checksum (version 1: the same layout without the
 * trailer) are still read, unchecked. */
Test(mol, blob_version_1_still_read) {
  struct mol m;
  ethanol(&m);
  uint8_t *b;
  size_t n;
  cr_assert_eq(mol_to_blob(&m, &b, &n), 0);
  b[4] = 1; /* version 1, trailer dropped */
  struct mol back;
  struct se3_error e;
  cr_assert_eq(mol_from_blob(b, n - 4, &back, &e), 0, "%s", se3_error_str(&e).s);
  cr_assert_eq(back.n_atoms, 9);
  cr_assert_eq(back.atoms[2].y, (double)(float)m.atoms[2].y);
  mol_free(&back);
  /* version 1 at the version 2 size does not add up */
  cr_assert_eq(mol_from_blob(b, n, &back, &e), -1);
  cr_assert(strstr(se3_error_str(&e).s, "size mismatch"), "%s", se3_error_str(&e).s);
  free(b);
  mol_free(&m);
}

/* Isotopes ([13CH4], [2H]O[2H]) were dropped from the stored molecule. A
 * molecule with a mass number is stored as version 3 (version 2 and an
 * isotopes section); one without is stored as version 2, byte for byte as
 * before, so that old databases and old readers keep working. */
Test(mol, blob_isotopes_version_3) {
  struct mol m;
  ethanol(&m);
  m.atoms[0].isotope = 13;
  m.atoms[3].isotope = 2;
  m.atoms[8].isotope = 3;
  uint8_t *b;
  size_t n;
  cr_assert_eq(mol_to_blob(&m, &b, &n), 0);
  size_t iso = 16 + 9 * 16 + 8 * 12;
  cr_assert_eq(n, iso + 4 + 3 * 8 + 4);
  cr_assert_eq(b[4] | b[5] << 8, 3, "version");
  cr_assert_eq(le32(b + iso), 3, "isotopes");
  cr_assert_eq(le32(b + iso + 4), 0);
  cr_assert_eq(b[iso + 8] | b[iso + 9] << 8, 13);
  cr_assert_eq(b[iso + 10] | b[iso + 11] << 8, 0, "reserved");
  cr_assert_eq(le32(b + iso + 12), 3);
  cr_assert_eq(b[iso + 16] | b[iso + 17] << 8, 2);
  cr_assert_eq(le32(b + iso + 20), 8);
  cr_assert_eq(b[iso + 24] | b[iso + 25] << 8, 3);
  cr_assert_eq(le32(b + n - 4), crc32c(0, b, n - 4), "trailer: CRC-32C of every byte before it");
  struct mol back;
  struct se3_error e;
  cr_assert_eq(mol_from_blob(b, n, &back, &e), 0, "%s", se3_error_str(&e).s);
  cr_assert_eq(back.n_atoms, 9);
  cr_assert_eq(back.n_bonds, 8);
  for (int i = 0; i < 9; i++)
    cr_assert_eq(back.atoms[i].isotope, m.atoms[i].isotope, "atom %d", i);
  cr_assert_eq(back.bonds[7].b, 8);
  mol_free(&back);
  /* every flipped bit of the isotopes section is refused */
  uint8_t *c = malloc(n + 8);
  for (size_t i = iso; i < n; i++)
    for (int bit = 0; bit < 8; bit++) {
      memcpy(c, b, n);
      c[i] ^= (uint8_t)(1u << bit);
      cr_assert_eq(mol_from_blob(c, n, &back, &e), -1, "byte %zu bit %d: accepted", i, bit);
    }
  /* damage behind a valid checksum */
  memcpy(c, b, n);
  c[iso + 12] = 0; /* atom 3 -> 0: not increasing */
  crc32c_seal(c, n);
  expect_bad_blob(c, n, "isotope 1 (atom 0, mass number 2) out of order or range");
  memcpy(c, b, n);
  c[iso + 20] = 9; /* atom 9 of 9 */
  crc32c_seal(c, n);
  expect_bad_blob(c, n, "isotope 2 (atom 9, mass number 3) out of order or range");
  memcpy(c, b, n);
  c[iso + 8] = 0; /* mass number 0 */
  crc32c_seal(c, n);
  expect_bad_blob(c, n, "isotope 0 (atom 0, mass number 0) out of order or range");
  memcpy(c, b, n);
  c[iso] = 4; /* 4 announced, 3 present */
  crc32c_seal(c, n);
  expect_bad_blob(c, n, "size mismatch");
  /* an empty isotopes section is not written, and not accepted */
  memcpy(c, b, iso);
  memset(c + iso, 0, 4);
  n = iso + 4 + 4;
  crc32c_seal(c, n);
  expect_bad_blob(c, n, "0 isotopes for 9 atoms");
  free(b);
  /* no mass number: version 2, the bytes of before */
  for (int i = 0; i < 9; i++)
    m.atoms[i].isotope = 0;
  cr_assert_eq(mol_to_blob(&m, &b, &n), 0);
  cr_assert_eq(b[4], 2);
  cr_assert_eq(n, iso + 4);
  free(b);
  free(c);
  mol_free(&m);
}

/* CRC-32C itself: the standard check value, and the processor's crc32
 * instruction (when there is one) agrees with the byte table. */
Test(mol, crc32c_check_values) {
  cr_assert_eq(crc32c(0, "123456789", 9), 0xe3069283u);
  cr_assert_eq(crc32c(0, "", 0), 0u);
  uint8_t buf[1000];
  for (int i = 0; i < 1000; i++)
    buf[i] = (uint8_t)(i * 131 + 7);
  for (size_t len = 0; len <= 1000; len += 37) {
    uint32_t table = ~crc32c_table_update(~0u, buf, len);
    cr_assert_eq(crc32c(0, buf, len), table, "length %zu", len);
    cr_assert_eq(crc32c(crc32c(0, buf, len / 3), buf + len / 3, len - len / 3), table, "in two parts, %zu", len);
  }
}

/* ---- pack/unpack -------------------------------------------------------------- */

Test(mol, pack_round_trip_exact) {
  struct mol m, back;
  ethanol(&m);
  free(m.formula);
  m.formula = NULL; /* NULL and "" both survive */
  free(m.name);
  m.name = dup("");
  m.atoms[0].x = 1.0 / 3.0;
  m.atoms[1].y = -1e-300;
  m.atoms[2].z_ = 12345.678901234567;
  m.atoms[2].charge = -3;
  m.atoms[3].implicit_h = 7;
  m.atoms[0].isotope = 13; /* between processes too: the worker's [13C] reaches the store */
  m.atoms[4].isotope = 65535;
  m.coords_gen3d = 1;
  m.charge = -2;
  m.bonds[0].order = 2;
  mol_add_tag(&m, "PUBCHEM_ID", "1234");
  mol_add_tag(&m, "note", "multi\nline");
  m.stereo_free = 2; /* the isomer a shape fixed reaches the store from the worker */
  m.isomer_smiles = dup("C[C@@H](O)/C=C/C");
  uint8_t *b;
  size_t n;
  cr_assert_eq(mol_pack(&m, &b, &n), 0);
  cr_assert_eq(mol_unpack(b, n, &back), 0);
  cr_assert_str_eq(back.name, "");
  cr_assert_null(back.formula);
  cr_assert_str_eq(back.smiles, "CCO");
  cr_assert_str_eq(back.inchikey, m.inchikey);
  cr_assert_eq(back.dim, 3);
  cr_assert_eq(back.coords_gen3d, 1);
  cr_assert_eq(back.charge, -2);
  cr_assert_eq(back.n_atoms, m.n_atoms);
  cr_assert_eq(back.n_bonds, m.n_bonds);
  cr_assert_eq(back.n_tags, 2);
  for (int i = 0; i < m.n_atoms; i++) {
    cr_assert_eq(back.atoms[i].z, m.atoms[i].z);
    cr_assert_eq(back.atoms[i].charge, m.atoms[i].charge);
    cr_assert_eq(back.atoms[i].aromatic, m.atoms[i].aromatic);
    cr_assert_eq(back.atoms[i].implicit_h, m.atoms[i].implicit_h);
    cr_assert_eq(back.atoms[i].isotope, m.atoms[i].isotope, "atom %d: mass number", i);
    cr_assert(memcmp(&back.atoms[i].x, &m.atoms[i].x, sizeof(double)) == 0, "bit-exact x");
    cr_assert(memcmp(&back.atoms[i].y, &m.atoms[i].y, sizeof(double)) == 0, "bit-exact y");
    cr_assert(memcmp(&back.atoms[i].z_, &m.atoms[i].z_, sizeof(double)) == 0, "bit-exact z");
  }
  for (int i = 0; i < m.n_bonds; i++) {
    cr_assert_eq(back.bonds[i].a, m.bonds[i].a);
    cr_assert_eq(back.bonds[i].b, m.bonds[i].b);
    cr_assert_eq(back.bonds[i].order, m.bonds[i].order);
  }
  cr_assert_str_eq(mol_tag(&back, "note"), "multi\nline");
  cr_assert_str_eq(mol_tag(&back, "PUBCHEM_ID"), "1234");
  cr_assert_eq(back.stereo_free, 2);
  cr_assert_str_eq(back.isomer_smiles, "C[C@@H](O)/C=C/C");

  /* Every truncation and trailing junk are refused without leaks or crashes. */
  for (size_t k = 0; k < n; k++) {
    struct mol t;
    cr_assert_eq(mol_unpack(b, k, &t), -1, "prefix of %zu bytes", k);
    cr_assert_eq(t.n_atoms, 0);
  }
  uint8_t *longer = malloc(n + 1);
  memcpy(longer, b, n);
  longer[n] = 0;
  struct mol t;
  cr_assert_eq(mol_unpack(longer, n + 1, &t), -1);
  longer[0] = 'Z';
  cr_assert_eq(mol_unpack(longer, n, &t), -1);
  free(longer);
  free(b);
  mol_free(&back);
  mol_free(&m);
}

/* ---- mol_check: each rejection -------------------------------------------------- */

Test(mol, check_clean_pass) {
  struct mol m;
  ethanol(&m);
  struct mol_check_opts o = default_opts();
  static const uint8_t chno[] = {1, 6, 7, 8};
  o.elements = chno;
  o.n_elements = 4;
  char why[128] = "x";
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  cr_assert_str_eq(why, "");
  cr_assert_eq(mol_check(&m, NULL, NULL, 0), 0, "no options, no reason buffer");
  struct mol_why w;
  mol_why_set(&w, 7, "stale", "stale");
  cr_assert_eq(mol_check_why(&m, &o, &w), 0);
  cr_assert(w.reason[0] == 0 && w.detail[0] == 0 && w.atom == 0, "a pass leaves why empty");
  mol_free(&m);
}

Test(mol, check_no_atoms_and_too_many) {
  struct mol m;
  mol_init(&m);
  struct mol_check_opts o = default_opts();
  expect_reject(&m, &o, "no atoms", 0, "");
  for (int i = 0; i < 1204; i++)
    tu_add_atom(&m, 6, i * 1.5, 0, 0);
  expect_reject(&m, &o, "too many atoms", 0, "1204 > 999");
  o.max_atoms = 0; /* off */
  char why[128];
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  mol_free(&m);
}

/* H2 and stray H atoms (QM7's junk records) have no heavy atom; QM7's methane
 * with two unbonded hydrogens is broken, while a salt's H+ is not. */
Test(mol, check_heavy_atoms_and_unbonded_hydrogen) {
  struct mol_check_opts o = default_opts();
  o.min_heavy_atoms = 1;
  o.reject_lone_hydrogen = 1;
  struct mol m;
  mol_init(&m);
  m.dim = 3;
  tu_add_atom(&m, 1, 0, 0, 0);
  tu_add_atom(&m, 1, 0.74, 0, 0);
  tu_add_bond(&m, 0, 1, 1);
  expect_reject(&m, &o, "too few heavy atoms", 0, "0 heavy atoms (fewer than 1)");
  o.min_heavy_atoms = 0;
  char why[128];
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  mol_free(&m);

  o.min_heavy_atoms = 1;
  ethanol(&m);
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  tu_add_atom(&m, 1, 3.0, 3.0, 0); /* a ninth hydrogen, bonded to nothing */
  expect_reject(&m, &o, "hydrogen without a bond", 10, "hydrogen atom 10 has no bond");
  m.atoms[9].charge = 1; /* H+ of a salt */
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  m.atoms[9].charge = 0;
  o.reject_lone_hydrogen = 0; /* off */
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  mol_free(&m);
}

Test(mol, check_elements_and_dummies) {
  struct mol m;
  ethanol(&m);
  struct mol_check_opts o = default_opts();
  static const uint8_t chno[] = {1, 6, 7, 8};
  o.elements = chno;
  o.n_elements = 4;
  m.atoms[2].z = 54;
  expect_reject(&m, &o, "element not allowed", 3, "Xe (atom 3)");
  m.atoms[2].z = 0;
  expect_reject(&m, &o, "dummy atom", 3, "atom 3");
  o.elements = NULL;
  expect_reject(&m, &o, "dummy atom", 3, "atom 3");
  m.atoms[2].z = 54;
  char why[128];
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "any element when the list is NULL: %s", why);
  m.atoms[2].z = 200;
  expect_reject(&m, &o, "unknown element", 3, "atomic number 200 (atom 3)");
  mol_free(&m);
}

Test(mol, check_non_finite) {
  struct mol m;
  ethanol(&m);
  struct mol_check_opts o = default_opts();
  m.atoms[4].y = NAN;
  expect_reject(&m, &o, "non-finite coordinate", 5, "atom 5: y = nan");
  m.atoms[4].y = 0;
  m.atoms[4].z_ = -INFINITY;
  m.dim = 0; /* checked whatever the dimension */
  expect_reject(&m, &o, "non-finite coordinate", 5, "atom 5: z = -inf");
  mol_free(&m);
}

Test(mol, check_bad_bond) {
  struct mol m;
  ethanol(&m);
  m.bonds[3].b = 99;
  expect_reject(&m, NULL, "bad bond", 1, "bond 4 joins atoms 1 and 100 of 9");
  mol_free(&m);
}

Test(mol, check_valence) {
  struct mol_check_opts o = default_opts();
  o.min_distance = 0;
  struct mol m;
  mol_init(&m);
  /* C with five neighbours */
  tu_add_atom(&m, 1, 5, 5, 5);
  tu_add_atom(&m, 1, 5, 5, 6);
  tu_add_atom(&m, 1, 5, 6, 5);
  tu_add_atom(&m, 6, 5, 6, 6);
  for (int i = 0; i < 5; i++)
    tu_add_atom(&m, 17, 4 + i * 0.5, 7, 7);
  for (int i = 4; i < 9; i++)
    tu_add_bond(&m, 3, i, 1);
  expect_reject(&m, &o, "impossible valence", 4, "C atom 4 has 5 bonds");
  m.n_bonds = 4;
  char why[128];
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  m.atoms[3].implicit_h = 1; /* CCl4 + implicit H */
  expect_reject(&m, &o, "impossible valence", 4, "C atom 4 has 5 bonds");
  m.atoms[3].implicit_h = 0;
  /* H bonded twice */
  tu_add_bond(&m, 0, 1, 1);
  tu_add_bond(&m, 0, 2, 1);
  expect_reject(&m, &o, "impossible valence", 1, "H atom 1 has 2 bonds");
  mol_free(&m);

  /* C(=C)(=C)C: four neighbours would pass, the orders do not */
  mol_init(&m);
  tu_add_atom(&m, 6, 0, 0, 0);
  tu_add_atom(&m, 6, 1.3, 0, 0);
  tu_add_atom(&m, 6, -1.3, 0, 0);
  tu_add_atom(&m, 6, 0, 1.5, 0);
  tu_add_bond(&m, 0, 1, 2);
  tu_add_bond(&m, 0, 2, 2);
  tu_add_bond(&m, 0, 3, 1);
  expect_reject(&m, &o, "impossible valence", 1, "C atom 1 has bond order sum 5");
  /* aromatic bonds count one each: a ring-fusion carbon (3 aromatic) passes */
  m.bonds[0].order = m.bonds[1].order = m.bonds[2].order = MOL_BOND_AROMATIC;
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  mol_free(&m);

  /* N with 5 neighbours; O with 4; F with 2; B with 5 */
  static const struct {
    int z, n;
    const char *want;
  } cases[] = {{7, 5, "N atom 1 has 5 bonds"},
               {8, 4, "O atom 1 has 4 bonds"},
               {9, 2, "F atom 1 has 2 bonds"},
               {5, 5, "B atom 1 has 5 bonds"}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    mol_init(&m);
    tu_add_atom(&m, cases[c].z, 0, 0, 0);
    for (int i = 0; i < cases[c].n; i++) {
      tu_add_atom(&m, 1, cos(i * 1.3), sin(i * 1.3), i * 0.3);
      tu_add_bond(&m, 0, i + 1, 1);
    }
    expect_reject(&m, &o, "impossible valence", 1, cases[c].want);
    m.n_bonds--; /* one fewer is fine (oxonium, ammonium, borate); the lone H is a fragment */
    cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
    mol_free(&m);
  }
}

/* Before (hardening IV): [N+9], [C-4] and a neutral six-bonded Si were
 * stored (five-bonded C and N were refused). */
Test(mol, impossible_charges_and_silicon_refused) {
  struct mol_check_opts o = default_opts();
  o.min_distance = 0;
  char why[160];
  static const struct {
    int z, q;
    const char *want;
  } bad[] = {{7, 9, "N atom 1 has formal charge +9 (-3 to +3 allowed)"},
             {6, -4, "C atom 1 has formal charge -4 (-3 to +3 allowed)"},
             {26, 5, "Fe atom 1 has formal charge +5 (-4 to +4 allowed)"}};
  for (size_t c = 0; c < sizeof bad / sizeof *bad; c++) {
    struct mol m;
    mol_init(&m);
    tu_add_atom(&m, bad[c].z, 0, 0, 0);
    m.atoms[0].charge = (int8_t)bad[c].q;
    expect_reject(&m, &o, "impossible charge", 1, bad[c].want);
    m.atoms[0].charge = (int8_t)(bad[c].q > 0 ? 2 : -2); /* [N+2], [C-2], [Fe+2] pass this check */
    cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
    mol_free(&m);
  }
  /* Si with six fluorines: refused neutral, passed as hexafluorosilicate(2-) */
  struct mol m;
  mol_init(&m);
  tu_add_atom(&m, 14, 0, 0, 0);
  for (int i = 0; i < 6; i++) {
    tu_add_atom(&m, 9, cos(i * 1.1), sin(i * 1.1), i * 0.4);
    tu_add_bond(&m, 0, i + 1, 1);
  }
  expect_reject(&m, &o, "impossible valence", 1, "Si atom 1 has 6 bonds");
  m.atoms[0].charge = -2;
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  mol_free(&m);
}

Test(mol, check_close_atoms) {
  struct mol m;
  ethanol(&m);
  struct mol_check_opts o = default_opts();
  tu_add_atom(&m, 8, m.atoms[2].x + 0.21, m.atoms[2].y, m.atoms[2].z_); /* atom 10 */
  tu_add_bond(&m, 2, 9, 1);
  expect_reject(&m, &o, "atoms too close", 3, "atoms 3 and 10 are 0.21 Å apart (< 0.5)");
  m.dim = 2; /* distances are only checked in 3D */
  char why[128];
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  m.dim = 3;
  o.min_distance = 0; /* off */
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  mol_free(&m);
}

Test(mol, check_far_fragment) {
  struct mol m;
  ethanol(&m);
  struct mol_check_opts o = default_opts();
  tu_add_atom(&m, 8, 1.8 + 14.3, 1.3, 0); /* water 14.3 Å from ethanol's hydroxyl H */
  tu_add_atom(&m, 1, 1.8 + 14.3 + 0.96, 1.3, 0);
  tu_add_atom(&m, 1, 1.8 + 14.3 + 0.96 + 0.5, 2.3, 0);
  tu_add_bond(&m, 9, 10, 1);
  tu_add_bond(&m, 9, 11, 1);
  expect_reject(&m, &o, "fragment far from the rest", 10, "fragment of 3 atoms is 14.3 Å from the rest (> 10)");
  m.n_bonds--; /* atom 12 is now a lone H beside the water: they form a group of 3 */
  expect_reject(&m, &o, "fragment far from the rest", 10,
                "2 fragments of 3 atoms together are 14.3 Å from the rest (> 10)");
  tu_add_atom(&m, 1, -1.6, -3.0, 0); /* a lone H 2.5 Å from ethanol: groups of 10 and 3 */
  expect_reject(&m, &o, "fragment far from the rest", 10,
                "2 fragments of 3 atoms together are 14.3 Å from the rest (> 10)");
  m.atoms[12].x = 9.0; /* moved between them: 7.2 Å from ethanol, 7.1 Å from the water */
  m.atoms[12].y = 1.3;
  char why0[128];
  cr_assert_eq(mol_check(&m, &o, why0, sizeof why0), 0, "chained groups pass: %s", why0);
  m.n_atoms--;
  char why[128];
  o.max_fragment_gap = 15;
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  o.max_fragment_gap = 0;
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  mol_free(&m);

  /* a single fragment is never far from itself, however long */
  mol_init(&m);
  m.dim = 3;
  for (int i = 0; i < 50; i++) {
    tu_add_atom(&m, 6, i * 1.5, 0, 0);
    if (i) tu_add_bond(&m, i - 1, i, 1);
  }
  o.max_fragment_gap = 1;
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "%s", why);
  mol_free(&m);
}

/* ---- cell list against brute force ------------------------------------------------ */

/* A random cloud of n unbonded atoms (dim 3) in a cube of side `side`. */
static void cloud(struct mol *m, int n, double side, uint64_t seed) {
  mol_init(m);
  m->dim = 3;
  tu_seed(seed);
  m->atoms = calloc((size_t)n, sizeof *m->atoms);
  m->n_atoms = n;
  for (int i = 0; i < n; i++) {
    m->atoms[i].z = 6;
    m->atoms[i].x = tu_rnd() * side - side / 2;
    m->atoms[i].y = tu_rnd() * side;
    m->atoms[i].z_ = tu_rnd() * side * 0.5;
  }
}

static int brute_close(const struct mol *m, double lim, int *pi, int *pj) {
  for (int i = 0; i < m->n_atoms; i++)
    for (int j = i + 1; j < m->n_atoms; j++) {
      double dx = m->atoms[i].x - m->atoms[j].x, dy = m->atoms[i].y - m->atoms[j].y,
             dz = m->atoms[i].z_ - m->atoms[j].z_;
      if (dx * dx + dy * dy + dz * dz < lim * lim) {
        *pi = i;
        *pj = j;
        return 1;
      }
    }
  return 0;
}

Test(mol, cell_list_matches_brute_force, .timeout = 120) {
  struct mol_check_opts o = {.min_distance = 0.5};
  /* sides chosen so that some clouds have close pairs and some do not */
  static const double sides[] = {40, 150, 400, 2000, 20000};
  int with = 0, without = 0;
  for (int s = 0; s < 5; s++)
    for (uint64_t seed = 1; seed <= 3; seed++) {
      struct mol m;
      cloud(&m, 10000, sides[s], seed * 7919 + (uint64_t)s);
      char why[256] = "", want[256] = "";
      int i, j;
      int bf = brute_close(&m, o.min_distance, &i, &j);
      int rc = mol_check(&m, &o, why, sizeof why);
      cr_assert_eq(rc, bf, "side %g seed %d: %s", sides[s], (int)seed, why);
      if (bf) {
        double d = sqrt(pow(m.atoms[i].x - m.atoms[j].x, 2) + pow(m.atoms[i].y - m.atoms[j].y, 2) +
                        pow(m.atoms[i].z_ - m.atoms[j].z_, 2));
        snprintf(want, sizeof want, "atoms too close: atoms %d and %d are %.2f Å apart (< 0.5)", i + 1, j + 1, d);
        cr_assert_str_eq(why, want, "the first pair in atom order");
        struct mol_why w;
        cr_assert_eq(mol_check_why(&m, &o, &w), 1);
        cr_assert_eq(w.atom, i + 1, "the first atom of the pair");
        with++;
      } else {
        without++;
      }
      mol_free(&m);
    }
  cr_assert(with > 0 && without > 0, "both outcomes exercised (%d with, %d without)", with, without);
  cr_log_info("%d clouds with a close pair, %d without", with, without);
}

/* 200,000 atoms: brute force computes 2e10 distances (tens of seconds of
 * CPU), the cell list about 0.17 s. Bounded in CPU time (clock()), not
 * the wall clock: other processes on a loaded machine do not add to it, and
 * the 5 s bound leaves 30x for a sanitizer build and a shared core's caches,
 * while an all-pairs scan still exceeds it. (mol_check counts no
 * operations that a test could read instead.) */
Test(mol, cell_list_is_linear) {
  struct mol m;
  cloud(&m, 200000, 600, 42);
  struct mol_check_opts o = {.min_distance = 0.01, .max_fragment_gap = 0};
  clock_t t0 = clock();
  char why[256];
  mol_check(&m, &o, why, sizeof why);
  double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
  cr_log_info("200,000 atoms: %.3f s of CPU", s);
  cr_assert_lt(s, 5.0, "cell list took %.2f s of CPU", s);
  mol_free(&m);
}

/* Random molecules made of chain fragments in loose clusters; the reported far
 * group of fragments must match an O(N^2) computation. */
static int bf_find(int *p, int x) {
  while (p[x] != x)
    x = p[x];
  return x;
}

Test(mol, fragment_gap_matches_brute_force, .timeout = 120) {
  struct mol_check_opts o = {.max_fragment_gap = 6};
  int flagged = 0, clean = 0, grouped = 0;
  for (uint64_t seed = 1; seed <= 60; seed++) {
    struct mol m;
    mol_init(&m);
    m.dim = 3;
    tu_seed(seed * 104729);
    int n_frag = 2 + (int)(tu_rnd() * 30);
    double side = 10 + (double)(seed % 4) * 20;
    for (int f = 0; f < n_frag; f++) {
      double cx = tu_rnd() * side, cy = tu_rnd() * side, cz = tu_rnd() * side * 0.5;
      int len = 1 + (int)(tu_rnd() * 8);
      for (int k = 0; k < len; k++) {
        tu_add_atom(&m, 6, cx + k * 1.5, cy + tu_rnd(), cz + tu_rnd());
        if (k) tu_add_bond(&m, m.n_atoms - 2, m.n_atoms - 1, 1);
      }
    }
    /* brute force: fragments by chain bonds, groups by every pair within the gap */
    int n = m.n_atoms;
    int *frag = malloc((size_t)n * sizeof *frag), *grp = malloc((size_t)n * sizeof *grp);
    for (int i = 0; i < n; i++)
      frag[i] = grp[i] = i;
    for (int b = 0; b < m.n_bonds; b++)
      frag[m.bonds[b].b] = frag[m.bonds[b].a];
    for (int i = 0; i < n; i++)
      for (int j = i + 1; j < n; j++) {
        double d = sqrt(pow(m.atoms[i].x - m.atoms[j].x, 2) + pow(m.atoms[i].y - m.atoms[j].y, 2) +
                        pow(m.atoms[i].z_ - m.atoms[j].z_, 2));
        if (frag[i] != frag[j] && d > o.max_fragment_gap) continue;
        int a = bf_find(grp, i), b = bf_find(grp, j);
        if (a != b) grp[a > b ? a : b] = a < b ? a : b;
      }
    int best = -1, best_size = 0, best_frags = 0, n_groups = 0;
    for (int r = 0; r < n; r++) {
      if (bf_find(grp, r) != r) continue;
      n_groups++;
      int size = 0, frags = 0;
      for (int i = 0; i < n; i++)
        if (bf_find(grp, i) == r) {
          size++;
          frags += frag[i] == i;
        }
      if (best < 0 || size < best_size) {
        best = r;
        best_size = size;
        best_frags = frags;
      }
    }
    char why[256] = "", want[256] = "";
    int rc = mol_check(&m, &o, why, sizeof why);
    if (n_groups > 1) {
      double gap = INFINITY;
      for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
          if (bf_find(grp, i) == best && bf_find(grp, j) != best) {
            double d = sqrt(pow(m.atoms[i].x - m.atoms[j].x, 2) + pow(m.atoms[i].y - m.atoms[j].y, 2) +
                            pow(m.atoms[i].z_ - m.atoms[j].z_, 2));
            if (d < gap) gap = d;
          }
      if (best_frags == 1)
        snprintf(want, sizeof want, "fragment far from the rest: fragment of %d atom%s is %.1f Å from the rest (> 6)",
                 best_size, best_size == 1 ? "" : "s", gap);
      else
        snprintf(want, sizeof want,
                 "fragment far from the rest: %d fragments of %d atoms together are %.1f Å from the rest (> 6)",
                 best_frags, best_size, gap);
      cr_assert_eq(rc, 1, "seed %d: expected '%s'", (int)seed, want);
      cr_assert_str_eq(why, want, "seed %d", (int)seed);
      int first = 0;
      while (bf_find(grp, first) != best)
        first++;
      struct mol_why w;
      cr_assert_eq(mol_check_why(&m, &o, &w), 1);
      cr_assert_eq(w.atom, first + 1, "seed %d: the far group's lowest atom", (int)seed);
      flagged++;
      grouped += best_frags > 1;
    } else {
      cr_assert_eq(rc, 0, "seed %d: %s", (int)seed, why);
      clean++;
    }
    free(frag);
    free(grp);
    mol_free(&m);
  }
  cr_assert(flagged > 0 && clean > 0 && grouped > 0, "%d flagged (%d groups of several), %d clean", flagged, grouped,
            clean);
  cr_log_info("%d flagged (%d groups of several), %d clean", flagged, grouped, clean);
}

/* Two bonded atoms at x = ±3e38 Å have finite coordinates, but their
 * distance overflows a float to infinity: the stored graph would be one its
 * own reader refuses (issue 30's fuzz). A coordinate beyond ±1e6 Å is no
 * molecule; it is refused here, at ingest, whatever the dimension. */
Test(mol, check_coordinates_out_of_range) {
  struct mol m;
  mol_init(&m);
  m.dim = 3;
  tu_add_atom(&m, 6, -3e38, 0, 0);
  tu_add_atom(&m, 6, 3e38, 0, 0);
  tu_add_bond(&m, 0, 1, 1);
  struct mol_check_opts o = default_opts();
  expect_reject(&m, &o, "coordinate out of range", 1, "atom 1: x = -3e+38 Å, beyond ±1e+06 Å");
  mol_free(&m);

  ethanol(&m);
  for (int i = 0; i < m.n_atoms; i++) { /* far from the origin, still a molecule */
    m.atoms[i].x += 9.99e5;
    m.atoms[i].z_ -= 9.99e5;
  }
  char why[256] = "";
  cr_assert_eq(mol_check(&m, &o, why, sizeof why), 0, "ethanol moved by 9.99e5 Å: %s", why);
  m.atoms[4].z_ = -1.5e6;
  expect_reject(&m, &o, "coordinate out of range", 5, "atom 5: z = -1.5e+06 Å, beyond ±1e+06 Å");
  m.atoms[4].z_ = 0;
  m.atoms[7].y = 2e6;
  m.dim = 2;
  expect_reject(&m, &o, "coordinate out of range", 8, "atom 8: y = 2e+06 Å, beyond ±1e+06 Å");
  mol_free(&m);
}
