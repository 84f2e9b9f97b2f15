#!/usr/bin/env bash
# The dock stage with the real AutoDock Vina (Debian's autodock-vina, which
# scripts/setup.sh installs), at exhaustiveness 1, into DUD-E's FABP4
# receptor with the box around its crystal ligand (tests/data/dock/):
#   - the crystal ligand redocked lands within 2 Å (heavy-atom RMSD, atom for
#     atom: a pose keeps the molecule's atom order) of its crystal pose;
#   - kill -9 in the middle of the stage, once a docking is stored: Vina's
#     processes go with it, and the rerun docks only the molecules not yet
#     docked (the stored dockings keep their rows, to the bit);
#   - a third run docks nothing; `run --dry-run` says so beforehand;
#   - three poses a molecule (stages.dock.modes: 3) kept in `poses`; a
#     dock-only workflow ranks by the docking score, lowest first, and its
#     hits.sdf has every pose with its tags, read back by RDKit and Open
#     Babel; `export --poses` writes the same poses for any selection;
#   - train learns the docking score (`target: dock`) without docking again,
#     and hits.sdf carries each hit at its docked pose with its score;
#   - a molecule out of time is one reject (`timed out`), the others go on;
#     a program that is not Vina is refused before any docking.
#   - scores from a table (stages.dock.oracle: table) instead of Vina, looked
#     up by the SMILES as written, a molecule without one a reject;
#   - two rounds of active learning docked by Vina;
#   - a line as each docking starts and ends, the rate and the last line
#     from this run's dockings alone; a run stopped by SIGTERM counts the
#     dockings it kept and records its time in the stage.
# About 25 s on 2 cores.
#
#   test_dock.sh SE3SCREEN SOURCE_DIR WORK
set -uo pipefail
se3=$1 src=$2 work=$3
py=/usr/bin/python3
fail() {
  echo "test_dock: FAIL: $*"
  exit 1
}
command -v vina >/dev/null || fail "no vina program (scripts/setup.sh installs Debian's autodock-vina)"
rm -rf "$work" && mkdir -p "$work/tmp"
export TMPDIR=$work/tmp
data=$src/tests/data/dock
wf=$work/dock.yaml
cat > "$wf" <<EOF
workflow: dock
workdir: $work/run
run: {progress: lines, progress_interval_s: 1}
sets:
  library:
    - path: $data/crystal_ligand.mol2
    - path: $data/actives4.mol2
stages:
  # the crystal ligand keeps its crystal pose, which its redock is held to
  ingest: {coordinates: input}
  dock:
    receptor: $data/receptor.pdb
    box_ligand: $data/crystal_ligand.mol2
    exhaustiveness: 1
    seed: 7
    workers: 2
    modes: 3
EOF
db=$work/run/screen.db
q() { sqlite3 -batch -noheader "$db" "$1" 2>/dev/null; }

# 1. a run killed with -9 once the first docking is stored
"$se3" run "$wf" > "$work/run1.log" 2>&1 &
pid=$!
n=0
for _ in $(seq 1 1200); do
  n=$(q "SELECT count(*) FROM docking" || echo 0)
  [ "${n:-0}" -ge 1 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
[ "${n:-0}" -ge 1 ] || { cat "$work/run1.log"; fail "no docking stored while the first run ran"; }
kill -9 $pid
wait $pid 2>/dev/null
before=$(q "SELECT mol_id || ' ' || score || ' ' || seconds || ' ' || hex(pose) FROM docking ORDER BY mol_id")
k=$(printf '%s\n' "$before" | grep -c .)
[ "$k" -lt 5 ] || fail "all 5 molecules were docked before the kill: the test did not cut the stage short"
# Vina's processes die with se3screen (they run with the test's TMPDIR in their command line)
gone=0
for _ in $(seq 1 100); do
  if ! pgrep -f -- "$work/tmp" >/dev/null; then gone=1; break; fi
  sleep 0.1
done
[ $gone = 1 ] || { pgrep -af -- "$work/tmp"; fail "Vina processes outlived the killed run"; }

# 2. the dry run and the rerun dock only the rest
"$se3" run "$wf" --dry-run > "$work/dry.log" 2>&1 || { cat "$work/dry.log"; fail "run --dry-run failed"; }
grep -q "dock: $((5 - k)) of 5 molecules of 'library' to dock" "$work/dry.log" ||
  { cat "$work/dry.log"; fail "the dry run does not say $((5 - k)) of 5 molecules are to dock"; }
"$se3" run "$wf" > "$work/run2.log" 2>&1 || { cat "$work/run2.log"; fail "the rerun failed"; }
grep -q "docked $((5 - k)) molecules (.*), 0 rejected; $k docked before" "$work/run2.log" ||
  { cat "$work/run2.log"; fail "the rerun did not dock exactly the $((5 - k)) molecules left"; }
[ "$(q "SELECT count(*) FROM docking")" = 5 ] || fail "5 dockings expected after the rerun"
# progress that tells the truth (issue 55): a line as each docking starts
# (the killed run said so before its first docking ended) and as it ends,
# the rerun's last line counting its own dockings alone, no rate of 0.0 mol/s
first_start=$(grep -n "] dock: started " "$work/run1.log" | head -1 | cut -d: -f1)
first_end=$(grep -n "] dock: .* docked in " "$work/run1.log" | head -1 | cut -d: -f1)
[ -n "$first_start" ] && [ -n "$first_end" ] && [ "$first_start" -lt "$first_end" ] ||
  { cat "$work/run1.log"; fail "the killed run did not say a docking started before the first ended"; }
ids=$(printf '%s\n' "$before" | cut -d' ' -f1 | paste -sd,)
while IFS= read -r name; do
  grep -Eq "\] dock: started $name \(([1-5]) of 5\)$" "$work/run2.log" ||
    { cat "$work/run2.log"; fail "no line says the docking of $name started"; }
  grep -Eq "\] dock: $name docked in [0-9.]+ s, -[0-9.]+ kcal/mol \([1-5] of 5 done, [0-9.]+ (s/mol|min/mol|mol/s), ETA [0-9:]+\)$" \
    "$work/run2.log" || { cat "$work/run2.log"; fail "no line says $name docked, in what time, with its score"; }
done < <(q "SELECT m.name FROM docking k JOIN molecules m ON m.id = k.mol_id WHERE k.mol_id NOT IN ($ids)")
# before its first docking ends, the rerun's ETA comes from the earlier run's dockings
grep -Eq "\] dock: earlier runs took [0-9.]+ (s/mol|min/mol|mol/s): about [0-9:]+ for the $((5 - k)) left$" \
  "$work/run2.log" || { cat "$work/run2.log"; fail "the rerun gave no ETA from the earlier run's dockings"; }
[ "$(grep -c "] dock: started " "$work/run2.log")" = $((5 - k)) ] ||
  { cat "$work/run2.log"; fail "the rerun announced another count of dockings than the $((5 - k)) it did"; }
grep -q "\] dock: $((5 - k)) mol in .*; $((5 - k)) docked, 0 rejected$" "$work/run2.log" ||
  { cat "$work/run2.log"; fail "the rerun's last dock line does not count its own $((5 - k)) dockings"; }
! grep -hE "[^0-9.]0\.0 mol/s" "$work/run1.log" "$work/run2.log" || fail "a line shows a rate of 0.0 mol/s"  # (not 20.0 mol/s)
# a run stopped by SIGTERM once a docking is stored: its last line counts
# the dockings it kept (not "0 docked"), and its time is recorded
sed "s|^workdir: .*|workdir: $work/stop|" "$wf" > "$work/stop.yaml"
"$se3" run "$work/stop.yaml" > "$work/stop.log" 2>&1 &
pid=$!
sdb=$work/stop/screen.db
for _ in $(seq 1 1200); do
  [ "$(sqlite3 -batch -noheader "$sdb" "SELECT count(*) FROM docking" 2>/dev/null || echo 0)" -ge 1 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
kill -TERM $pid
wait $pid
rc=$?
[ $rc = 75 ] || { cat "$work/stop.log"; fail "the stopped run exited $rc, not 75"; }
ks=$(sqlite3 -batch -noheader "$sdb" "SELECT count(*) FROM docking")
grep -q "\] dock: $ks mol in .*; $ks docked, 0 rejected; stopped by a signal" "$work/stop.log" ||
  { cat "$work/stop.log"; fail "the stopped run's last dock line does not count the $ks dockings it kept"; }
[ "$(sqlite3 -batch -noheader "$sdb" "SELECT count(*) FROM stage_runs WHERE stage = 'dock' AND status = 'stopped'
      AND n_done = $ks AND seconds > 0")" = 1 ] || fail "the stopped run's time in dock is not recorded"
after=$(q "SELECT mol_id || ' ' || score || ' ' || seconds || ' ' || hex(pose) FROM docking WHERE mol_id IN
           ($(printf '%s\n' "$before" | cut -d' ' -f1 | paste -sd,)) ORDER BY mol_id")
[ "$before" = "$after" ] || fail "the dockings stored before the kill changed in the rerun"
[ "$(q "SELECT count(*) FROM stage_chunks WHERE stage='dock'")" = 2 ] || fail "the dock ledger lacks its 2 chunks"
# the killed run's temporary folders (the receptor, the molecules in
# flight) are gone with the rerun's
[ -z "$(ls -A "$work/tmp")" ] || { ls -lR "$work/tmp"; fail "temporary folders were left in TMPDIR"; }

# 3. the crystal ligand back in its pocket, and the others scored
"$py" - "$db" <<'PY' || fail "the poses do not check out"
import math, sqlite3, struct, sys
db = sqlite3.connect(sys.argv[1])
def atoms(blob):
    n = struct.unpack_from("<I", blob, 8)[0]
    return [struct.unpack_from("<BbBBfff", blob, 16 + 16 * i) for i in range(n)]
rows = db.execute("SELECT m.name, k.score, m.mol, k.pose FROM docking k JOIN molecules m ON m.id = k.mol_id").fetchall()
assert len(rows) == 5, rows
for name, score, mol, pose in rows:
    a = [t for t in atoms(mol) if t[0] != 1]
    b = [t for t in atoms(pose) if t[0] != 1]
    assert [t[0] for t in a] == [t[0] for t in b], f"{name}: the pose's heavy atoms differ from the molecule's"
    assert -20 < score < 0, f"{name}: affinity {score}"
    if name == "T4B_293_2NNQ":
        rmsd = math.sqrt(sum((p[4] - q[4]) ** 2 + (p[5] - q[5]) ** 2 + (p[6] - q[6]) ** 2 for p, q in zip(a, b)) / len(a))
        print(f"crystal ligand redocked: {score} kcal/mol, heavy-atom RMSD {rmsd:.2f} A")
        assert rmsd < 2.0, f"the crystal ligand redocked {rmsd:.2f} A from its crystal pose"
        assert score < -9, f"the crystal ligand scores only {score}"
PY

# 4. nothing left to do
"$se3" run "$wf" --dry-run > "$work/dry2.log" 2>&1 || fail "the second dry run failed"
grep -q "dock: nothing to do" "$work/dry2.log" || { cat "$work/dry2.log"; fail "the second dry run has work"; }
"$se3" run "$wf" > "$work/run3.log" 2>&1 || { cat "$work/run3.log"; fail "the third run failed"; }
grep -q "docked [1-9]" "$work/run3.log" && { cat "$work/run3.log"; fail "the third run docked again"; }

# 4b. ranked by the docking score alone: every pose in hits.sdf, lowest
#     score first, each pose's tags; RDKit and Open Babel read them all
cp "$wf" "$work/rank.yaml" && echo "  rank: {top: 5}" >> "$work/rank.yaml"
"$se3" run "$work/rank.yaml" > "$work/rank.log" 2>&1 || { cat "$work/rank.log"; fail "the dock-only rank failed"; }
grep -q "dock: nothing to do" "$work/rank.log" || { cat "$work/rank.log"; fail "adding rank docked again"; }
grep -q "rank: 5 hits by dock (lowest first); hits.csv; hits.sdf ([0-9]* docked poses)" "$work/rank.log" ||
  { cat "$work/rank.log"; fail "rank did not rank the 5 docking scores"; }
grep -qE "^\[.*\] (graph|train|score):" "$work/rank.log" &&
  { cat "$work/rank.log"; fail "a dock-only workflow ran graph, train or score"; }
"$se3" export "$work/run" --format sdf --poses -o "$work/poses.sdf" 2> "$work/export.log" ||
  { cat "$work/export.log"; fail "export --poses failed"; }
"$se3" export "$work/run" --format csv --poses -o "$work/poses.csv" 2> "$work/export2.log" &&
  fail "export --poses --format csv was not refused"
"$py" - "$db" "$work/run/hits.sdf" "$work/run/hits.csv" "$work/poses.sdf" <<'PY' || fail "the ranked poses do not check out"
import csv, sqlite3, sys
from rdkit import Chem
db = sqlite3.connect(sys.argv[1])
poses = db.execute("SELECT m.name, p.mode, p.score, p.inter, p.intra, p.rmsd_lb FROM poses p JOIN molecules m "
                   "ON m.id = p.mol_id ORDER BY p.mol_id, p.mode").fetchall()
by = {}
for name, mode, score, inter, intra, lb in poses:
    by.setdefault(name, []).append((mode, score, inter, intra, lb))
assert len(by) == 5, by.keys()
for name, ps in by.items():
    assert [p[0] for p in ps] == list(range(1, len(ps) + 1)) and 1 <= len(ps) <= 3, (name, ps)
    assert all(a[1] <= b[1] for a, b in zip(ps, ps[1:])), f"{name}: poses not best first: {ps}"
    assert ps[0][4] == 0 and all(p[2] is not None and p[3] is not None for p in ps), (name, ps)
assert any(len(ps) == 3 for ps in by.values()), "no molecule got three poses"
best = dict(db.execute("SELECT m.name, k.score FROM docking k JOIN molecules m ON m.id = k.mol_id"))
assert all(best[n] == ps[0][1] for n, ps in by.items()), "docking.score is not mode 1's"
hits = list(csv.DictReader(open(sys.argv[3])))
assert [float(h["score"]) for h in hits] == sorted(best.values()), "hits.csv is not lowest first"
for path in sys.argv[2], sys.argv[4]:
    recs = [m for m in Chem.SDMolSupplier(path, removeHs=False)]
    assert all(m is not None for m in recs), f"RDKit could not read a record of {path}"
    assert len(recs) == len(poses), (path, len(recs), len(poses))
    for m in recs:
        mode, name = int(m.GetProp("mode")), m.GetProp("_Name")
        want = by[name][mode - 1]
        assert abs(float(m.GetProp("vina_score")) - want[1]) < 1e-6, (name, mode)
        assert abs(float(m.GetProp("vina_inter")) - want[2]) < 1e-6, (name, mode)
        assert m.GetNumHeavyAtoms() > 0 and m.GetConformer().Is3D(), (name, mode)
    # both name the receptor, alike (issue 70: export --poses left it out)
    assert all(m.HasProp("receptor") for m in recs), f"{path} does not name the receptor"
    assert len({m.GetProp("receptor") for m in recs}) == 1, f"{path}: receptors differ"
    if path == sys.argv[2]:
        receptor = recs[0].GetProp("receptor")
    else:
        assert recs[0].GetProp("receptor") == receptor, "export --poses names another receptor than hits.sdf"
        ranks = [int(m.GetProp("rank")) for m in recs]
        assert ranks == sorted(ranks), "hits.sdf is not in rank order"
print(f"{len(poses)} poses of 5 molecules read back by RDKit")
PY
n_ob=$(obabel "$work/run/hits.sdf" -osmi 2>/dev/null | grep -c .)
[ "$n_ob" = "$(q "SELECT count(*) FROM poses")" ] || fail "Open Babel read $n_ob poses of hits.sdf"

# 5. the docking score as the label train learns; hits.sdf at the docked poses
# (the same workflow grown by a train stage, in a file of its own: it keeps
# its name, so the workdir is still its own)
cp "$wf" "$work/train.yaml"
cat >> "$work/train.yaml" <<EOF
  train: {ensemble: 1, set: library, target: dock, epochs: 2}
  score: {set: library}
  rank: {order: ascending, top: 5}
EOF
"$se3" run "$work/train.yaml" > "$work/train.log" 2>&1 || { cat "$work/train.log"; fail "training on the docking score failed"; }
grep -q "dock: nothing to do" "$work/train.log" || { cat "$work/train.log"; fail "adding train docked again"; }
grep -q "5 molecules with 'dock' in set 'library'" "$work/train.log" ||
  { cat "$work/train.log"; fail "train did not learn the 5 docking scores"; }
[ "$(q "SELECT count(*) FROM models WHERE target = 'dock'")" = 1 ] || fail "no model of target dock"
[ "$(grep -c '<docking_score>' "$work/run/hits.sdf")" = 5 ] || fail "hits.sdf lacks the docking scores"
"$py" - "$db" "$work/run/hits.sdf" <<'PY' || fail "hits.sdf is not at the docked poses"
import sqlite3, struct, sys
db = sqlite3.connect(sys.argv[1])
text = open(sys.argv[2]).read()
for name, pose, score in db.execute("SELECT m.name, k.pose, k.score FROM docking k JOIN molecules m ON m.id = k.mol_id"):
    rec = next(r for r in text.split("$$$$\n") if r.lstrip("\n").startswith(name + "\n"))
    x, y, z = struct.unpack_from("<fff", pose, 16 + 4)
    first = rec.lstrip("\n").splitlines()[4].split()
    assert abs(float(first[0]) - x) < 1e-3 and abs(float(first[1]) - y) < 1e-3, (name, first, x, y)
    assert abs(float(rec.split("<docking_score>")[1].split()[0]) - score) < 1e-6, name
PY

# 6. out of time: a reject; the other molecule docks
sed -e 's/^workflow: dock$/workflow: slow/' -e "s#^workdir: .*#workdir: $work/slow#" \
  -e 's/^run: .*/run: {progress: none}/' -e 's/^    seed: 7$/    timeout_s: 1/' "$wf" > "$work/slow.yaml"
"$se3" run "$work/slow.yaml" > "$work/slow.log" 2>&1 || { cat "$work/slow.log"; fail "a run with timeouts failed"; }
db=$work/slow/screen.db
r=$(q "SELECT count(*) FROM rejects WHERE stage='dock' AND reason='timed out' AND detail LIKE 'after 1 s%'")
d=$(q "SELECT count(*) FROM docking")
[ "$((r + d))" = 5 ] && [ "$r" -ge 1 ] || fail "5 molecules, docked or rejected for time, expected (rejected $r, docked $d)"

# 7. a program that is not Vina: refused, naming the key
"$se3" run "$work/slow.yaml" --set stages.dock.vina=/bin/echo > "$work/notvina.log" 2>&1 &&
  fail "a run with stages.dock.vina=/bin/echo succeeded"
grep -q "not AutoDock Vina's version" "$work/notvina.log" || { cat "$work/notvina.log"; fail "no message naming Vina"; }
# 8. a table for an oracle: scores looked up by the SMILES as written (not
#    Open Babel's canonical form), a row without a number and a molecule
#    the table lacks as rejects, a repeated key's first row, the set-up
#    being the table's bytes
mkdir -p "$work/tab"
printf 'smiles,id\nOCC,eth\nC(C)O,eth2\nc1ccccc1O,phenol\nCC(=O)O,acid\nCCN,amine\n' > "$work/tab/lib.csv"
printf 'smiles,score\nC(C)O,-2.5\nOCC,-1.5\nc1ccccc1O,-6.25\nc1ccccc1O,-9\nCC(=O)O,\n' > "$work/tab/scores.csv"
cat > "$work/tab/wf.yaml" <<EOF
workflow: table
workdir: $work/tab/run
run: {progress: none}
sets:
  library:
    - path: lib.csv
stages:
  ingest: {}
  dock: {oracle: table, table: scores.csv}
EOF
"$se3" run "$work/tab/wf.yaml" > "$work/tab/run1.log" 2>&1 || { cat "$work/tab/run1.log"; fail "the table oracle failed"; }
db=$work/tab/run/screen.db
got=$(q "SELECT m.name || '=' || k.score FROM docking k JOIN molecules m ON m.id = k.mol_id ORDER BY m.record_no" | paste -sd' ')
[ "$got" = "eth=-1.5 eth2=-2.5 phenol=-6.25" ] || fail "table scores: $got"
got=$(q "SELECT m.name || ':' || r.reason FROM rejects r JOIN molecules m ON m.id = r.mol_id WHERE r.stage = 'dock'
         ORDER BY m.record_no" | paste -sd' ')
[ "$got" = "acid:no score in the table amine:no score in the table" ] || fail "table rejects: $got"
grep -q "5 rows, 3 keys with a score, 1 without a number in 'score', 0 unreadable; 1 repeated" "$work/tab/run1.log" ||
  { cat "$work/tab/run1.log"; fail "the table's summary"; }
# the table edited: every molecule looked up again
sed -i 's/^OCC,-1.5$/OCC,-3.5/' "$work/tab/scores.csv"
"$se3" run "$work/tab/wf.yaml" > "$work/tab/run2.log" 2>&1 || { cat "$work/tab/run2.log"; fail "the second table run failed"; }
grep -q "scored 3 molecules from the table, 2 without a score there; 0 scored before" "$work/tab/run2.log" ||
  { cat "$work/tab/run2.log"; fail "an edited table was not looked up again"; }
[ "$(q "SELECT score FROM docking k JOIN molecules m ON m.id = k.mol_id WHERE m.name = 'eth'")" = -3.5 ] ||
  fail "the edited score was not taken"
# by name
"$se3" run "$work/tab/wf.yaml" --set stages.dock.table_key=name --set stages.dock.key_column=smiles \
  > "$work/tab/run3.log" 2>&1 || { cat "$work/tab/run3.log"; fail "table_key: name failed"; }
[ "$(q "SELECT count(*) FROM docking")" = 0 ] || fail "names matched SMILES keys"
# the dock stage's own chunk size: five molecules in chunks of two (and,
# on one core of an affinity mask, as under a Slurm allocation, one parser)
taskset -c 0 "$se3" run "$work/tab/wf.yaml" --workdir "$work/tab/run2" --set stages.dock.chunk_size=2 \
  > "$work/tab/run4.log" 2>&1 || { cat "$work/tab/run4.log"; fail "stages.dock.chunk_size failed"; }
grep -q "ingest: 5 molecules parsed .*; 1 parser process$" "$work/tab/run4.log" ||
  { cat "$work/tab/run4.log"; fail "ingest's workers: 0 did not take the affinity mask's one core"; }
[ "$(sqlite3 "$work/tab/run2/screen.db" "SELECT count(*) || ':' || sum(n_ok + n_rejected) FROM stage_chunks WHERE stage = 'dock'")" = 3:5 ] ||
  fail "chunk_size 2: $(sqlite3 "$work/tab/run2/screen.db" "SELECT chunk, n_ok, n_rejected FROM stage_chunks WHERE stage = 'dock'")"
[ "$(sqlite3 "$work/tab/run2/screen.db" "SELECT count(*) FROM docking")" = 3 ] || fail "chunk_size 2 docked otherwise"
# 9. two rounds of active learning with the real Vina: eight small SMILES,
#    three docked at random, a model trained on their scores, two more
#    acquired by it and docked, the model trained again
mkdir -p "$work/al"
printf 'smiles,name\nOC(=O)c1ccccc1,benzoic\nOc1ccccc1,phenol\nNc1ccccc1C(=O)O,anthranilic\nCC(=O)Nc1ccc(O)cc1,paracetamol\nOC(=O)c1ccc(cc1)-c1ccccc1,biphenylcarboxylic\nOC(=O)CCc1ccccc1,phenylpropanoic\nc1ccc2ccccc2c1,naphthalene\nOC(=O)c1cccc2ccccc12,naphthoic\n' \
  > "$work/al/lib.csv"
cat > "$work/al/wf.yaml" <<EOF
workflow: al-vina
workdir: $work/al/run
run: {progress: none}
sets:
  library:
    - path: lib.csv
stages:
  ingest: {}
  acquire: {initial: 3, batch: 2, rounds: 1, rule: greedy, seed: 2}
  dock:
    receptor: $data/receptor.pdb
    box_ligand: $data/crystal_ligand.mol2
    exhaustiveness: 1
    workers: 2
  train: {ensemble: 1, set: library, target: dock, epochs: 2}
  score: {set: library}
EOF
"$se3" run "$work/al/wf.yaml" > "$work/al/run.log" 2>&1 || { cat "$work/al/run.log"; fail "active learning with Vina failed"; }
db=$work/al/run/screen.db
[ "$(q "SELECT group_concat(round || ':' || rule || ':' || n_acquired || ':' || n_labelled, ' ') FROM rounds")" = "0:random:3:0 1:greedy:2:3" ] ||
  fail "rounds: $(q "SELECT * FROM rounds")"
[ "$(q "SELECT count(*) FROM docking k JOIN acquisitions q ON q.mol_id = k.mol_id")" = 5 ] || fail "5 dockings expected"
[ "$(q "SELECT count(*) FROM docking")" = 5 ] || fail "a molecule not acquired was docked"
[ "$(grep -c "train: epoch 2" "$work/al/run.log")" = 2 ] || { cat "$work/al/run.log"; fail "the model was not trained twice"; }
[ "$(q "SELECT count(*) FROM scores")" = 8 ] || fail "the set was not scored"
echo "test_dock: ok ($k of 5 docked before the kill)"
