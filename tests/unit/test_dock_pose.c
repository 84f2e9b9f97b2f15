/* Docking's parts that need no Vina (chem/dock.h): reading Vina's output
 * PDBQT (the first model only, atoms by their serial numbers whatever their
 * order), the pose as the stored molecule at those coordinates (unplaced
 * hydrogens back as counts), refusals of output that cannot be a pose, the
 * box around a reference ligand read by the real Open Babel, and a ligand
 * written as PDBQT with every atom numbered as in the molecule. The dock
 * stage with the real Vina: tests/integration/test_dock.sh. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/dock.h"
#include "chem/obbridge.h"
#include "common/error.h"
#include "tests/testutil.h"

/* PDB fixed columns: serial 7-11, x 31-38, y 39-46, z 47-54 */
static const char OUT[] =
    "MODEL 1\n"
    "REMARK VINA RESULT:    -7.512      0.000      0.000\n"
    "REMARK  Name = methanol\n"
    "ROOT\n"
    "ATOM      2  O   UNL     1       1.500   2.250  -3.125  0.00  0.00    -0.398 OA\n"
    "ATOM      1  C   UNL     1      10.000  -1.000   0.500  0.00  0.00    +0.196 C \n"
    "ATOM      4  H   UNL     1       1.900   3.000  -3.000  0.00  0.00    +0.209 HD\n"
    "ENDROOT\n"
    "TORSDOF 0\n"
    "ENDMDL\n"
    "MODEL 2\n"
    "REMARK VINA RESULT:    -6.000      1.000      2.000\n"
    "ATOM      1  C   UNL     1      99.000  99.000  99.000  0.00  0.00    +0.196 C \n"
    "ENDMDL\n";

/* methanol as stored: C, O, one H on C (the others as counts), H on O */
static void methanol(struct mol *m) {
  mol_init(m);
  m->n_atoms = 4;
  m->n_bonds = 3;
  m->atoms = calloc(4, sizeof *m->atoms);
  m->bonds = calloc(3, sizeof *m->bonds);
  m->atoms[0] = (struct mol_atom){.z = 6, .implicit_h = 2, .x = 0, .y = 0, .z_ = 0};
  m->atoms[1] = (struct mol_atom){.z = 8, .x = 1.4, .y = 0, .z_ = 0};
  m->atoms[2] = (struct mol_atom){.z = 1, .x = -0.5, .y = 0.9, .z_ = 0};
  m->atoms[3] = (struct mol_atom){.z = 1, .x = 1.8, .y = 0.9, .z_ = 0};
  m->bonds[0] = (struct mol_bond){0, 1, 1};
  m->bonds[1] = (struct mol_bond){0, 2, 1};
  m->bonds[2] = (struct mol_bond){1, 3, 1};
  m->dim = 3;
}

Test(dock_pose, the_first_model_by_serial_numbers) {
  double xyz[12], score = 0;
  uint8_t seen[4];
  char err[256] = "";
  cr_assert_eq(dock_parse_pose(OUT, strlen(OUT), 4, xyz, seen, &score, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(score, -7.512, 1e-12);
  cr_assert(seen[0] && seen[1] && !seen[2] && seen[3]);
  cr_assert_float_eq(xyz[0], 10.0, 1e-12); /* atom 1 from the second ATOM line, model 2 not read */
  cr_assert_float_eq(xyz[1], -1.0, 1e-12);
  cr_assert_float_eq(xyz[3], 1.5, 1e-12);
  cr_assert_float_eq(xyz[5], -3.125, 1e-12);
  cr_assert_float_eq(xyz[10], 3.0, 1e-12);
}

Test(dock_pose, the_pose_keeps_the_molecule_and_counts_unplaced_hydrogens) {
  struct mol m, pose;
  methanol(&m);
  double xyz[12] = {0};
  uint8_t seen[4];
  double score;
  char err[256] = "";
  struct se3_error e;
  cr_assert_eq(dock_parse_pose(OUT, strlen(OUT), 4, xyz, seen, &score, err, sizeof err), 0, "%s", err);
  cr_assert_eq(dock_pose_mol(&m, xyz, seen, &pose, err, sizeof err), 0, "%s", err);
  cr_assert_eq(pose.n_atoms, 3);
  cr_assert_eq(pose.atoms[0].z, 6);
  cr_assert_eq(pose.atoms[0].implicit_h, 3, "the carbon's hydrogen Vina did not place is a count again");
  cr_assert_eq(pose.atoms[2].z, 1);
  cr_assert_float_eq(pose.atoms[2].y, 3.0, 1e-12);
  cr_assert_eq(pose.n_bonds, 2);
  cr_assert(pose.bonds[1].a == 1 && pose.bonds[1].b == 2, "O-H renumbered: %u-%u", pose.bonds[1].a,
            pose.bonds[1].b);
  /* the blob round trip */
  uint8_t *blob = NULL;
  size_t len = 0;
  cr_assert_eq(mol_to_blob(&pose, &blob, &len), 0);
  struct mol back;
  mol_init(&back);
  cr_assert_eq(mol_from_blob(blob, len, &back, &e), 0, "%s", se3_error_str(&e).s);
  cr_assert_eq(back.n_atoms, 3);
  cr_assert_float_eq(back.atoms[0].x, 10.0, 1e-5);
  free(blob);
  mol_free(&back);
  mol_free(&pose);
  mol_free(&m);
}

Test(dock_pose, output_that_is_not_a_pose_is_refused) {
  struct mol m, pose;
  methanol(&m);
  double xyz[12];
  uint8_t seen[4];
  double score;
  char err[256] = "";
  /* no affinity */
  const char *no_score = "MODEL 1\nATOM      1  C   UNL     1      10.000  -1.000   0.500  0.00  0.00    +0.196 C \n";
  cr_assert_eq(dock_parse_pose(no_score, strlen(no_score), 4, xyz, seen, &score, err, sizeof err), -1);
  cr_assert(strstr(err, "REMARK VINA RESULT"), "%s", err);
  /* a coordinate that is not a number */
  const char *bad = "REMARK VINA RESULT: -5.0\nATOM      1  C   UNL     1      10.0x0  -1.000   0.500\n";
  cr_assert_eq(dock_parse_pose(bad, strlen(bad), 4, xyz, seen, &score, err, sizeof err), -1);
  cr_assert(strstr(err, "cannot be read"), "%s", err);
  /* a heavy atom Vina did not place */
  const char *half = "REMARK VINA RESULT: -5.0\nATOM      2  O   UNL     1       1.500   2.250  -3.125  0.00  0.00\n";
  cr_assert_eq(dock_parse_pose(half, strlen(half), 4, xyz, seen, &score, err, sizeof err), 0, "%s", err);
  cr_assert_eq(dock_pose_mol(&m, xyz, seen, &pose, err, sizeof err), -1);
  cr_assert(strstr(err, "lacks atom 1 (C)"), "%s", err);
  mol_free(&m);
}

Test(dock_pose, the_box_around_a_reference_ligand) {
  struct dock_box b;
  struct se3_error e;
  const char *lig = tu_src("tests/data/dock/crystal_ligand.mol2");
  cr_assert_eq(dock_box_from_ligand(lig, 4, 60, &b, &e), 0, "%s", se3_error_str(&e).s);
  /* the crystal ligand's heavy atoms and hydrogens span x 0.12..9.97 or so: its centre and extent */
  cr_assert(fabs(b.center[0] - 4.4285) < 1e-3 && fabs(b.center[1] - 7.52795) < 1e-3 &&
                fabs(b.center[2] - 18.67635) < 1e-3,
            "centre %g %g %g", b.center[0], b.center[1], b.center[2]);
  cr_assert(fabs(b.size[0] - (9.6958 + 8)) < 1e-3 && fabs(b.size[1] - (11.0973 + 8)) < 1e-3, "size %g %g", b.size[0],
            b.size[1]);
  cr_assert_eq(dock_box_from_ligand("/nonexistent/ligand.mol2", 4, 60, &b, &e), -1);
  cr_assert(strstr(se3_error_str(&e).s, "/nonexistent/ligand.mol2"), "%s", se3_error_str(&e).s);
  cr_assert_eq(e.kind, SE3_ERR_INPUT, "the kind crosses the child's pipe");
}

Test(dock_pose, the_ligand_pdbqt_maps_each_serial_to_its_atom) {
  struct mol m;
  methanol(&m);
  /* the polar hydrogen before the carbon's: a writer that renumbers after
   * dropping the carbon's hydrogen would shift it */
  struct mol_atom h = m.atoms[2];
  m.atoms[2] = m.atoms[3];
  m.atoms[3] = h;
  m.bonds[1] = (struct mol_bond){0, 3, 1};
  m.bonds[2] = (struct mol_bond){1, 2, 1};
  struct se3_error e;
  int *map = NULL, n_map = 0;
  char *text = ob_write_pdbqt(&m, &map, &n_map, &e);
  cr_assert(text, "%s", se3_error_str(&e).s);
  cr_assert_eq(n_map, 3, "C, O and the hydroxyl's H: %d", n_map);
  int n = 0, h_seen = 0;
  for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
    if (!strncmp(line, "ATOM", 4) || !strncmp(line, "HETATM", 6)) {
      int serial = atoi(line + 6);
      cr_assert(serial >= 1 && serial <= n_map, "serial %d", serial);
      int atom = map[serial - 1];
      cr_assert(atom >= 0 && atom < m.n_atoms, "serial %d maps to %d", serial, atom);
      char el = line[13];
      cr_assert_eq(el, m.atoms[atom].z == 6 ? 'C' : m.atoms[atom].z == 8 ? 'O' : 'H', "%s", line);
      h_seen += m.atoms[atom].z == 1;
      cr_assert_eq(atom == 3, 0, "the carbon's hydrogen is written: %s", line);
      n++;
    }
  cr_assert_eq(n, 3, "%s", text);
  cr_assert_eq(h_seen, 1, "%s", text);
  /* Gasteiger charges (columns 71-76): the hydroxyl's oxygen negative */
  const char *o = strstr(text, " O   UNL");
  cr_assert(o && strlen(o) > 70, "%s", text);
  const char *line = o - 12;
  cr_assert_lt(atof(line + 70), -0.1, "no partial charge on the oxygen: %s", text);
  free(map);
  free(text);
  mol_free(&m);
}

/* Each model by its number, with Vina's terms; a model Vina did not write
 * is "fewer poses", not an error; a later model's atoms are its own. */
Test(dock_pose, every_model_with_its_terms) {
  static const char two[] = "MODEL 1\n"
                            "REMARK VINA RESULT:    -7.512      0.000      0.000\n"
                            "REMARK INTER + INTRA:         -9.000\n"
                            "REMARK INTER:                 -8.250\n"
                            "REMARK INTRA:                 -0.750\n"
                            "ATOM      1  C   UNL     1      10.000  -1.000   0.500  0.00  0.00    +0.196 C \n"
                            "ENDMDL\n"
                            "MODEL 2\n"
                            "REMARK VINA RESULT:    -6.000      1.250      2.500\n"
                            "REMARK INTER:                 -7.000\n"
                            "ATOM      1  C   UNL     1      99.000  98.000  97.000  0.00  0.00    +0.196 C \n"
                            "ENDMDL\n";
  double xyz[12] = {0};
  uint8_t seen[4];
  struct dock_pose p;
  char err[256] = "";
  cr_assert_eq(dock_parse_model(two, strlen(two), 1, 4, xyz, seen, &p, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(p.score, -7.512, 1e-12);
  cr_assert_float_eq(p.inter, -8.25, 1e-12, "REMARK INTER, not INTER + INTRA");
  cr_assert_float_eq(p.intra, -0.75, 1e-12);
  cr_assert(p.rmsd_lb == 0 && p.rmsd_ub == 0);
  cr_assert_float_eq(xyz[0], 10.0, 1e-12);
  cr_assert_eq(dock_parse_model(two, strlen(two), 2, 4, xyz, seen, &p, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(p.score, -6.0, 1e-12);
  cr_assert_float_eq(p.rmsd_lb, 1.25, 1e-12);
  cr_assert_float_eq(p.rmsd_ub, 2.5, 1e-12);
  cr_assert_float_eq(p.inter, -7.0, 1e-12);
  cr_assert(isnan(p.intra), "a term Vina did not give is NAN");
  cr_assert_float_eq(xyz[0], 99.0, 1e-12, "model 2's own coordinates");
  cr_assert(seen[0] && !seen[1]);
  cr_assert_eq(dock_parse_model(two, strlen(two), 3, 4, xyz, seen, &p, err, sizeof err), 1, "no third model");
  /* a later model without its affinity is damaged output */
  static const char bad[] = "MODEL 1\nREMARK VINA RESULT: -5.0 0 0\n"
                            "ATOM      1  C   UNL     1      10.000  -1.000   0.500  0.00  0.00\nENDMDL\n"
                            "MODEL 2\nATOM      1  C   UNL     1      10.000  -1.000   0.500  0.00  0.00\nENDMDL\n";
  cr_assert_eq(dock_parse_model(bad, strlen(bad), 2, 4, xyz, seen, &p, err, sizeof err), -1);
  cr_assert(strstr(err, "VINA RESULT"), "%s", err);
}

/* Before (hardening IV): a `vina` printing "REMARK VINA RESULT: -1e308" had
 * that score stored and ranked first; an ATOM at 1e300 (it fits PDB's 8
 * columns) was stored as float inf and exported as `inf`; an RMSD of
 * +-1e308 was stored. Each is now an error naming the line. */
Test(dock_pose, numbers_out_of_physical_range_are_refused) {
  double xyz[12];
  uint8_t seen[4];
  struct dock_pose p;
  char err[256] = "";
  static const char *const bad[] = {
      "REMARK VINA RESULT: -1e308 0 0\nATOM      1  C   UNL     1      10.000  -1.000   0.500  0.00  0.00\n",
      "REMARK VINA RESULT: -7.5 -1e308 1\nATOM      1  C   UNL     1      10.000  -1.000   0.500  0.00  0.00\n",
      "REMARK VINA RESULT: -7.5 0 1e308\nATOM      1  C   UNL     1      10.000  -1.000   0.500  0.00  0.00\n",
      "REMARK VINA RESULT: -7.5 0 0\nREMARK INTER:  -1e300\n"
      "ATOM      1  C   UNL     1      10.000  -1.000   0.500  0.00  0.00\n",
      "REMARK VINA RESULT: -7.5 0 0\nATOM      1  C   UNL     1       1e300  -1.000   0.500  0.00  0.00\n",
      "REMARK VINA RESULT: -7.5 0 0\nATOM      1  C   UNL     1      10.000  -1.000 -1e+200  0.00  0.00\n",
  };
  static const long line[] = {1, 1, 1, 2, 2, 2};
  for (int i = 0; i < 6; i++) {
    cr_assert_eq(dock_parse_model(bad[i], strlen(bad[i]), 1, 4, xyz, seen, &p, err, sizeof err), -1,
                 "case %d accepted: %s", i, bad[i]);
    char want[64];
    snprintf(want, sizeof want, "line %ld of Vina's output", line[i]);
    cr_assert(strstr(err, want) && strstr(err, "out of range"), "case %d: %s", i, err);
  }
  /* the edges of the ranges pass: a clash's thousands, an atom far out in the box */
  static const char edge[] = "REMARK VINA RESULT: 5000.0 0 3000\nREMARK INTRA: -1.5\n"
                             "ATOM      1  C   UNL     1    9999.999-999.999   0.500  0.00  0.00\n";
  cr_assert_eq(dock_parse_model(edge, strlen(edge), 1, 4, xyz, seen, &p, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(p.score, 5000.0, 1e-9);
  cr_assert_float_eq(p.intra, -1.5, 1e-12);
  cr_assert_float_eq(xyz[1], -999.999, 1e-9);
}

/* A docking's expected work (issue 70: an ETA before the first docking
 * ends): dock_rotors counts the torsions Open Babel's PDBQT writes (its
 * BRANCH lines: what Vina turns) on molecules with rings, amides,
 * hydroxyls, amines, esters and terminal methyls; dock_cost grows with
 * each of exhaustiveness, heavy atoms and rotatable bonds. */
Test(dock_pose, rotatable_bonds_as_the_pdbqt_has_them) {
  cr_assert_eq(ob_init(), 0);
  static const char *const smiles[] = {
      "c1ccccc1",                           /* none */
      "CCCC",                               /* one: the methyls' bonds turn nothing */
      "CCO",                                /* the hydroxyl's */
      "CC(=O)NC",                           /* the amide's C-N is rigid */
      "CCCCCCCCCCOC(=O)CCCCCCC(=O)OCC",     /* a chain of esters */
      "COC(=O)[C@H](C)NC(=O)Cn1cnnn1",      /* Enamine's, with a tetrazole */
      "CC1(C(=O)NCc2coc(-c3cccs3)n2)CCCC1", /* rings joined by single bonds */
      "NCc1ccc(O)cc1",                      /* an amine and a phenol */
      "Cc1c(C(=O)NC2CCC(C)CC2)nnn1-c1cccc2c1CCN(Cc1cccnc1)C2",
  };
  for (size_t i = 0; i < sizeof smiles / sizeof *smiles; i++) {
    struct ob_parse_opts o = {.format = "smi",
                              .add_hydrogens = 1,
                              .gen3d = OB_GEN3D_ALWAYS,
                              .quality = OB_Q_FAST,
                              .seed = 1,
                              .max_atoms = 999,
                              .fragments = OB_FRAG_KEEP};
    struct mol m;
    struct mol_why why;
    cr_assert_eq(ob_parse_why(smiles[i], strlen(smiles[i]), &o, &m, &why), 0, "%s", smiles[i]);
    struct se3_error e;
    int *map = NULL, n_map = 0;
    char *text = ob_write_pdbqt(&m, &map, &n_map, &e);
    cr_assert(text, "%s: %s", smiles[i], se3_error_str(&e).s);
    int branches = 0;
    for (const char *s = text; (s = strstr(s, "\nBRANCH")); s++)
      branches++;
    cr_assert_eq(dock_rotors(&m), branches, "%s: %d rotatable bonds counted, the PDBQT turns %d:\n%s", smiles[i],
                 dock_rotors(&m), branches, text);
    free(map);
    free(text);
    mol_free(&m);
  }
  cr_assert_gt(dock_cost(8, 25, 5), dock_cost(4, 25, 5));
  cr_assert_gt(dock_cost(8, 30, 5), dock_cost(8, 25, 5));
  cr_assert_gt(dock_cost(8, 25, 6), dock_cost(8, 25, 5));
  /* the prior as measured: a 25-atom ligand with 5 rotatable bonds at
   * exhaustiveness 2 took 6-8 s of one core (bench/dock_eta.sh) */
  cr_assert(dock_cost(2, 25, 5) > 3 && dock_cost(2, 25, 5) < 12, "%g", dock_cost(2, 25, 5));
}
