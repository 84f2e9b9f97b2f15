#!/usr/bin/env bash
# bench/gen3d.sh at a small size (20 PDB ligands, 50 Enamine SMILES): the
# JSON it prints is complete and consistent, its measures check out on the
# references themselves, and the quality of 3D generation is not broken (each
# se3screen setting produces molecules close enough to the PDB poses, with
# their input's canonical SMILES). No timing is asserted: the rates are only
# checked to be positive and consistent with their seconds.
# Without RDKit for /usr/bin/python3 (Debian's python3-rdkit, which
# scripts/setup.sh installs) it reports skipped, exit 77; it never installs.
#
#   test_gen3d_bench.sh SE3SCREEN SOURCE_DIR SHARED_DIR WORK
set -uo pipefail
se3=$1 src=$2 shared=$3 work=$4
py=/usr/bin/python3
if ! [ -x "$py" ] || ! "$py" -c 'import rdkit.Chem' 2>/dev/null; then
  echo "test_gen3d_bench: SKIPPED: no RDKit for $py (scripts/setup.sh installs Debian's python3-rdkit)"
  exit 77
fi
for f in data/ligands3d/openbabel_pdb_ligands_sdf.tar.xz data/docking/Enamine10k.csv.gz; do
  if ! [ -f "$shared/$f" ]; then
    echo "test_gen3d_bench: SKIPPED: $shared/$f is absent (the shared data beside the checkout)"
    exit 77
  fi
done
rm -rf "$work" && mkdir -p "$work"
SE3_SHARED=$shared SE3_GEN3D_NO_INSTALL=1 bash "$src/bench/gen3d.sh" "$se3" --ligands 20 --enamine 50 \
  --out "$work/out" > "$work/gen3d.jsonl" 2> "$work/gen3d.err"
rc=$?
if [ $rc -ne 0 ]; then
  cat "$work/gen3d.err"
  echo "test_gen3d_bench: FAIL: bench/gen3d.sh exited $rc"
  exit 1
fi
"$py" - "$work/gen3d.jsonl" "$work/out/gen3d.json" <<'PY'
import json, math, sys

lines = open(sys.argv[1]).read().splitlines()
assert lines == open(sys.argv[2]).read().splitlines(), "stdout and OUT/gen3d.json differ"
objs = [json.loads(l) for l in lines]
gens = [o["generator"] for o in objs]
assert gens == ["se3screen_fast", "se3screen_medium", "rdkit_etkdgv3"], gens
bad = []


def check(ok, what):
    if not ok:
        bad.append(what)


sel = objs[0]["ligand_selection"]
check(sel["selected"] == 20, "20 ligands selected: %s" % sel)
st = sel["selftest"]
# the measures on the references: renumbered and moved is 0 Å and the same
# SMILES; every chiral ligand's mirror image is another canonical SMILES
check(st["renumbered_moved_rmsd_max"] < 1e-3, "self RMSD %s" % st)
check(st["canonical_kept"] == st["n"] == 20, "references keep their SMILES %s" % st)
check(st["chiral"] > 0 and st["mirror_changed"] == st["chiral"], "mirror images change %s" % st)
for o in objs:
    g, L, E, M = o["generator"], o["ligands"], o["enamine"], o["machine"]
    check(o["bench"] == "gen3d", g + " bench")
    check(M["nproc"] >= 1 and M["cpu"] and M["command"].startswith("bench/gen3d.sh"), g + " machine %s" % M)
    # every record accounted for, once
    for part, d, n in (("ligands", L, 20), ("enamine", E, 50)):
        check(d["n"] == n, "%s %s n %s" % (g, part, d["n"]))
        check(d["produced"] + d["rejected"] == n and d["missing"] == 0,
              "%s %s produced %s + rejected %s + missing %s != %d"
              % (g, part, d["produced"], d["rejected"], d["missing"], n))
        check(sum(d["rejects_by_reason"].values()) == d["rejected"], "%s %s rejects by reason" % (g, part))
        check(d["seconds"] > 0 and d["mol_per_s"] > 0 and abs(d["mol_per_s"] * d["seconds"] / n - 1) < 0.01,
              "%s %s mol/s %s vs %s s" % (g, part, d["mol_per_s"], d["seconds"]))
    check(E["etkdg_embedded"] <= 50 and 0 <= E["rejected_of_etkdg_embedded"] <= E["etkdg_embedded"],
          g + " enamine vs etkdg")
    # issue 67's shape counts: RDKit's bounds and se3screen's, over what was produced
    for part, d in (("ligands", L), ("enamine", E)):
        check(0 <= d["bounds_rdkit_out"] <= d["bounds_rdkit"]["judged"] <= d["produced"]
              and 0 <= d["bounds_se3_out"] <= d["bounds_se3"]["records"] == d["produced"],
              "%s %s bounds %s %s" % (g, part, d["bounds_rdkit"], d["bounds_se3"]))
    # quality: floors from measurement with room to spare (fast after the
    # torsion pass, issue 54: 20 of 20 kept). Every generator
    # here is deterministic for its seed; measured on two states of
    # chem/gen3d.cc (issue 32's work): fast 19-20 of 20 produced, 15-18
    # kept, median 1.67-1.72 Å, 65-68 % within 2 Å; medium 20, 16-18,
    # 1.60-1.71 Å, 70 %; ETKDG 20, 20, 1.45 Å, 60 %. The ligands se3screen
    # does not keep have a phosphate built with 90 and 180 degree angles.
    floor_kept = 19 if g == "rdkit_etkdgv3" else 14
    check(L["produced"] >= 16, "%s produced only %d of 20 ligands" % (g, L["produced"]))
    check(E["produced"] >= 40, "%s produced only %d of 50 Enamine SMILES" % (g, E["produced"]))
    check(L["rmsd_n"] == L["produced"] and not L["rmsd_unmapped"], "%s RMSD for every produced ligand" % g)
    med = L["median_rmsd"]
    check(med is not None and math.isfinite(med) and 0 < med < 2.5, "%s median RMSD %s Å" % (g, med))
    check(0 <= L["within_1A"] <= L["within_2A"] <= 1 and L["within_2A"] >= 0.35,
          "%s shares %s %s" % (g, L["within_1A"], L["within_2A"]))
    check(L["canonical_kept"] >= floor_kept, "%s canonical SMILES kept %d of 20 (floor %d): %s"
          % (g, L["canonical_kept"], floor_kept, L["canonical_changed"]))
    check(L["canonical_kept"] + len(L["canonical_changed"]) == L["produced"], g + " kept + changed = produced")
    check(abs(L["canonical_kept_share"] - L["canonical_kept"] / 20) < 1e-3, g + " kept share")
    check(L["common_n"] <= min(L["produced"], 20) and L["median_rmsd_common"] is not None, g + " common subset")
    # Enamine: 15 of the 50 define all their stereo (measured: all 15 kept by
    # medium and ETKDG, 13 to 15 by fast); no generator changed a
    # constitution, a charge or made a non-tetrahedral centre
    check(E["stereo_defined_n"] == 15 and E["canonical_kept"] <= E["stereo_defined_n"], g + " Enamine stereo defined")
    check(E["canonical_kept"] >= (14 if g == "rdkit_etkdgv3" else 10), "%s Enamine canonical SMILES kept %d of 15: %s"
          % (g, E["canonical_kept"], E["canonical_changed"]))
    check(E["same_constitution_no_bad_centre"] >= E["produced"] - 2, "%s Enamine constitution or geometry changed: %s"
          % (g, E["canonical_changed"]))
    if g == "rdkit_etkdgv3":
        check("vs_etkdg" not in o, "ETKDG compared with itself")
    else:
        v = o["vs_etkdg"]
        et = objs[-1]
        check(abs(v["median_rmsd_minus_etkdg"] - (med - et["ligands"]["median_rmsd"])) < 2e-3, g + " RMSD difference")
        check(v["etkdg_embedded"] == et["ligands"]["produced"] + et["enamine"]["produced"], g + " ETKDG embedded")
        check(len(v["targets"]) == 9 and all(isinstance(x, bool) for x in v["targets"].values()), g + " targets")
        # issue 54's figures: per molecule on one core, ligands' speed-up,
        # and the count of changed molecules, consistent with the rest
        w = M["workers"]
        for part, d, n in (("ligands", L, 20), ("enamine", E, 50)):
            check(abs(d["ms_per_mol_one_core"] - 1e3 * d["seconds"] * w / n) < 0.02, "%s %s ms/mol" % (g, part))
        check(abs(v["speedup_ligands"] - L["mol_per_s"] / et["ligands"]["mol_per_s"]) < 0.02, g + " speed-up")
        changed = len(L["canonical_changed"]) + len(E["canonical_changed"])
        check(v["stereo_or_graph_changed"] == changed, g + " changed count")
        if g == "se3screen_fast":
            # the default: no specified stereocentre or double bond ever changed
            check(changed == 0, "fast changed %d molecules: %s %s" % (changed, L["canonical_changed"],
                                                                       E["canonical_changed"]))
if bad:
    print("test_gen3d_bench: FAIL:\n  " + "\n  ".join(bad))
    sys.exit(1)
for o in objs:
    L = o["ligands"]
    print("%-17s median %.3f Å, within 2 Å %.2f, kept %d/20, produced %d/20 and %d/50"
          % (o["generator"], L["median_rmsd"], L["within_2A"], L["canonical_kept"], L["produced"],
             o["enamine"]["produced"]))
print("ok")
PY
