#!/usr/bin/env bash
# A chemist's screen end to end (issue 70's "done when"): a classifier
# trained from MOL2 (FABP4 actives and decoys: workflows/classify.yaml),
# a vendor-like SMILES library predicted with it (300 NCI molecules and
# the 17 held-back actives as SMILES, stereo written or not as the files
# have it), its top hits docked by the real Vina into FABP4 with three
# poses each, the poses exported; and a workflow with mistakes of every
# kind put to `check`. Prints one JSON object with what each step showed:
#   train_s, predict_s, dock_s      wall times
#   nearest_filled                  predict's hits with a nearest training molecule
#   similarity_median, far_warning  the log's median similarity, its warning
#   heartbeats, eta_before_first    dock's lines while Vina ran (one every 5 s
#                                   that nothing else was said); an ETA before
#                                   the first docking ended
#   idle_s                          seconds a worker sat idle with molecules left
#   predict_isomer_named            predict's hits scored as a named isomer
#   isomer_named, stereo_line       hits docked as a named isomer; the log's count
#   poses, poses_with_receptor      exported poses, those tagged with the receptor
#   check_problems, check_exit      problems one `check` reported; its exit code
#
#   bash bench/chemist_screen.sh [SE3SCREEN] [TOP]       (TOP hits docked, default 6)
#
# About 4 min on 2 cores (docking at exhaustiveness 2).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
se3=$(realpath "${1:-$here/build/se3screen}")
top=${2:-6}
tmp=${TMPDIR:-/tmp}/se3bench_chemist
rm -rf "$tmp" && mkdir -p "$tmp/tmp"
export TMPDIR=$tmp/tmp
data=$here/workflows/data
now() { date +%s.%N; }

# 1. the classifier, from MOL2
t0=$(now)
"$se3" run "$here/workflows/classify.yaml" --workdir "$tmp/train" --until train >"$tmp/train.log" 2>&1
t1=$(now)
# 2. a SMILES library: NCI's and the held-back actives (as SMILES, their
# stereo as Open Babel writes it from the MOL2's 3D shape, or not at all
# where the file has none)
head -300 "$data/nci_1000.smi" >"$tmp/library.smi"
obabel "$data/fabp4_actives_library.mol2.gz" -osmi 2>/dev/null | awk '{print $1 "\tactive_" NR}' >>"$tmp/library.smi"
"$se3" predict "$tmp/train" "$tmp/library.smi" --top 50 --workdir "$tmp/predict" >"$tmp/predict.log" 2>&1
t2=$(now)
# 3. its top hits docked, three poses each (as the isomer scored)
/usr/bin/python3 - "$tmp" "$top" <<'EOF'
import csv, sys
tmp, top = sys.argv[1], int(sys.argv[2])
rows = list(csv.DictReader(open(tmp + "/predict/hits.csv")))[:top]
with open(tmp + "/top.smi", "w") as f:
    for r in rows:
        # the isomer the model scored, where the library left stereo free
        f.write(f"{r.get('isomer_smiles') or r['smiles']} {r['name']}\n")
EOF
cat >"$tmp/dock.yaml" <<EOF
workflow: dock_top
workdir: $tmp/dock
run: {progress: lines, progress_interval_s: 5}
sets:
  library:
    - path: $tmp/top.smi
stages:
  dock:
    receptor: $here/tests/data/dock/receptor.pdb
    box_ligand: $here/tests/data/dock/crystal_ligand.mol2
    exhaustiveness: 2
    modes: 3
    workers: 2
    chunk_size: 2
  rank: {top: $top}
EOF
"$se3" run "$tmp/dock.yaml" >"$tmp/dock.log" 2>&1
t3=$(now)
# 4. the poses out
"$se3" export "$tmp/dock" --format sdf --poses -o "$tmp/poses.sdf" >"$tmp/export.log" 2>&1
# 5. a workflow with a schema mistake, a missing label column and a missing set
cat >"$tmp/broken.yaml" <<EOF
workflow: broken
workdir: $tmp/broken
sets:
  train:
    - {path: $data/esol.csv, labels: [logSolubility]}
stages:
  ingest: {colour: blue}
  train: {target: logSolubility, epochs: many}
  score: {set: libary}
EOF
set +e
"$se3" check "$tmp/broken.yaml" >"$tmp/check.out" 2>&1
check_rc=$?
set -e
/usr/bin/python3 - "$tmp" "$t0" "$t1" "$t2" "$t3" "$check_rc" <<'EOF'
import csv, json, re, sys
tmp = sys.argv[1]
t0, t1, t2, t3 = (float(x) for x in sys.argv[2:6])
hits = list(csv.DictReader(open(tmp + "/predict/hits.csv")))
plog, dlog = open(tmp + "/predict.log").read(), open(tmp + "/dock.log").read()
m = re.search(r"median similarity of \d+ hits(?: to their nearest training molecule)? is ([0-9.]+)", plog)
dhits = list(csv.DictReader(open(tmp + "/dock/hits.csv")))
iso = [h for h in dhits if h.get("isomer_smiles")]
stereo = re.search(r"^.*unspecified stereo.*$", open(tmp + "/predict.log").read() + dlog, re.M)
beats = [l for l in dlog.splitlines() if "; running " in l]
poses = open(tmp + "/poses.sdf").read().split("$$$$\n")[:-1]
check = open(tmp + "/check.out").read()
cm = re.search(r"(\d+) problems in", check)
print(json.dumps({
    "bench": "chemist_screen", "train_s": round(t1 - t0, 1), "predict_s": round(t2 - t1, 1),
    "dock_s": round(t3 - t2, 1), "predict_hits": len(hits),
    "nearest_filled": sum(1 for h in hits if h.get("nearest_train")),
    "predict_isomer_named": sum(1 for h in hits if h.get("isomer_smiles")),
    "similarity_median": float(m.group(1)) if m else None, "far_warning": "is far from the model" in plog,
    "heartbeats": len(beats),
    "eta_before_first": bool(re.search(r"molecules to dock: about|earlier runs took|before any docking ended", dlog)),
    "docked": len(dhits), "isomer_named": len(iso), "stereo_line": stereo.group(0)[22:] if stereo else None,
    "poses": len(poses), "poses_with_receptor": sum(1 for p in poses if "<receptor>" in p),
    "check_problems": int(cm.group(1)) if cm else None, "check_exit": int(sys.argv[6]),
}))
EOF
