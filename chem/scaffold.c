/* scaffold.c — Bemis–Murcko frameworks by repeated removal of atoms of
 * degree <= 1 (scaffold.h). */
#include "chem/scaffold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/obbridge.h"

int scaffold_atoms(const struct mol *m, uint8_t *keep) {
  int n = m->n_atoms;
  if (n == 0) return 0;
  int *deg = calloc((size_t)n, sizeof *deg), *queue = malloc((size_t)n * sizeof *queue);
  /* adjacency in CSR form: start[i]..start[i+1] index into nbr */
  int *start = calloc((size_t)n + 1, sizeof *start), *nbr = malloc((size_t)(2 * m->n_bonds + 1) * sizeof *nbr);
  if (!deg || !queue || !start || !nbr) {
    free(deg), free(queue), free(start), free(nbr);
    return -1;
  }
  for (int b = 0; b < m->n_bonds; b++) {
    uint32_t a = m->bonds[b].a, c = m->bonds[b].b;
    if (a >= (uint32_t)n || c >= (uint32_t)n || a == c) {
      free(deg), free(queue), free(start), free(nbr);
      return -1;
    }
    start[a + 1]++;
    start[c + 1]++;
  }
  for (int i = 0; i < n; i++)
    start[i + 1] += start[i];
  int *fill = deg; /* reuse as a cursor, then recompute the degrees */
  for (int b = 0; b < m->n_bonds; b++) {
    int a = (int)m->bonds[b].a, c = (int)m->bonds[b].b;
    nbr[start[a] + fill[a]++] = c;
    nbr[start[c] + fill[c]++] = a;
  }
  int head = 0, tail = 0, left = n;
  for (int i = 0; i < n; i++) {
    keep[i] = 1;
    deg[i] = start[i + 1] - start[i];
    if (deg[i] <= 1) queue[tail++] = i;
  }
  /* peel: a removed atom lowers its neighbours' degrees; those reaching 1
   * join the queue (each atom enters once: when its degree first drops to
   * <= 1, or at the start) */
  while (head < tail) {
    int i = queue[head++];
    keep[i] = 0;
    left--;
    for (int k = start[i]; k < start[i + 1]; k++) {
      int j = nbr[k];
      if (!keep[j]) continue;
      if (--deg[j] == 1) queue[tail++] = j;
    }
  }
  free(deg), free(queue), free(start), free(nbr);
  /* an atom double-bonded to the framework (a ring C=O, an exocyclic C=C)
   * stays with it: stripped, it would leave an aromatic ring no Kekulé
   * structure fits (2-pyridone's [cH2]), whose canonical SMILES Open Babel
   * writes differently from one call to the next */
  int kept = left;
  for (int b = 0; b < m->n_bonds; b++) {
    int a = (int)m->bonds[b].a, c = (int)m->bonds[b].b;
    if (m->bonds[b].order != 2 || keep[a] + keep[c] != 1) continue; /* framework (1) to stripped (0) */
    keep[keep[a] ? c : a] = 2; /* put back; 2: no chain grows from it */
    kept++;
  }
  for (int i = 0; i < n; i++)
    keep[i] = keep[i] != 0;
  return kept;
}

int scaffold_mol(const struct mol *m, struct mol *out) {
  mol_init(out);
  uint8_t *keep = malloc((size_t)m->n_atoms + 1);
  int *map = malloc(((size_t)m->n_atoms + 1) * sizeof *map);
  int n = keep && map ? scaffold_atoms(m, keep) : -1;
  if (n < 0) {
    free(keep), free(map);
    return -1;
  }
  out->atoms = calloc((size_t)n + 1, sizeof *out->atoms);
  out->bonds = calloc((size_t)m->n_bonds + 1, sizeof *out->bonds);
  if (!out->atoms || !out->bonds) {
    free(keep), free(map);
    mol_free(out);
    return -1;
  }
  for (int i = 0; i < m->n_atoms; i++) {
    map[i] = keep[i] ? out->n_atoms : -1;
    if (keep[i]) out->atoms[out->n_atoms++] = m->atoms[i];
  }
  for (int b = 0; b < m->n_bonds; b++) {
    const struct mol_bond *bd = &m->bonds[b];
    int a = map[bd->a], c = map[bd->b];
    if (a >= 0 && c >= 0) {
      out->bonds[out->n_bonds++] = (struct mol_bond){(uint32_t)a, (uint32_t)c, bd->order};
    } else if (a >= 0 || c >= 0) { /* a bond to a stripped atom becomes hydrogens */
      struct mol_atom *t = &out->atoms[a >= 0 ? a : c];
      int h = t->implicit_h + (bd->order == MOL_BOND_AROMATIC ? 1 : bd->order);
      t->implicit_h = (uint8_t)(h > 255 ? 255 : h);
    }
  }
  out->dim = 0;
  free(keep), free(map);
  return 0;
}

char *scaffold_key(const struct mol *m) {
  struct mol s;
  if (scaffold_mol(m, &s)) return NULL;
  char *key = s.n_atoms == 0 ? strdup("") : ob_canonical_smiles(&s);
  mol_free(&s);
  return key;
}

char *mol_compound_key(long long id, const char *inchikey) {
  char buf[32];
  if (inchikey && strlen(inchikey) >= 14 && inchikey[14] == '-')
    snprintf(buf, sizeof buf, "%.14s", inchikey);
  else
    snprintf(buf, sizeof buf, "#%lld", id);
  return strdup(buf);
}
