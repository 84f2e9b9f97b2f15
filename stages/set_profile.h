/* set_profile.h — a molecule set's charge states and where its 3D shapes
 * came from, in a few counts (issue 54): train writes its training set's
 * onto the model's card (lines "profile.KEY=N" after the settings, which
 * older readers pass over), and scoring compares a library's with them, so
 * that a library prepared unlike the training set is reported, never
 * scored silently. A helper of the stages like modelcard.c: it includes no
 * stage's header. */
#ifndef SE3_SET_PROFILE_H
#define SE3_SET_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "common/error.h"

struct set_profile {
  int has;                   /* 0: not known (a card from before profiles) */
  int64_t molecules;         /* the set's molecules (its duplicates left out) */
  int64_t ionised;           /* with a net formal charge or a protonated amine */
  int64_t protonated_amines; /* with an N+ that carries a hydrogen: [NH+], [NH2+], [NH3+], [nH+] */
  int64_t input_coordinates; /* whose 3D coordinates are their file's (molecules.coords_from 'input') */
};

/* Whether canonical SMILES smiles has a protonated nitrogen: a bracket atom
 * N or n with a hydrogen count and a charge of +1. */
int set_profile_protonated_amine(const char *smiles);

/* The profile of set `set` in schema `db_schema` ("main", or an attached
 * database's name) of db. 0, or -1 with err. */
int set_profile_of(sqlite3 *db, const char *db_schema, const char *set, struct set_profile *p, struct se3_error *err);

/* set_profile_of, then set_profile_text into out; on failure -1 with err. */
int set_profile_card(sqlite3 *db, const char *db_schema, const char *set, char *out, size_t len, struct se3_error *err);

/* The card lines of p ("profile.molecules=N\n" ...), or "" when !p->has. */
void set_profile_text(const struct set_profile *p, char *out, size_t len);
/* The profile a card's text holds (p->has 0 when none). */
void set_profile_parse(const char *card, size_t len, struct set_profile *p);

/* The differences between a model's training set and a scored library
 * that deserve a warning, one sentence each in out (empty when none):
 * a share (of ionised molecules, of protonated amines) differs clearly
 * when the two shares are at least 10 points apart and the larger is at
 * least twice the smaller; the shapes differ when most of the training
 * set kept its files' coordinates and most of the library's are
 * generated, or the other way round. Returns the number of sentences. */
int set_profile_compare(const struct set_profile *train, const struct set_profile *lib, char *out, size_t len);

#endif
