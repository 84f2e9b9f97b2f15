/* dock.h — docking with AutoDock Vina, one molecule per isolated process.
 *
 * Debian's autodock-vina ships the `vina` program and no library, so each
 * molecule is docked by a child process of its own: it writes the ligand as
 * PDBQT through Open Babel (chem/obbridge.h, in the child: Open Babel is
 * neither thread-safe nor crash-free) into a fresh folder and becomes
 * `vina` there, in a process group of its own that dies with its parent.
 * The parent (struct dock_pool) keeps `workers` of them going, gives each a
 * wall-time limit and an address-space limit, and reads the best pose
 * back: a crash, a failure of Vina, a timeout or Vina's memory running out
 * costs that molecule (a reason and the log's last words, read from its
 * end: a log of any size costs 4 KiB), never the run.
 *
 * A pose is the docked molecule itself: the atoms and bonds it was stored
 * with, its coordinates those Vina gave each atom (the child leaves beside
 * the ligand a map from each PDBQT serial number to the molecule's atom),
 * less the hydrogens Vina does not place (non-polar ones, whose count goes
 * back on their atom), so the pose keeps the bond orders, charges and atom
 * order of the molecule that was docked.
 */
#ifndef SE3_DOCK_H
#define SE3_DOCK_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "chem/mol.h"

struct se3_error;

struct dock_box {
  double center[3], size[3]; /* Å */
};

struct dock_setup {
  const char *vina;        /* the program (a name looked up in PATH, or a path) */
  const char *receptor;    /* the receptor as PDBQT (dock_prepare_receptor) */
  struct dock_box box;
  int exhaustiveness;      /* Vina's --exhaustiveness */
  unsigned seed;           /* Vina's --seed: the same seed, the same pose */
  int modes;               /* Vina's --num_modes: poses kept a molecule, best first (1..DOCK_MAX_MODES; 0: 1) */
  double energy_range;     /* Vina's --energy_range, kcal/mol: a pose kept only within this of the best (<= 0: 3) */
  double timeout_s;        /* per molecule, whatever it waits for */
  uint64_t memory_limit;   /* bytes of address space each Vina process may take (RLIMIT_AS, set in the
                              child before it becomes Vina); a Vina that runs out of it is a reject,
                              "out of memory", naming stages.dock.memory_limit_mb. 0: no limit */
  const char *tmpdir;      /* where each molecule's folder goes; NULL: $TMPDIR or /tmp */
};

/* The most poses a molecule keeps (stages.dock.modes). */
#define DOCK_MAX_MODES 20

/* One pose of a docked molecule: what Vina's output says of its model. */
struct dock_pose {
  double score;            /* affinity, kcal/mol (Vina's "VINA RESULT"; lower is better) */
  double inter, intra;     /* Vina's intermolecular and intramolecular terms, kcal/mol; NAN where not given */
  double rmsd_lb, rmsd_ub; /* RMSD from the best pose, Å (lower and upper bound; 0 for the best) */
  uint8_t *mol;            /* the pose as a molecule blob (chem/mol.h; malloc'd: the caller frees) */
  size_t len;
};

struct dock_job {
  const uint8_t *mol;      /* in: the molecule's blob (chem/mol.h) */
  size_t mol_len;
  int status;              /* out: 0 docked, 1 rejected */
  double score;            /* docked: the best pose's affinity, kcal/mol (lower is better): poses[0].score */
  struct dock_pose poses[DOCK_MAX_MODES]; /* docked: the poses, best first (at most the set-up's modes) */
  int n_poses;             /* docked: how many (Vina may find fewer distinct poses than asked for) */
  double seconds;          /* wall time of the molecule's process */
  char reason[96];         /* rejected: "ligand preparation failed", "Vina failed", "timed out",
                              "docking crashed", "out of memory", "no pose" */
  char detail[512];        /* ... and the specifics (Vina's last words, the signal) */
};

/* The receptor file (any format Open Babel reads by its extension; a .pdbqt
 * file as it is) as PDBQT at out (written whole, then renamed), polar
 * hydrogens placed for pH 7.4, in a process of its own with timeout_s. 0, or
 * -1 with err naming the file (SE3_ERR_IO: a file could not be read or
 * written, its file the path; SE3_ERR_INPUT: Open Babel cannot read it;
 * SE3_ERR_RUN: the process failed). err may be NULL. */
int dock_prepare_receptor(const char *in, const char *out, double timeout_s, struct se3_error *err);
/* The box around the first molecule of the file at path (a reference
 * ligand, as placed in the receptor), `padding` Å added on every side. 0, or
 * -1 with err. */
int dock_box_from_ligand(const char *path, double padding, double timeout_s, struct dock_box *b, struct se3_error *err);
/* Vina's version line ("AutoDock Vina v1.2.3") into out; 0, or -1 with err
 * (SE3_ERR_RUN) when the program cannot be run. */
int dock_vina_version(const char *vina, char *out, size_t size, struct se3_error *err);
/* The dockings in flight: at most `workers` processes at once, each with
 * its job, started when the caller has one and a slot is free, whatever
 * job it belongs to (a stage keeps both workers busy across its chunks:
 * the next chunk's first dockings start while this one's last run). The
 * jobs are the caller's and must outlive their docking. */
struct dock_pool;
/* A pool of `workers` (<= 0: one) slots under s (kept by pointer); NULL
 * with err. */
struct dock_pool *dock_pool_open(const struct dock_setup *s, int workers, struct se3_error *err);
/* Its slots free. */
int dock_pool_idle(const struct dock_pool *p);
/* Job j's docking started in a free slot (j->status -1 until it ends). 0,
 * or -1 with err (no slot free, no folder, no fork). */
int dock_pool_start(struct dock_pool *p, struct dock_job *j, struct se3_error *err);
/* Waits up to wait_s for a docking to end (docked, rejected, or timed
 * out at s->timeout_s): 1 with *done its job (filled in), 0 when none
 * ended in that time (or none runs), -1 on a system error (err). */
int dock_pool_wait(struct dock_pool *p, double wait_s, struct dock_job **done, struct se3_error *err);
/* The jobs running and for how long each has run (s), at most max: their
 * count. */
int dock_pool_running(const struct dock_pool *p, const struct dock_job **jobs, double *seconds, int max);
/* Every docking still running killed (its job's status -1), the pool
 * freed. NULL: nothing. */
void dock_pool_close(struct dock_pool *p);

/* A molecule's expected docking work: seconds of one core, about, on the
 * machine it was measured on (a 2-core Debian machine; bench/dock_eta.sh
 * measures it again): Vina's exhaustiveness, the heavy atoms and the
 * rotatable bonds, each to a power fitted on Vina's own times. An ETA
 * takes the seconds a unit of it costs from the dockings that ended. */
double dock_cost(int exhaustiveness, int heavy, int rotors);
/* The rotatable bonds of m as Open Babel's PDBQT (Vina's torsion tree)
 * has them: single bonds outside rings, not an amide's C-N, between two
 * atoms each bonded to another heavy atom or carrying a polar hydrogen
 * (N-H, O-H: the PDBQT keeps it, and its bond turns). */
int dock_rotors(const struct mol *m);

/* ---- the parts, for the tests ---------------------------------------------- */

/* The last `lines` non-empty lines of the log at path, joined by " | ", at
 * most size bytes (NUL-terminated; "" when it cannot be read). Only the
 * log's last 4 KiB are read (pread at its end), whatever its size; control
 * characters and NUL bytes read as blanks. */
void dock_log_tail(const char *path, int lines, char *out, size_t size);

/* What is read from Vina's output is held to physical ranges, so that a
 * number like -1e308 or an atom at 1e300 is an error naming the line,
 * never a score or a pose: a score or term within +-DOCK_MAX_SCORE
 * kcal/mol (Vina's poses score tens; a clash, thousands), an RMSD 0 to
 * DOCK_MAX_COORD, a coordinate within +-DOCK_MAX_COORD Angstrom (PDB's
 * 8.3 columns hold -999.999 to 9999.999). */
#define DOCK_MAX_SCORE 1e5
#define DOCK_MAX_COORD 1e5

/* The first model of Vina's output (PDBQT text): its affinity and each
 * atom's coordinates by serial number (xyz[3 * (serial - 1)], seen[serial -
 * 1] = 1 for 1 <= serial <= n). 0, or -1 with why (a docking's reject
 * detail, not an error of the run). */
int dock_parse_pose(const char *text, size_t len, int n, double *xyz, uint8_t *seen, double *score, char *why,
                    size_t whylen);
/* Model `model` (1-based: the MODEL lines counted; text without MODEL
 * lines is model 1) of Vina's output: as dock_parse_pose, with its terms
 * into *p (score, inter, intra, rmsd_lb, rmsd_ub; mol untouched). 0; 1
 * when the output has no such model (Vina found fewer); -1 with why. */
int dock_parse_model(const char *text, size_t len, int model, int n, double *xyz, uint8_t *seen, struct dock_pose *p,
                     char *why, size_t whylen);
/* A pose's SD tags added to m, in this order: mode, vina_score,
 * vina_inter, vina_intra, rmsd_lb, rmsd_ub (kcal/mol, Å; %.9g; a NAN term
 * left out). hits.sdf and `export --poses` write them so. 0, or -1 out of
 * memory. */
int dock_pose_tags(struct mol *m, int mode, const struct dock_pose *p);
/* The poses of a job freed, n_poses 0. */
void dock_job_free_poses(struct dock_job *j);
/* m at the pose: the coordinates of the atoms seen, the hydrogens unseen
 * dropped (counted on their atom). 0, or -1 with why (a heavy atom unseen:
 * the docking's reject detail). */
int dock_pose_mol(const struct mol *m, const double *xyz, const uint8_t *seen, struct mol *out, char *why,
                  size_t whylen);

#endif
