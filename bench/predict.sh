#!/usr/bin/env bash
# A model that travels: train once (the quickstart's model, in its own
# workdir), then `se3screen predict` a SMILES library of N Enamine molecules
# (default 1,000) with it in another workdir, then run the same command again
# (everything kept: nothing to redo). Then `check` on four workflows with one
# mistake each (a missing label column, a missing name column, a target that
# is no label, a wrong SD tag): each must be refused, and how long it took.
# Prints one JSON object per line.
#
#   bash bench/predict.sh [SE3SCREEN] [N]
#
# Input: ../shared/data/docking/Enamine10k.csv.gz (MolPAL's Enamine 10k; its
# SMILES have no 3D coordinates: each gets them generated on the way in, the
# way the model was trained: stages.ingest.gen3d_quality of its card).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
se3=${1:-$here/build/se3screen}
n=${2:-1000}
shared=${SE3_SHARED:-$here/../shared}
tmp=${TMPDIR:-/tmp}/se3bench_predict
rm -rf "$tmp" && mkdir -p "$tmp"

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b-a}'; }
q() { sqlite3 -readonly "$1" "$2"; }

# the model: the quickstart, trained in a workdir of its own
t0=$(now)
"$se3" run "$here/workflows/quickstart.yaml" --workdir "$tmp/model" --set run.progress=none >"$tmp/train.log" 2>&1
t1=$(now)
mae=$(q "$tmp/model/screen.db" "SELECT printf('%.2f', mae) FROM metrics WHERE split = 'test' ORDER BY model = 'ensemble' DESC, rowid DESC LIMIT 1")
printf '{"bench": "train", "workflow": "quickstart", "seconds": %s, "test_mae": %s}\n' "$(secs "$t0" "$t1")" "$mae"

# the library: the first n SMILES, one a line under a header line
{ zcat "$shared/data/docking/Enamine10k.csv.gz" || true; } | head -n $((n + 1)) >"$tmp/enamine.smi" # head stops zcat early

cores=$(nproc)
t0=$(now)
"$se3" predict "$tmp/model" "$tmp/enamine.smi" --workdir "$tmp/screen" -o "$tmp/hits.csv" --top 100 \
  >"$tmp/predict.log" 2>&1
t1=$(now)
db="$tmp/screen/screen.db"
read -r mols rejects scores hits named < <(q "$db" "SELECT (SELECT count(*) FROM molecules),
  (SELECT count(*) FROM rejects), (SELECT count(*) FROM scores), (SELECT count(*) FROM ranks),
  (SELECT count(*) FROM ranked_hits WHERE name <> '')" | tr '|' ' ')
hash=$(q "$db" "SELECT DISTINCT model_hash FROM scores")
printf '{"bench": "predict", "molecules_in": %d, "molecules": %d, "rejects": %d, "scores": %d, "hits": %d, "hits_named": %d, "model_hash": "%s", "seconds": %s, "molecules_per_s": %s, "cores": %d}\n' \
  "$n" "$mols" "$rejects" "$scores" "$hits" "$named" "$hash" "$(secs "$t0" "$t1")" \
  "$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", n/(b-a)}')" "$cores"
t0=$(now)
"$se3" predict "$tmp/model" "$tmp/enamine.smi" --workdir "$tmp/screen" -o "$tmp/hits2.csv" --top 100 \
  >"$tmp/predict2.log" 2>&1
t1=$(now)
same=false
cmp -s "$tmp/hits.csv" "$tmp/hits2.csv" && same=true
printf '{"bench": "predict_again", "seconds": %s, "same_hits": %s}\n' "$(secs "$t0" "$t1")" "$same"

# check: four mistakes, each refused before any work
lib="$tmp/lib.csv"
printf 'smiles,Compound,logS\nCCO,ethanol,-0.1\nCCN,ethylamine,0.2\n' >"$lib"
sdf="$tmp/tagged.sdf" # QM9 molecules, each with a tag <homo>
awk '/^\$\$\$\$/ { print "> <homo>"; print "-0.38"; print "" } { print }' "$here/workflows/data/qm9_mini.sdf" >"$sdf"
mistake() { # name, then the workflow's sets and stages
  local wf="$tmp/$1.yaml"
  printf 'workflow: %s\nworkdir: %s\n%s\n' "$1" "$tmp/w-$1" "$2" >"$wf"
  local a b rc=0
  a=$(now)
  "$se3" check "$wf" >/dev/null 2>"$tmp/$1.err" || rc=$?
  b=$(now)
  printf '{"bench": "check", "mistake": "%s", "exit": %d, "seconds": %s, "message": %s}\n' "$1" "$rc" \
    "$(secs "$a" "$b")" "$(head -n 1 "$tmp/$1.err" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))')"
}
mistake missing_label "sets:
  train: [{path: $lib, labels: [logP]}]
stages: {train: {target: logP}}"
mistake missing_name_column "sets:
  train: [{path: $lib, labels: [logS], name_column: compound_name}]
stages: {train: {target: logS}}"
mistake target_not_a_label "sets:
  train: [{path: $lib, labels: [logS]}]
stages: {train: {target: logs}}"
mistake wrong_sd_tag "sets:
  train: [{path: $sdf, labels: [HOMO]}]
stages: {train: {target: HOMO}}"
