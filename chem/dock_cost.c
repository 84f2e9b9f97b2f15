/* dock_cost.c — the work a docking takes, for an ETA before it ends
 * (chem/dock.h: dock_cost, dock_rotors). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "chem/dock.h"
#include "chem/perceive.h"

/* Fitted on Vina 1.2.3 with --cpu 1 (bench/dock_eta.sh: 13 ligands of 6
 * to 33 heavy atoms and 0 to 19 rotatable bonds at exhaustiveness 1, 2
 * and 4, into FABP4, wall time on a 2-core machine): t = K e^0.85
 * heavy^0.63 (1 + rotors)^0.85 seconds, each within a factor of 1.8. */
#define DOCK_COST_K 0.115
#define DOCK_COST_EXH 0.85
#define DOCK_COST_HEAVY 0.63
#define DOCK_COST_ROTORS 0.85

double dock_cost(int exhaustiveness, int heavy, int rotors) {
  if (exhaustiveness < 1) exhaustiveness = 1;
  if (heavy < 1) heavy = 1;
  if (rotors < 0) rotors = 0;
  return DOCK_COST_K * pow(exhaustiveness, DOCK_COST_EXH) * pow(heavy, DOCK_COST_HEAVY) *
         pow(1.0 + rotors, DOCK_COST_ROTORS);
}

/* Whether atom a of m is N or O with a hydrogen (PDBQT keeps it: its bond
 * turns). */
static int polar_h(const struct mol *m, const int *h_atoms, uint32_t a) {
  int z = m->atoms[a].z;
  return (z == 7 || z == 8) && (m->atoms[a].implicit_h > 0 || h_atoms[a] > 0);
}

/* Whether bond b is an amide's C-N (Open Babel's PDBQT keeps it rigid). */
static int amide(const struct mol *m, const struct mol_bond *b) {
  uint32_t c = m->atoms[b->a].z == 6 && m->atoms[b->b].z == 7   ? b->a
               : m->atoms[b->b].z == 6 && m->atoms[b->a].z == 7 ? b->b
                                                                : UINT32_MAX;
  if (c == UINT32_MAX) return 0;
  for (int i = 0; i < m->n_bonds; i++) {
    const struct mol_bond *o = &m->bonds[i];
    if (o->order == 2 && (o->a == c || o->b == c) && m->atoms[o->a == c ? o->b : o->a].z == 8) return 1;
  }
  return 0;
}

int dock_rotors(const struct mol *m) {
  struct perceive p;
  if (m->n_atoms <= 0 || perceive(m, &p)) return 0;
  int *heavy = calloc((size_t)m->n_atoms * 2, sizeof *heavy), n = 0;
  if (!heavy) {
    perceive_free(&p);
    return 0;
  }
  int *h_atoms = heavy + m->n_atoms;
  for (int i = 0; i < m->n_bonds; i++) {
    const struct mol_bond *b = &m->bonds[i];
    if (m->atoms[b->a].z == 1) h_atoms[b->b]++;
    if (m->atoms[b->b].z == 1) h_atoms[b->a]++;
    if (m->atoms[b->a].z != 1 && m->atoms[b->b].z != 1) heavy[b->a]++, heavy[b->b]++;
  }
  for (int i = 0; i < m->n_bonds; i++) {
    const struct mol_bond *b = &m->bonds[i];
    if (b->order != 1 || p.bond[i].ring || m->atoms[b->a].z == 1 || m->atoms[b->b].z == 1 || amide(m, b)) continue;
    int da = heavy[b->a] + polar_h(m, h_atoms, b->a), db = heavy[b->b] + polar_h(m, h_atoms, b->b);
    if (da >= 2 && db >= 2) n++;
  }
  free(heavy);
  perceive_free(&p);
  return n;
}
