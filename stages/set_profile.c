/* set_profile.c — a set's charge states and shapes, and how a library's
 * compare with a training set's (set_profile.h). */
#define _GNU_SOURCE
#include "set_profile.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One bracket atom, [ ... ] without the brackets: N or n, a hydrogen, +1. */
static int protonated_n(const char *a, size_t n) {
  size_t i = 0;
  while (i < n && isdigit((unsigned char)a[i]))
    i++; /* (an isotope) */
  if (i >= n) return 0;
  if (a[i] == 'N') {
    if (i + 1 < n && islower((unsigned char)a[i + 1])) return 0; /* Na, Nb, Ne, Ni, No, Np */
  } else if (a[i] != 'n') {
    return 0;
  }
  int h = 0, plus = 0, other = 0;
  for (i++; i < n; i++) {
    if (a[i] == 'H') {
      h = 1;
    } else if (a[i] == '+') {
      plus++;
      if (i + 1 < n && isdigit((unsigned char)a[i + 1]))
        other = a[i + 1] != '1' || (i + 2 < n && isdigit((unsigned char)a[i + 2]));
    } else if (a[i] == '-') {
      other = 1;
    }
  }
  return h && plus == 1 && !other;
}

int set_profile_protonated_amine(const char *smiles) {
  for (const char *p = smiles ? strchr(smiles, '[') : NULL; p; p = strchr(p, '[')) {
    const char *end = strchr(p, ']');
    if (!end) return 0;
    if (protonated_n(p + 1, (size_t)(end - p - 1))) return 1;
    p = end;
  }
  return 0;
}

int set_profile_of(sqlite3 *db, const char *db_schema, const char *set, struct set_profile *p, struct se3_error *err) {
  memset(p, 0, sizeof *p);
  char *sql = sqlite3_mprintf("SELECT m.smiles, m.charge, m.coords_from = 'input' FROM \"%w\".molecules m "
                              "WHERE m.set_name = ?1 AND NOT EXISTS (SELECT 1 FROM \"%w\".duplicates d "
                              "WHERE d.mol_id = m.id)",
                              db_schema, db_schema);
  sqlite3_stmt *st = NULL;
  int rc = sql ? sqlite3_prepare_v2(db, sql, -1, &st, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc == SQLITE_OK) sqlite3_bind_text(st, 1, set, -1, SQLITE_STATIC);
  while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    int amine = set_profile_protonated_amine((const char *)sqlite3_column_text(st, 0));
    p->molecules++;
    p->protonated_amines += amine;
    p->ionised += amine || sqlite3_column_int64(st, 1) != 0;
    p->input_coordinates += sqlite3_column_int(st, 2) != 0;
    rc = SQLITE_OK;
  }
  if (rc != SQLITE_DONE) {
    se3_error_set(err, SE3_ERR_DB, "reading the molecules of set '%s': %s", set, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return -1;
  }
  sqlite3_finalize(st);
  p->has = 1;
  return 0;
}

static const char *const NAMES[] = {"molecules", "ionised", "protonated_amines", "input_coordinates"};

static int64_t *field(struct set_profile *p, int i) {
  int64_t *f[] = {&p->molecules, &p->ionised, &p->protonated_amines, &p->input_coordinates};
  return f[i];
}

void set_profile_text(const struct set_profile *p, char *out, size_t len) {
  size_t at = 0;
  if (len) out[0] = 0;
  for (int i = 0; p->has && i < 4 && at < len; i++) {
    int k = snprintf(out + at, len - at, "profile.%s=%" PRId64 "\n", NAMES[i], *field((struct set_profile *)p, i));
    if (k < 0) break;
    at += (size_t)k;
  }
}

int set_profile_card(sqlite3 *db, const char *db_schema, const char *set, char *out, size_t len,
                     struct se3_error *err) {
  struct set_profile p;
  if (set_profile_of(db, db_schema, set, &p, err)) return -1;
  set_profile_text(&p, out, len);
  return 0;
}

void set_profile_parse(const char *card, size_t len, struct set_profile *p) {
  memset(p, 0, sizeof *p);
  int seen = 0;
  for (const char *l = card, *end = card ? card + len : NULL; l && l < end;) {
    const char *nl = memchr(l, '\n', (size_t)(end - l));
    const char *le = nl ? nl : end;
    for (int i = 0; i < 4; i++) {
      char key[64];
      int k = snprintf(key, sizeof key, "profile.%s=", NAMES[i]);
      if (k > 0 && le - l > k && !memcmp(l, key, (size_t)k)) {
        char num[32];
        size_t n = (size_t)(le - l - k) < sizeof num - 1 ? (size_t)(le - l - k) : sizeof num - 1;
        memcpy(num, l + k, n);
        num[n] = 0;
        char *e;
        long long v = strtoll(num, &e, 10);
        if (e != num && !*e && v >= 0) *field(p, i) = v, seen |= 1 << i;
      }
    }
    l = nl ? nl + 1 : end;
  }
  p->has = seen == 15 && p->molecules > 0;
}

/* Shares a and b (0..1) differ clearly: 10 points apart, one at least twice the other. */
static int clearly_apart(double a, double b) {
  double lo = a < b ? a : b, hi = a < b ? b : a;
  return hi - lo >= 0.10 && hi >= 2 * lo;
}

int set_profile_compare(const struct set_profile *train, const struct set_profile *lib, char *out, size_t len) {
  int n = 0;
  size_t at = 0;
  if (len) out[0] = 0;
  if (!train->has || !lib->has || train->molecules <= 0 || lib->molecules <= 0) return 0;
  double nt = (double)train->molecules, nl = (double)lib->molecules;
  struct {
    const char *what;
    int64_t t, l;
  } share[] = {
      {"ionised (a net charge or a protonated amine)", train->ionised, lib->ionised},
      {"with a protonated amine ([NH+], [NH2+], [NH3+], [nH+])", train->protonated_amines, lib->protonated_amines}};
  for (size_t i = 0; i < sizeof share / sizeof *share && at < len; i++) {
    double a = (double)share[i].t / nt, b = (double)share[i].l / nl;
    if (!clearly_apart(a, b)) continue;
    int k = snprintf(out + at, len - at,
                     "%scharge states differ: %.1f %% of the training set's molecules are %s (%" PRId64 " of %" PRId64
                     "), %.1f %% of this set's (%" PRId64 " of %" PRId64
                     "): the model may score the charge state rather than the molecule; prepare both alike "
                     "(stages.ingest.protonate: 7.4, or neutral, for training and library)",
                     n ? "\n" : "", 100 * a, share[i].what, share[i].t, train->molecules, 100 * b, share[i].l,
                     lib->molecules);
    if (k > 0) at += (size_t)k, n++;
  }
  double a = (double)train->input_coordinates / nt, b = (double)lib->input_coordinates / nl;
  if ((a > 0.5) != (b > 0.5) && at < len) {
    int k = snprintf(out + at, len - at,
                     "%s3D shapes differ: %.1f %% of the training set's molecules kept their files' coordinates, "
                     "%.1f %% of this set's (the rest generated): the model learned from one kind of shape and "
                     "scores another; train with stages.ingest.coordinates: generated to score libraries "
                     "without 3D coordinates, or score files that carry coordinates like the training set's",
                     n ? "\n" : "", 100 * a, 100 * b);
    if (k > 0) at += (size_t)k, n++;
  }
  if (at >= len && len) out[len - 1] = 0;
  return n;
}
