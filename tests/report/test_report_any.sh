#!/usr/bin/env bash
# report in any workflow, and what its plots say on their axes (issue 55):
# 1. a training-only workflow that ends with report passes `check`, runs no
#    score or rank stage, and writes a page that says what it lacks;
# 2. a dock-only workflow (the table oracle) with report: the docking
#    histogram's counts on whole-number ticks, its x axis in kcal/mol.
# Each page is checked against its database (check_report.py).
#
#   test_report_any.sh SE3SCREEN SOURCE_DIR WORK
set -uo pipefail
se3=$1 src=$2 work=$3
py=/usr/bin/python3
check="$src/tests/report/check_report.py"
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
  ingest: {add_hydrogens: true}
  graph: {edges: bonds}
  train:
    target: active
    task: classification
    model: small
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
echo "ok: a training-only workflow with report ($ran)"

# 2. docking only, scores from a table (no Vina): the page has the docking
# section and says there is no model
mkdir -p "$work/dock"
printf 'smiles,id\nOCC,eth\nCCCO,prop\nc1ccccc1O,phenol\nCC(=O)O,acid\nCCN,amine\nCCOC,ether\nc1ccncc1,pyr\n' >"$work/dock/lib.csv"
printf 'smiles,score\nOCC,-3.1\nCCCO,-3.4\nc1ccccc1O,-5.9\nCC(=O)O,-3.2\nCCN,-2.9\nCCOC,-3.0\nc1ccncc1,-4.8\n' \
  >"$work/dock/scores.csv"
cat >"$work/dock/wf.yaml" <<EOF
workflow: dockonly
workdir: run
run: {progress: none}
sets:
  library:
    - path: lib.csv
stages:
  ingest: {}
  dock: {oracle: table, table: scores.csv}
  report: {top: 5}
EOF
"$se3" check "$work/dock/wf.yaml" >"$work/dock/check.out" 2>&1 || { cat "$work/dock/check.out"; fail "check refused a dock-only workflow with report"; }
"$se3" run "$work/dock/wf.yaml" >"$work/dock/run.log" 2>&1 || { tail -20 "$work/dock/run.log"; fail "a dock-only run with report"; }
page="$work/dock/run/report.html"
$py "$check" "$page" "$work/dock/run/screen.db" --top 5 >"$work/dock/report.check" ||
  { cat "$work/dock/report.check"; fail "the dock-only page"; }
grep -q "<h2>Docking</h2>" "$page" || fail "the dock-only page has no docking section"
grep -q "No model was trained in this workdir" "$page" || fail "the dock-only page does not say it has no model"
echo "ok: a dock-only workflow with report"
