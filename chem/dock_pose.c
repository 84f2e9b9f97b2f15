/* dock_pose.c — Vina's output read (dock.h): each model's score, terms and
 * atoms by serial number, held to physical ranges; a pose as the stored
 * molecule at those coordinates, and its SD tags. No process is run here:
 * dock.c runs Vina and hands its output over. */
#include "chem/dock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fixed-column number of a PDB line (columns from..to, 1-based). */
static int pdb_field(const char *line, size_t len, int from, int to, double *v) {
  if ((size_t)to > len) return -1;
  char buf[32];
  int w = to - from + 1;
  memcpy(buf, line + from - 1, (size_t)w);
  buf[w] = 0;
  char *end;
  *v = strtod(buf, &end);
  while (*end == ' ')
    end++;
  return end == buf || *end || !isfinite(*v) ? -1 : 0;
}

/* A REMARK line's numbers after its label (l bytes at line): up to max of
 * them into v; how many were read. */
static int remark_numbers(const char *line, size_t l, size_t label, double *v, int max) {
  char buf[128];
  size_t k = l - label < sizeof buf - 1 ? l - label : sizeof buf - 1;
  memcpy(buf, line + label, k);
  buf[k] = 0;
  int got = 0;
  for (char *p = buf, *end; got < max; p = end) {
    v[got] = strtod(p, &end);
    if (end == p || !isfinite(v[got])) break;
    got++;
  }
  return got;
}

int dock_parse_model(const char *text, size_t len, int model, int n, double *xyz, uint8_t *seen, struct dock_pose *p,
                     char *why, size_t whylen) {
  memset(seen, 0, (size_t)n);
  p->score = p->inter = p->intra = NAN;
  p->rmsd_lb = p->rmsd_ub = 0;
  /* at: the MODEL lines seen so far; lines count while at is the model
   * asked for (or, for model 1, before any MODEL line) */
  int have_score = 0, atoms = 0, at = 0, ended = 0;
  long lineno = 0;
  const char *end = text + len, *next;
  for (const char *ln = text; ln < end && !ended; ln = next) {
    const char *nl = memchr(ln, '\n', (size_t)(end - ln));
    size_t l = (size_t)((nl ? nl : end) - ln);
    next = nl ? nl + 1 : end;
    lineno++;
    if (l >= 6 && !memcmp(ln, "MODEL ", 6)) {
      if (++at > model) break;
      continue;
    }
    if (at != model && !(model == 1 && at == 0)) continue;
    if (l >= 6 && !memcmp(ln, "ENDMDL", 6)) {
      ended = 1;
    } else if (l > 19 && !memcmp(ln, "REMARK VINA RESULT:", 19) && !have_score) {
      double v[3];
      int got = remark_numbers(ln, l, 19, v, 3);
      if (got >= 1) {
        have_score = 1;
        p->score = v[0];
        if (got == 3) {
          p->rmsd_lb = v[1];
          p->rmsd_ub = v[2];
        }
        if (!(fabs(v[0]) <= DOCK_MAX_SCORE) ||
            (got == 3 && !(v[1] >= 0 && v[1] <= DOCK_MAX_COORD && v[2] >= 0 && v[2] <= DOCK_MAX_COORD))) {
          snprintf(why, whylen,
                   "line %ld of Vina's output: a score or RMSD out of range (a score within +-%g kcal/mol, an RMSD "
                   "0 to %g A): %.*s",
                   lineno, DOCK_MAX_SCORE, DOCK_MAX_COORD, (int)(l < 80 ? l : 80), ln);
          return -1;
        }
      }
    } else if (l > 13 && (!memcmp(ln, "REMARK INTER:", 13) || !memcmp(ln, "REMARK INTRA:", 13))) {
      double *term = !memcmp(ln, "REMARK INTER:", 13) ? &p->inter : &p->intra;
      if (remark_numbers(ln, l, 13, term, 1) == 1 && !(fabs(*term) <= DOCK_MAX_SCORE)) {
        snprintf(why, whylen, "line %ld of Vina's output: a term out of range (within +-%g kcal/mol): %.*s", lineno,
                 DOCK_MAX_SCORE, (int)(l < 80 ? l : 80), ln);
        return -1;
      }
    } else if (l >= 54 && (!memcmp(ln, "ATOM  ", 6) || !memcmp(ln, "HETATM", 6))) {
      double serial, x, y, z;
      if (pdb_field(ln, l, 7, 11, &serial) || pdb_field(ln, l, 31, 38, &x) || pdb_field(ln, l, 39, 46, &y) ||
          pdb_field(ln, l, 47, 54, &z)) {
        snprintf(why, whylen, "line %ld of Vina's output: an ATOM line cannot be read: %.*s", lineno,
                 (int)(l < 80 ? l : 80), ln);
        return -1;
      }
      if (!(fabs(x) <= DOCK_MAX_COORD && fabs(y) <= DOCK_MAX_COORD && fabs(z) <= DOCK_MAX_COORD)) {
        snprintf(why, whylen, "line %ld of Vina's output: an atom out of range (within +-%g A): %.*s", lineno,
                 DOCK_MAX_COORD, (int)(l < 80 ? l : 80), ln);
        return -1;
      }
      int s = (int)serial;
      if (s >= 1 && s <= n) {
        xyz[3 * (s - 1)] = x;
        xyz[3 * (s - 1) + 1] = y;
        xyz[3 * (s - 1) + 2] = z;
        seen[s - 1] = 1;
      }
      atoms++;
    }
  }
  if (model > 1 && at < model) return 1; /* Vina found fewer poses */
  if (!have_score) {
    snprintf(why, whylen, "Vina's output has no \"REMARK VINA RESULT\" line%s", model > 1 ? " in a later model" : "");
    return -1;
  }
  if (!atoms) {
    snprintf(why, whylen, "Vina's output has no atoms");
    return -1;
  }
  return 0;
}

int dock_parse_pose(const char *text, size_t len, int n, double *xyz, uint8_t *seen, double *score, char *why,
                    size_t whylen) {
  struct dock_pose p;
  int rc = dock_parse_model(text, len, 1, n, xyz, seen, &p, why, whylen);
  if (rc == 0) *score = p.score;
  return rc;
}

int dock_pose_tags(struct mol *m, int mode, const struct dock_pose *p) {
  static const char *const names[] = {"vina_score", "vina_inter", "vina_intra", "rmsd_lb", "rmsd_ub"};
  const double v[] = {p->score, p->inter, p->intra, p->rmsd_lb, p->rmsd_ub};
  char text[64];
  snprintf(text, sizeof text, "%d", mode);
  if (mol_add_tag(m, "mode", text)) return -1;
  for (int i = 0; i < 5; i++) {
    if (!isfinite(v[i])) continue;
    snprintf(text, sizeof text, "%.9g", v[i]);
    if (mol_add_tag(m, names[i], text)) return -1;
  }
  return 0;
}

void dock_job_free_poses(struct dock_job *j) {
  for (int i = 0; i < j->n_poses; i++) {
    free(j->poses[i].mol);
    j->poses[i].mol = NULL;
  }
  j->n_poses = 0;
}

int dock_pose_mol(const struct mol *m, const double *xyz, const uint8_t *seen, struct mol *out, char *why,
                  size_t whylen) {
  mol_init(out);
  int *to = malloc(sizeof *to * (size_t)(m->n_atoms ? m->n_atoms : 1));
  out->atoms = calloc((size_t)(m->n_atoms ? m->n_atoms : 1), sizeof *out->atoms);
  out->bonds = calloc((size_t)(m->n_bonds ? m->n_bonds : 1), sizeof *out->bonds);
  if (!to || !out->atoms || !out->bonds) {
    free(to);
    mol_free(out);
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  int k = 0;
  for (int i = 0; i < m->n_atoms; i++) {
    to[i] = -1;
    if (seen[i]) {
      to[i] = k;
      out->atoms[k] = m->atoms[i];
      out->atoms[k].x = xyz[3 * i];
      out->atoms[k].y = xyz[3 * i + 1];
      out->atoms[k].z_ = xyz[3 * i + 2];
      k++;
    } else if (m->atoms[i].z != 1) {
      snprintf(why, whylen, "Vina's pose lacks atom %d (%s)", i + 1, mol_element_symbol(m->atoms[i].z));
      free(to);
      mol_free(out);
      return -1;
    }
  }
  out->n_atoms = k;
  int nb = 0;
  for (int i = 0; i < m->n_bonds; i++) {
    const struct mol_bond *b = &m->bonds[i];
    int a = to[b->a], c = to[b->b];
    if (a >= 0 && c >= 0) {
      out->bonds[nb++] = (struct mol_bond){(uint32_t)a, (uint32_t)c, b->order};
    } else if (a >= 0 || c >= 0) {
      /* a hydrogen Vina did not place: a count on its atom again */
      struct mol_atom *h = &out->atoms[a >= 0 ? a : c];
      if (h->implicit_h < 255) h->implicit_h++;
    }
  }
  out->n_bonds = nb;
  out->dim = 3;
  out->charge = m->charge;
  free(to);
  return 0;
}
