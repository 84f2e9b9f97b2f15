#!/usr/bin/env bash
# report in any workflow, and what its plots say on their axes (issue 55):
# 1. a training-only workflow that ends with report passes `check`, runs no
#    score or rank stage, and writes a page that says what it lacks;
# 2. a dock-only workflow (the table oracle) with report: the docking
#    histogram's counts on whole-number ticks, its x axis in kcal/mol; a
#    record Open Babel cannot kekulize rejected under its name;
# 3. skewed scores spread over their middle 98 %, and every hit's 2D
#    structure drawn with bonds at least 24.5 px long.
# Each page is checked against its database (check_report.py).
#
#   test_report_any.sh SE3SCREEN SOURCE_DIR WORK
set -uo pipefail
se3=$1 src=$2 work=$3
py=/usr/bin/python3
check="$src/tests/report/check_report.py" axes="$src/tests/report/check_axes.py"
fail() {
  echo "test_report_any: FAIL: $*"
  exit 1
}
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
data="$src/workflows/data"

# 1. training only: the FABP4 classifier of workflows/classify.yaml, no library
cat >"$work/train.yaml" <<EOF
workflow: trainonly
workdir: train
run: {progress: none}
sets:
  train:
    - {path: $data/fabp4_actives_train.mol2.gz, labels: {active: 1}}
    - {path: $data/fabp4_decoys_train.mol2.gz, labels: {active: 0}}
stages:
  ingest: {add_hydrogens: true, coordinates: input}   # (the page is the point, not the shapes)
  graph: {edges: bonds}
  train:
    target: active
    task: classification
    model: small
    ensemble: 1
    arch: {layers: 1, channels: 8, degrees: 2}
    epochs: 2
    batch_size: 16
    split: {valid: 0.15, test: 0.2, seed: 1}
  report: {top: 10}
EOF
"$se3" check "$work/train.yaml" >"$work/train.check" 2>&1 || { cat "$work/train.check"; fail "check refused a training-only workflow with report"; }
"$se3" run "$work/train.yaml" >"$work/train.log" 2>&1 || { tail -20 "$work/train.log"; fail "a training-only run with report"; }
page="$work/train/report.html"
[ -s "$page" ] || fail "the training-only run wrote no report.html"
ran=$("$se3" query "$work/train" "SELECT group_concat(DISTINCT stage) FROM stage_chunks" --csv | tail -1 | tr -d "\"")
case ",$ran," in *,score,* | *,rank,*) fail "naming report made score or rank run: $ran" ;; esac
case ",$ran," in *,train,*) ;; *) fail "the training-only run did not train: $ran" ;; esac
$py "$check" "$page" "$work/train/screen.db" --top 10 >"$work/train.report.check" ||
  { cat "$work/train.report.check"; fail "the training-only page"; }
grep -q "ROC: active" "$page" || fail "the training-only page has no ROC curve"
grep -q "No molecules were scored in this workdir" "$page" || fail "the training-only page does not say it has no scores"
grep -q "No ranked hits" "$page" || fail "the training-only page does not say it has no hits"
# the page the report stage wrote is its own run's last step: that run is not
# "still running or killed" (issue 70: a finished run's page said so); a run
# another process left unfinished is counted
grep -q "still running" "$page" && fail "the report stage's page counts its own run as still running"
cp "$work/train/screen.db" "$work/unfinished.db" || fail "cannot copy the database"
sqlite3 "$work/unfinished.db" "INSERT INTO runs(started, host, pid, command, workflow, status, version)
  VALUES('2026-11-29T00:00:00Z', 'elsewhere', 1, 'se3screen run', 'x.yaml', 'running', 'x')" || fail "cannot add a run"
"$se3" report "$work/unfinished.db" -o "$work/unfinished.html" 2>"$work/unfinished.err" ||
  { cat "$work/unfinished.err"; fail "report of the database with an unfinished run"; }
grep -q "1 other run still running, or killed" "$work/unfinished.html" || fail "an unfinished run is not counted"
# the enrichment curve on a log x axis from 0.1 %, every axis titled
$py "$axes" "$page" --log-x "Enrichment: active" --x-label "Enrichment: active" "%" >"$work/train.axes" ||
  { cat "$work/train.axes"; fail "the training-only page's axes"; }
echo "ok: a training-only workflow with report ($ran)"

# 2. docking only, scores from a table (no Vina): the page has the docking
# section and says there is no model
mkdir -p "$work/dock"
printf 'smiles,id\nOCC,eth\nCCCO,prop\nc1ccccc1O,phenol\nCC(=O)O,acid\nCCN,amine\nCCOC,ether\nc1ccncc1,pyr\n' >"$work/dock/lib.csv"
printf 'smiles,score\nOCC,-3.1\nCCCO,-3.4\nc1ccccc1O,-5.9\nCC(=O)O,-3.2\nCCN,-2.9\nCCOC,-4.0\nc1ccncc1,-4.8\n' \
  >"$work/dock/scores.csv"
# a ring Open Babel cannot kekulize: rejected at ingest, under its name
printf 'c1cccc1 ring5\nCCOCC ether2\n' >"$work/dock/bad.smi"
cat >"$work/dock/wf.yaml" <<EOF
workflow: dockonly
workdir: run
run: {progress: none}
sets:
  library:
    - path: lib.csv
    - path: bad.smi
stages:
  ingest: {}
  dock: {oracle: table, table: scores.csv}
  report: {top: 5, bins: 5}
EOF
"$se3" check "$work/dock/wf.yaml" >"$work/dock/check.out" 2>&1 || { cat "$work/dock/check.out"; fail "check refused a dock-only workflow with report"; }
"$se3" run "$work/dock/wf.yaml" >"$work/dock/run.log" 2>&1 || { tail -20 "$work/dock/run.log"; fail "a dock-only run with report"; }
page="$work/dock/run/report.html"
$py "$check" "$page" "$work/dock/run/screen.db" --top 5 --bins 5 >"$work/dock/report.check" ||
  { cat "$work/dock/report.check"; fail "the dock-only page"; }
grep -q "<h2>Docking</h2>" "$page" || fail "the dock-only page has no docking section"
grep -q "No model was trained in this workdir" "$page" || fail "the dock-only page does not say it has no model"
# 4 of the 7 molecules in one bar: counts on whole ticks, scores in kcal/mol
$py "$axes" "$page" --whole-y "Docking scores" --x-label "Docking scores" "kcal/mol" >"$work/dock/axes" ||
  { cat "$work/dock/axes"; fail "the dock-only page's axes"; }
rej=$("$se3" query "$work/dock/run" "SELECT name || ':' || reason FROM rejects WHERE stage = 'ingest'" --csv | tail -1)
[ "$rej" = "ring5:kekulization failed" ] || fail "the aromaticity failure's reject row: '$rej', not ring5's"
grep -q "bad.smi #1 ring5" "$page" || fail "the page's rejects do not name ring5"
echo "ok: a dock-only workflow with report; an aromaticity failure rejected under its name"

# 3. skewed scores: a classifier's probabilities crowd near 0 with a hit
# near 1. Made from a real train-and-score run's database: all but one
# library score set within [0, 0.0096], one at 0.95. Over [min, max] the
# histogram would be two bars; the page spans the middle 98 % (the bars
# check_report.py recomputes) and says where the rest went.
sed -e 's/^workflow: trainonly/workflow: scored/' -e 's/^workdir: train/workdir: scored/' \
  -e 's/^  report: {top: 10}/  score: {set: library}\n  rank: {top: 10}\n  report: {top: 10}/' \
  -e "0,/^  train:\$/s|^  train:\$|  library:\n    - {path: $data/fabp4_actives_library.mol2.gz, labels: {active: 1}}\n    - {path: $data/fabp4_decoys_library.mol2.gz, labels: {active: 0}}\n  train:|" \
  "$work/train.yaml" >"$work/scored.yaml"
"$se3" run "$work/scored.yaml" >"$work/scored.log" 2>&1 || { tail -20 "$work/scored.log"; fail "a train-and-score run"; }
cp "$work/scored/screen.db" "$work/skewed.db" || fail "cannot copy the scored database"
sqlite3 "$work/skewed.db" "UPDATE scores SET score = (rowid % 97) / 10000.0 WHERE mol_id IN (SELECT id FROM molecules
  WHERE set_name = 'library'); UPDATE scores SET score = 0.95 WHERE rowid = (SELECT max(s.rowid) FROM scores s
  JOIN molecules m ON m.id = s.mol_id WHERE m.set_name = 'library')" || fail "cannot skew the scores"
n_lib=$(sqlite3 "$work/skewed.db" "SELECT count(*) FROM scores s JOIN molecules m ON m.id = s.mol_id
  WHERE m.set_name = 'library'")
[ "$n_lib" -ge 100 ] || fail "only $n_lib library scores: too few to trim 1 % from each end"
"$se3" report "$work/skewed.db" -o "$work/skewed.html" 2>"$work/skewed.err" ||
  { cat "$work/skewed.err"; fail "report of skewed scores"; }
$py "$check" "$work/skewed.html" "$work/skewed.db" --top 50 >"$work/skewed.check" ||
  { cat "$work/skewed.check"; fail "the page of skewed scores"; }
lib="Scores of set 'library'"
$py "$axes" "$work/skewed.html" --bars-at-least "$lib" 20 --whole-y "$lib" --x-label "$lib" "predicted probability of active" \
  >"$work/skewed.axes" || { cat "$work/skewed.axes"; fail "the histogram of skewed scores"; }
grep -q "The scores are skewed: the bars span the middle 98 %" "$work/skewed.html" ||
  fail "the skewed histogram's caption does not say where the extremes went"
$py "$check" "$work/scored/report.html" "$work/scored/screen.db" --top 10 >"$work/scored.check" ||
  { cat "$work/scored.check"; fail "the page of the train-and-score run"; }
# every hit drawn with bonds a reader can see, however large the molecule
$py "$axes" "$work/scored/report.html" --bond-px 24.5 >"$work/scored.axes" ||
  { cat "$work/scored.axes"; fail "the hits' 2D structures"; }
echo "ok: a histogram of skewed scores spread over their middle 98 %, the hits drawn readably"
