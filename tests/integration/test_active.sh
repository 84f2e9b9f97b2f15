#!/usr/bin/env bash
# Active learning (stages.acquire) with a table for an oracle, on 120
# Enamine SMILES and their Vina scores (tests/data/active/): round 0 at
# random, then three rounds by ucb over a two-model ensemble, each trained
# on every score so far.
#   - a run of the whole campaign: four rounds in `rounds`, every decision
#     in `acquisitions` (once each), a molecule without a score acquired and
#     never labelled, the calibration of the spread recorded, each round's
#     models, scores and ledger kept (round_models with their checkpoints,
#     one of which predicts its round's scores again; round_scores;
#     round_chunks), a rerun that changes nothing;
#   - the same campaign in a fresh workdir, killed with -9 at four points
#     (each once an observable state is reached: round 0 decided, a round's
#     training under way, a later round decided, the last training), then
#     run to its end: the same decisions to the bit, the same labels, the
#     same scores and the same history as the uninterrupted run;
#   - a round decided by `run --stage acquire --round R` refused before the
#     round before it is docked, learned and scored;
#   - `rounds` raised: the campaign goes on from its last round;
#   - thompson: values drawn from the ensemble's members.
# About 60 s on 2 cores.
#
#   test_active.sh SE3SCREEN SOURCE_DIR WORK
set -uo pipefail
se3=$1 src=$2 work=$3
fail() {
  echo "test_active: FAIL: $*"
  exit 1
}
rm -rf "$work" && mkdir -p "$work"
cp "$src/tests/data/active/library.csv" "$src/tests/data/active/scores.csv" "$work/"
mkwf() { # NAME WORKDIR
  cat > "$work/$1.yaml" <<EOF
workflow: $1
workdir: $2
run: {progress: lines, progress_interval_s: 1}
sets:
  library:
    - path: library.csv
stages:
  ingest: {}
  acquire: {initial: 12, batch: 8, rounds: 3, rule: ucb, beta: 1, seed: 5}
  dock: {oracle: table, table: scores.csv}
  graph: {cutoff: 5.0}
  train: {set: library, target: dock, epochs: 3, ensemble: 2, model: small, batch_size: 8, split: {test: 0.3}}
  score: {set: library}
EOF
}
q() { sqlite3 -batch -noheader "$1" "$2" 2>/dev/null; }
mkwf a "$work/a"
mkwf b "$work/b"

# 1. the whole campaign, uninterrupted
"$se3" run "$work/a.yaml" > "$work/a1.log" 2>&1 || { cat "$work/a1.log"; fail "the campaign failed"; }
A=$work/a/screen.db
[ "$(q "$A" "SELECT group_concat(round || ':' || rule || ':' || n_acquired, ' ') FROM rounds")" = \
  "0:random:12 1:ucb:8 2:ucb:8 3:ucb:8" ] || fail "rounds: $(q "$A" "SELECT * FROM rounds")"
[ "$(q "$A" "SELECT count(*), count(DISTINCT mol_id) FROM acquisitions")" = "36|36" ] || fail "36 acquisitions expected"
n_lab=$(q "$A" "SELECT count(*) FROM docking")
n_rej=$(q "$A" "SELECT count(*) FROM rejects WHERE stage = 'dock' AND reason = 'no score in the table'")
[ $((n_lab + n_rej)) = 36 ] || fail "every acquisition is labelled or a reject ($n_lab + $n_rej)"
[ "$(q "$A" "SELECT count(*) FROM docking k WHERE NOT EXISTS (SELECT 1 FROM acquisitions q WHERE q.mol_id = k.mol_id)")" = 0 ] ||
  fail "a molecule was docked without being acquired"
# each round's model learned every label decided before it
[ "$(q "$A" "SELECT group_concat(n_labelled, ' ') FROM rounds")" = \
  "0 $(q "$A" "SELECT count(*) FROM docking k JOIN acquisitions q ON q.mol_id = k.mol_id WHERE q.round < 1") $(q "$A" "SELECT count(*) FROM docking k JOIN acquisitions q ON q.mol_id = k.mol_id WHERE q.round < 2") $(q "$A" "SELECT count(*) FROM docking k JOIN acquisitions q ON q.mol_id = k.mol_id WHERE q.round < 3")" ] ||
  fail "n_labelled: $(q "$A" "SELECT group_concat(n_labelled, ' ') FROM rounds")"
# ucb: the spread calibrated once 5 held-out molecules or more have one (and
# not before), and picks in the order of their value
[ "$(q "$A" "SELECT count(*) FROM rounds WHERE round > 0 AND n_calibration >= 5 AND calibration > 0 AND calibration <> 1")" -ge 1 ] &&
  [ "$(q "$A" "SELECT count(*) FROM rounds WHERE round > 0 AND (n_calibration < 5) <> (calibration = 1)")" = 0 ] ||
  fail "calibration: $(q "$A" "SELECT * FROM rounds")"
[ "$(q "$A" "SELECT count(*) FROM acquisitions a JOIN acquisitions b ON a.round = b.round AND b.rank = a.rank + 1
             WHERE a.round > 0 AND a.value > b.value")" = 0 ] || fail "a round's picks are not in order of value"
[ "$(q "$A" "SELECT count(*) FROM acquisitions q JOIN rounds r ON r.round = q.round WHERE q.round > 0 AND
             abs(q.value - (q.prediction - 1 * q.uncertainty)) > 1e-9 * (1 + abs(q.value))")" = 0 ] ||
  fail "value is not prediction - beta x uncertainty"
# each round's history: the models that decided it (their checkpoints kept
# under models/rounds/<r>/), the set's scores then, the ledger of its work
[ "$(q "$A" "SELECT count(*) FROM round_models WHERE round BETWEEN 1 AND 3 AND model IN ('train/0', 'train/1')
             AND checkpoint = 'models/rounds/' || round || '/train-' || substr(model, 7) || '.ckpt'")" = 6 ] ||
  fail "round_models: $(q "$A" "SELECT * FROM round_models")"
[ "$(q "$A" "SELECT count(*) FROM round_models a JOIN round_models b ON b.model = a.model AND b.round = a.round + 1
             WHERE b.n_train > a.n_train")" = 4 ] || fail "a round's models did not learn more than the round before's"
for r in 1 2 3; do
  for m in 0 1; do [ -s "$work/a/models/rounds/$r/train-$m.ckpt" ] || fail "models/rounds/$r/train-$m.ckpt is missing"; done
done
cmp -s "$work/a/models/rounds/1/train-0.ckpt" "$work/a/models/rounds/3/train-0.ckpt" &&
  fail "round 1's kept checkpoint is round 3's"
[ "$(q "$A" "SELECT group_concat(n, ' ') FROM (SELECT count(*) AS n FROM round_scores GROUP BY round ORDER BY round)")" = \
  "120 120 120" ] || fail "round_scores: $(q "$A" "SELECT round, count(*) FROM round_scores GROUP BY round")"
[ "$(q "$A" "SELECT count(*) FROM acquisitions q JOIN round_scores s ON s.round = q.round AND s.mol_id = q.mol_id
             WHERE q.round > 0 AND s.score = q.prediction")" = 24 ] ||
  fail "the acquisitions' predictions are not their round's scores"
[ "$(q "$A" "SELECT count(DISTINCT round) FROM round_chunks WHERE stage = 'train'")" = 3 ] &&
  [ "$(q "$A" "SELECT count(*) FROM round_chunks WHERE stage = 'train' GROUP BY round")" = "$(printf '6\n6\n6')" ] ||
  fail "round_chunks: $(q "$A" "SELECT round, stage, count(*) FROM round_chunks GROUP BY round, stage")"
[ "$(q "$A" "SELECT group_concat(DISTINCT round) FROM stage_chunks WHERE stage = 'train'")" = 3 ] ||
  fail "the last training's ledger rows are not of round 3"
# a round's kept checkpoint is the model that decided it: predict with
# round 2's first member gives round 2's first member's scores
"$se3" predict "$work/a/models/rounds/2/train-0.ckpt" "$work/library.csv" --top 0 --workdir "$work/p2" \
  > "$work/p2.log" 2>&1 || { cat "$work/p2.log"; fail "predict with a kept checkpoint failed"; }
/usr/bin/python3 - "$A" "$work/p2/screen.db" <<'PY' || fail "round 2's kept checkpoint does not predict round 2's scores"
import sqlite3, struct, sys
a = sqlite3.connect(sys.argv[1])
kept = {s: struct.unpack_from("<d", m, 0)[0] for s, m in a.execute(
    "SELECT m.input_smiles, r.members FROM round_scores r JOIN molecules m ON m.id = r.mol_id WHERE r.round = 2")}
now = dict(a.execute("SELECT m.input_smiles, s.score FROM scores s JOIN molecules m ON m.id = s.mol_id WHERE s.model = 'train'"))
p = dict(sqlite3.connect(sys.argv[2]).execute("SELECT m.input_smiles, s.score FROM scores s JOIN molecules m ON m.id = s.mol_id"))
assert len(kept) == 120 and set(p) == set(kept), (len(kept), len(p))
bad = [s for s in kept if abs(p[s] - kept[s]) > 1e-4 * (1 + abs(kept[s]))]
assert not bad, f"{len(bad)} differ, e.g. {bad[0]}: {p[bad[0]]} against {kept[bad[0]]}"
assert any(abs(p[s] - now[s]) > 1e-3 for s in kept), "round 2's model predicts as the last one does"
PY
# and carries round 2's training set (issue 70): every hit has its nearest
# training molecule, the molecules it learned from (in the library) at 1
[ "$(q "$work/p2/screen.db" "SELECT count(*) = 120 AND count(nearest_train) = 120 AND count(similarity) = 120 AND
    sum(similarity = 1) > 0 FROM ranked_hits")" = 1 ] || fail "round 2's predict has hits without a nearest training molecule"
grep -q "median similarity of 120 hits" "$work/p2.log" || { cat "$work/p2.log"; fail "no median similarity in the log"; }
# verify reads the kept checkpoints too: one damaged is named
"$se3" verify "$work/a" > "$work/v1.log" 2>&1 || { cat "$work/v1.log"; fail "verify found damage"; }
cp "$work/a/models/rounds/2/train-1.ckpt" "$work/keep.ckpt"
printf 'XXXX' | dd of="$work/a/models/rounds/2/train-1.ckpt" bs=1 seek=4000 conv=notrunc 2> /dev/null
"$se3" verify "$work/a" > "$work/v2.log" 2>&1 && fail "verify missed a damaged kept checkpoint"
grep -q "rounds/2/train-1.ckpt" "$work/v2.log" || { cat "$work/v2.log"; fail "verify did not name the checkpoint"; }
cp "$work/keep.ckpt" "$work/a/models/rounds/2/train-1.ckpt"
# the rerun changes nothing
"$se3" run "$work/a.yaml" > "$work/a2.log" 2>&1 || { cat "$work/a2.log"; fail "the rerun failed"; }
grep -q "acquire: round" "$work/a2.log" && { cat "$work/a2.log"; fail "the rerun decided a round"; }
grep -Eq "train: epoch|scored [1-9]" "$work/a2.log" && { cat "$work/a2.log"; fail "the rerun trained or scored"; }

# 2. the same campaign killed with -9 at four observable points
B=$work/b/screen.db
points=(
  "SELECT count(*) >= 1 FROM rounds"
  "SELECT (SELECT count(*) FROM rounds) = 2 AND (SELECT count(*) FROM stage_chunks WHERE stage = 'train') >= 1"
  "SELECT count(*) >= 3 FROM rounds"
  "SELECT (SELECT count(*) FROM rounds) = 4 AND (SELECT count(*) FROM stage_chunks WHERE stage = 'train') >= 2"
)
kills=0
for p in "${points[@]}"; do
  "$se3" run "$work/b.yaml" >> "$work/b.log" 2>&1 &
  pid=$!
  hit=0
  for _ in $(seq 1 2400); do
    kill -0 $pid 2>/dev/null || break
    if [ "$(q "$B" "$p")" = 1 ]; then hit=1; break; fi
    sleep 0.02
  done
  if [ $hit = 1 ]; then
    kill -9 $pid 2>/dev/null && kills=$((kills + 1))
  fi
  wait $pid 2>/dev/null
done
[ $kills -ge 3 ] || { cat "$work/b.log"; fail "only $kills of the 4 kills landed"; }
"$se3" run "$work/b.yaml" > "$work/b-last.log" 2>&1 || { cat "$work/b-last.log"; fail "the resumed campaign failed"; }
for t in "SELECT round, mol_id, rule, quote(value), quote(prediction), quote(uncertainty), rank FROM acquisitions ORDER BY mol_id" \
         "SELECT round, rule, n_acquired, n_candidates, n_labelled, model_hash, quote(calibration), n_calibration FROM rounds ORDER BY round" \
         "SELECT mol_id, quote(score) FROM docking ORDER BY mol_id" \
         "SELECT mol_id, model, quote(score), quote(std) FROM scores ORDER BY mol_id, model" \
         "SELECT round, model, target, checkpoint, best_epoch, quote(best_valid_loss), n_train, quote(test_rmse) FROM round_models ORDER BY round, model" \
         "SELECT round, mol_id, quote(score), quote(std), hex(members) FROM round_scores ORDER BY round, mol_id" \
         "SELECT round, stage, chunk, n_ok, n_rejected FROM round_chunks WHERE stage IN ('train', 'score', 'dock') ORDER BY round, stage, chunk"; do
  [ "$(q "$A" "$t")" = "$(q "$B" "$t")" ] || {
    diff <(q "$A" "$t") <(q "$B" "$t") | head -20
    fail "killed $kills times, the campaign differs from the uninterrupted one: $t"
  }
done

# 2b. a round decided by a step of its own (what `se3screen slurm` chains:
#     run --stage acquire --round R), refused while the round before it is
#     not docked, learned and scored
mkwf r "$work/r"
R() { "$se3" run "$work/r.yaml" --set run.progress=none "$@" > "$work/r.log" 2>&1; }
R --stage ingest || { cat "$work/r.log"; fail "ingest for --round"; }
R --stage acquire --round 1 && fail "round 1 decided before round 0"
grep -q "round 1 cannot be decided yet: 0 rounds decided, round 0 comes first" "$work/r.log" || { cat "$work/r.log"; fail "--round 1 first"; }
R --stage acquire --round 0 || { cat "$work/r.log"; fail "--round 0"; }
R --stage acquire --round 1 && fail "round 1 decided before round 0 was docked"
grep -q "molecules of round 0 are not docked" "$work/r.log" || { cat "$work/r.log"; fail "--round 1 undocked"; }
R --stage dock || { cat "$work/r.log"; fail "dock for --round"; }
R --stage acquire --round 1 && fail "round 1 decided by scores older than round 0's dockings"
grep -q "scores do not come from a model trained since round 0" "$work/r.log" || { cat "$work/r.log"; fail "--round 1 stale"; }
R --stage dock --round 1 && fail "--round with another stage"
[ "$(q "$work/r/screen.db" "SELECT count(*) FROM rounds")" = 1 ] || fail "a refused --round decided a round"

# 3. one more round asked for: decided on from round 3
"$se3" run "$work/a.yaml" --set stages.acquire.rounds=4 > "$work/a3.log" 2>&1 || { cat "$work/a3.log"; fail "rounds: 4 failed"; }
[ "$(q "$A" "SELECT group_concat(round, ' ') FROM rounds")" = "0 1 2 3 4" ] || fail "rounds: 4 did not add round 4"
[ "$(q "$A" "SELECT count(*) FROM acquisitions WHERE round < 4")" = 36 ] || fail "rounds: 4 changed the rounds before"
# the report's section on docking and the rounds: a row a round
"$se3" report "$work/a" -o "$work/a.html" > /dev/null 2>&1 || fail "se3screen report failed"
grep -q '<section id="docking"><h2>Docking and active learning</h2>' "$work/a.html" &&
  grep -q '5 rounds decided' "$work/a.html" &&
  [ "$(grep -o '<tr><td class="n">[0-9]*</td><td>ucb</td>' "$work/a.html" | wc -l)" = 4 ] ||
  fail "report.html has no row for each round"
/usr/bin/python3 "$src/tests/report/check_report.py" "$work/a.html" "$A" > "$work/check.log" 2>&1 ||
  { cat "$work/check.log"; fail "report.html does not match the database"; }
# 4. thompson: each molecule's value one member's prediction, the members
#    stored beside the ensemble's mean and spread
sed -e 's/rule: ucb, beta: 1/rule: thompson/' -e "s#^workdir: .*#workdir: $work/t#" -e 's/^workflow: a$/workflow: t/' \
  "$work/a.yaml" > "$work/t.yaml"
"$se3" run "$work/t.yaml" > "$work/t.log" 2>&1 || { cat "$work/t.log"; fail "thompson failed"; }
T=$work/t/screen.db
[ "$(q "$T" "SELECT count(*) FROM rounds WHERE rule = 'thompson'")" = 3 ] || fail "thompson rounds"
[ "$(q "$T" "SELECT count(*) FROM acquisitions WHERE rule = 'thompson' AND value IS NOT NULL AND value <> prediction")" -ge 1 ] ||
  fail "thompson's values are the ensemble's mean"
[ "$(q "$T" "SELECT count(*) FROM scores WHERE length(members) = 16")" = 120 ] ||
  fail "the members' predictions are not stored"
echo "test_active: ok (killed $kills times)"
