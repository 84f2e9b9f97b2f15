#!/usr/bin/env bash
# report.html of the two bundled workflows, checked against their databases
# (tests/report/check_report.py: self-contained, every plot's points and
# bars as the database gives them, the parity points at their pixels, the
# hits with their 2D structures, the rejects by reason), and the
# `se3screen report` command: its output file, -o -, --no-depict, a
# database of schema version 4 opened read-only, and its refusals. Then a
# score-only run's page (no models: no learning curves, the scores and the
# hits) and a schema-5 database's (scores.value, epochs stored from 0).
# Leaves the two workdirs in WORK for test_report_browser.
#
#   test_report.sh SE3SCREEN SOURCE_DIR WORK
set -uo pipefail
se3=$1 src=$2 work=$3
py=/usr/bin/python3
check="$src/tests/report/check_report.py"
fail() {
  echo "test_report: FAIL: $*"
  exit 1
}
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
# v5 SRC DST: DST a copy of the database SRC as schema version 5 had it:
# the score was scores.value (and ranks.value), no scores.model_hash, and
# metrics.epoch and models.best_epoch counted from 0; no rejects.atom and
# rejects.detail (version 7)
v5() {
  cp "$1" "$2" && sqlite3 "$2" "ALTER TABLE rejects DROP COLUMN atom; ALTER TABLE rejects DROP COLUMN detail;
    ALTER TABLE scores RENAME COLUMN score TO value;
    ALTER TABLE ranks RENAME COLUMN score TO value; ALTER TABLE scores DROP COLUMN model_hash; DROP VIEW ranked_hits;
    ALTER TABLE ranks DROP COLUMN nearest_id; ALTER TABLE ranks DROP COLUMN similarity;
    CREATE VIEW ranked_hits AS SELECT r.rank, m.name, m.smiles, m.inchikey, r.target, r.value AS score, r.std,
      m.set_name, m.source_file, m.record_no, r.mol_id FROM ranks r JOIN molecules m ON m.id = r.mol_id ORDER BY r.rank;
    UPDATE metrics SET epoch = -epoch; UPDATE metrics SET epoch = -epoch - 1;
    UPDATE models SET best_epoch = best_epoch - 1; PRAGMA user_version = 5"
}

# 1. the quickstart as shipped (its report stage), and the classification example
# (with its MOL2 files' coordinates: the page is the point here, and generating
# 477 shapes would cost it ~13 s of CPU, twice), one model each (an ensemble's
# page is checked below; test_quickstart trains the quickstart's three)
for w in quickstart classify; do
  "$se3" run "$src/workflows/$w.yaml" --workdir "$work/$w" --set run.progress=none \
    --set stages.ingest.coordinates=input --set stages.train.ensemble=1 >"$work/$w.log" 2>&1 ||
    { tail -20 "$work/$w.log"; fail "se3screen run workflows/$w.yaml"; }
  [ -s "$work/$w/report.html" ] || fail "workflows/$w.yaml wrote no report.html"
  top=$("$se3" check "$src/workflows/$w.yaml" | awk '/^  report:/{r=1} r && /^    top:/{print $2; exit}')
  [ -n "$top" ] || fail "no stages.report.top in se3screen check's output"
  $py "$check" "$work/$w/report.html" "$work/$w/screen.db" --top "$top" || fail "the report of $w"
done
# an ensemble of two: the spread against the score
"$se3" run "$src/workflows/classify.yaml" --workdir "$work/ensemble" --set run.progress=none \
  --set stages.ingest.coordinates=input --set stages.train.ensemble=2 --set stages.train.epochs=3 >"$work/ensemble.log" 2>&1 ||
  { tail -20 "$work/ensemble.log"; fail "the classification workflow with an ensemble of 2"; }
$py "$check" "$work/ensemble/report.html" "$work/ensemble/screen.db" --top 30 || fail "the report of an ensemble"
grep -q "Ensemble spread" "$work/ensemble/report.html" || fail "the ensemble's report has no spread plot"
grep -q "Parity: u0_atom" "$work/quickstart/report.html" || fail "the quickstart's report has no parity plot"
grep -q "ROC: active" "$work/classify/report.html" || fail "the classification report has no ROC curve"
grep -q "Enrichment: active" "$work/classify/report.html" || fail "the classification report has no enrichment curve"
grep -q "EF5%" "$work/classify/report.html" || fail "the classification report has no EF5%"
# the quickstart rejects 10 QM7 records at ingest: the page names them
grep -q "<h2>Rejects</h2>" "$work/quickstart/report.html" || fail "no rejects section"
n_rej=$("$se3" query "$work/quickstart" "SELECT count(*) FROM rejects" --csv | tail -1)
grep -q "<p>$n_rej records or molecules were rejected" "$work/quickstart/report.html" ||
  fail "the report does not count the $n_rej rejects"
size=$(stat -c %s "$work/quickstart/report.html")
[ "$size" -lt 2000000 ] || fail "the quickstart's report is $size bytes"
echo "ok: report.html of both workflows ($size bytes for the quickstart)"

# 2. se3screen report: the same checks on its output, options and refusals
out="$work/cmd"
mkdir -p "$out"
"$se3" report "$work/classify" -o "$out/c.html" --top 5 --bins 12 2>"$out/err" || { cat "$out/err"; fail "report -o"; }
grep -q "wrote $out/c.html" "$out/err" || fail "report did not say where it wrote"
$py "$check" "$out/c.html" "$work/classify/screen.db" --top 5 --bins 12 >/dev/null || fail "report --top 5 --bins 12"
"$se3" report "$work/classify/screen.db" -o - --no-depict >"$out/stdout.html" 2>"$out/err" || fail "report -o -"
grep -q "<h2>Top hits</h2>" "$out/stdout.html" || fail "report -o - printed no page"
grep -q 'class="depict"' "$out/stdout.html" && fail "--no-depict drew structures"
# the database is only read: its bytes do not change
sum0=$(md5sum <"$work/quickstart/screen.db")
"$se3" report "$work/quickstart" >/dev/null 2>&1 || fail "report WORKDIR"
[ "$(md5sum <"$work/quickstart/screen.db")" = "$sum0" ] || fail "report changed screen.db"
# an older database (schema version 4: no predictions, no models.device),
# opened read-only, gives a page that says what it lacks
v5 "$work/quickstart/screen.db" "$out/v4.db" &&
  sqlite3 "$out/v4.db" "DROP TABLE predictions; ALTER TABLE models DROP COLUMN device; PRAGMA user_version = 4" ||
  fail "cannot make a version 4 database"
"$se3" report "$out/v4.db" -o "$out/v4.html" 2>"$out/err" || { cat "$out/err"; fail "report of a version 4 database"; }
grep -q "predates the <code>predictions</code> table" "$out/v4.html" || fail "the v4 page does not say what it lacks"
[ "$(sqlite3 "$out/v4.db" 'PRAGMA user_version')" = 4 ] || fail "report migrated a database it only reads"
# refusals: usage errors exit 2, a file that is no result database exits 1
refuse() { # expected-exit message-fragment args...
  local want=$1 frag=$2
  shift 2
  "$se3" report "$@" >"$out/r.out" 2>"$out/r.err"
  local rc=$?
  [ "$rc" = "$want" ] || { cat "$out/r.err"; fail "report $* exited $rc, not $want"; }
  grep -q -- "$frag" "$out/r.err" || { cat "$out/r.err"; fail "report $*: no '$frag' in the message"; }
}
refuse 2 "report needs DB" 
refuse 2 "unknown option '--nope'" "$work/classify" --nope
refuse 2 "--top needs a whole number" "$work/classify" --top x
refuse 2 "--bins needs a whole number from 5 to 500" "$work/classify" --bins 2
refuse 2 "No such file" "$work/nowhere"
echo "not a database" >"$out/junk.db"
refuse 1 "junk.db" "$out/junk.db"
refuse 1 "report.html" "$work/classify" -o "$work/no/such/dir/report.html"
[ -e "$work/no/such/dir/report.html" ] && fail "a failed report left a file"
echo "ok: se3screen report (options, read-only, a version 4 database, refusals)"

# 3. a score-only run trains nothing: its database has no models, metrics,
# predictions or splits. Made here from the quickstart's by deleting them
# (then a real one). The page has the
# scores and the hits and says where the model came from; no learning curve,
# no test metrics, no empty plot, no NaN, no link to a missing section.
cp "$work/quickstart/screen.db" "$out/scoreonly.db"
sqlite3 "$out/scoreonly.db" "DELETE FROM models; DELETE FROM metrics; DELETE FROM predictions; DELETE FROM splits" ||
  fail "cannot make a score-only database"
"$se3" report "$out/scoreonly.db" -o "$out/scoreonly.html" 2>"$out/err" ||
  { cat "$out/err"; fail "report of a score-only database"; }
$py "$check" "$out/scoreonly.html" "$out/scoreonly.db" --top 20 >"$out/scoreonly.check" ||
  { cat "$out/scoreonly.check"; fail "the report of a score-only database"; }
grep -q "<h2>Scores</h2>" "$out/scoreonly.html" || fail "the score-only page has no scores section"
grep -q "<h2>Top hits</h2>" "$out/scoreonly.html" || fail "the score-only page has no hits"
grep -q "per epoch" "$out/scoreonly.html" && fail "the score-only page draws a learning curve"
grep -q "Held-out molecules\|test split" "$out/scoreonly.html" && fail "the score-only page has test metrics"
grep -q "No model was trained in this workdir" "$out/scoreonly.html" ||
  fail "the score-only page does not say where its scores came from"
# and a real one: the quickstart's library scored with the quickstart's model
# by a workflow that trains nothing (its report stage writes the page)
cat >"$out/scoreonly.yaml" <<EOF
workflow: scoreonly
workdir: scoreonly
run: {progress: none}
sets:
  library:
    - {path: $src/workflows/data/qm7_c5h10o.csv}
stages:
  ingest: {add_hydrogens: true}
  graph: {}
  score: {set: library, checkpoint: $work/quickstart/models/train-0/best.ckpt}
  rank: {top: 10}
  report: {top: 10}
EOF
"$se3" run "$out/scoreonly.yaml" >"$out/scoreonly.log" 2>&1 || { tail -20 "$out/scoreonly.log"; fail "a score-only run"; }
[ "$("$se3" query "$out/scoreonly" "SELECT count(*) FROM models" --csv | tail -1)" = 0 ] ||
  fail "the score-only run trained a model"
$py "$check" "$out/scoreonly/report.html" "$out/scoreonly/screen.db" --top 10 >"$out/scoreonly-run.check" ||
  { cat "$out/scoreonly-run.check"; fail "the report of a score-only run"; }
grep -q "No model was trained in this workdir" "$out/scoreonly/report.html" ||
  fail "the score-only run's page does not say where its scores came from"
grep -q "per epoch" "$out/scoreonly/report.html" && fail "the score-only run's page draws a learning curve"
echo "ok: the page of a score-only run"

# 4. a database of schema version 5 read as it is (report never migrates):
# the score was scores.value, and metrics.epoch and models.best_epoch
# counted from 0; the page shows the epochs from 1 as the log counted them
v5 "$work/quickstart/screen.db" "$out/v5.db" || fail "cannot make a version 5 database"
"$se3" report "$out/v5.db" -o "$out/v5.html" 2>"$out/err" || { cat "$out/err"; fail "report of a version 5 database"; }
$py "$check" "$out/v5.html" "$out/v5.db" --top 20 >"$out/v5.check" ||
  { cat "$out/v5.check"; fail "the report of a version 5 database"; }
[ "$(sqlite3 "$out/v5.db" 'PRAGMA user_version')" = 5 ] || fail "report migrated a database it only reads"
echo "ok: the page of a schema-5 database (scores.value, epochs from 0)"
