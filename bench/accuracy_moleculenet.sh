#!/usr/bin/env bash
# accuracy_moleculenet.sh — ESOL, FreeSolv and Lipophilicity (regression), BACE
# and BBBP (binary classification) (MoleculeNet, as Chemprop ships them) with the
# SE(3)-Transformer, beside a Morgan-fingerprint linear model on the very same
# split and, with CHEMPROP=1, beside Chemprop v1.7.1 on it too. Prints one JSON
# object a line: one per dataset, split, conformer count and training seed,
# then a summary line per dataset, split and conformer count with the mean (and
# sample sd) over the seeds.
#
#   bash bench/accuracy_moleculenet.sh [SE3SCREEN]
#
# A seed's line: "seed"; "seconds", the se3screen run's wall time (the first
# seed's includes ingest and graph, a later seed's only the stages its seed
# changes: "reused" lists the stages that had nothing to do); "se3", the train
# stage's test metrics (conformer 0); "se3_scored", the score stage's
# predictions for the same test molecules, each the mean over its conformers
# (the two agree for one conformer); the baseline; and with CHEMPROP=1
# "chemprop", Chemprop's test metrics and seconds for that seed.
# Regression (esol, freesolv, lipo): test MAE and RMSE; the baseline
# "ridge_morgan" is a ridge regression (alpha chosen on the validation split
# from 0.1, 1, 10, 100). Classification (bace, bbbp: stages.train.task
# classification, no atomref): test ROC-AUC and PR-AUC (average precision;
# se3 also the enrichment factor at 1 %), se3_scored's from the scores
# table's probabilities with sklearn; the baseline "logreg_morgan" is a
# logistic regression (C chosen on the validation split's ROC-AUC from 0.01,
# 0.1, 1, 10). Both baselines read Morgan bits (radius 2, 2048 bits) and are
# the same for every seed. The summary line has "summary": "mean over seeds",
# "seeds", and each model's mean metrics with their sample sd over the seeds
# under "sd".
#
# Environment (all optional):
#   DATA        folder with chemprop_{delaney,freesolv,lipo,bace,bbbp}.csv (default ../shared/data/moleculenet)
#   DATASETS    which of esol freesolv lipo bace bbbp (default "esol freesolv lipo")
#   SPLITS      which (default "random scaffold"): stages.train.split.method
#   CONFORMERS  conformer counts to compare (default "1"; e.g. "1 10": stages.ingest.conformers):
#               each a workdir of its own
#   SEEDS       training seeds, stages.train.seed (default "0"; e.g. "0 1 2"; the script set no seed
#               before, so its earlier runs had the schema's 42: SEEDS=42 repeats them). The split keeps its own
#               seed (stages.train.split.seed 0), so every seed has the same split. The seeds run one
#               after the other in one workdir: a keyed rerun keeps ingest and graph and redoes train
#               and score; each seed's metrics are read as soon as its run ends (a workdir keeps the
#               last run's). Each seed's log is WORK/<dataset>-<split>-c<N>/run-seed<S>.log
#   EPOCHS      training epochs (default 30), MODEL (default small)
#   INGEST_YAML, GRAPH_YAML, TRAIN_YAML
#               extra keys of stages.ingest, stages.graph, stages.train, written as the entries of a
#               YAML flow mapping (what goes between its braces), e.g.
#                 GRAPH_YAML='atom_features: [aromatic, ring, hydrogens], bond_features: [conjugated]'
#                 TRAIN_YAML='lr: 0.001, arch: {layers: 3, embed: 32}'
#               A key named there replaces the script's own (TRAIN_YAML='atomref: false, epochs: 50'),
#               a whole value at a time (TRAIN_YAML='split: {...}' replaces all of split). Use another
#               WORK to keep both settings' runs; in the same WORK a keyed rerun redoes what changed
#   CHEMPROP    1: after each seed's se3screen run, train Chemprop with that seed on the same split
#               (the run's `splits`), through CPRUN: the workdir's chemprop-seed<S>/ holds its CSVs,
#               model and train.log, chemprop-seed<S>.err its stderr; a failed training is reported
#               as "chemprop": {"error": "failed"} and the script goes on
#   CPRUN       the runner (default ../shared/cpbench/run.sh); CPBENCH the Chemprop tree its setup.sh
#               laid out (default /tmp/cpbench)
#   CP_EPOCHS   Chemprop's epochs (default: Chemprop's own, 30); CP_THREADS its threads (default 1:
#               on a loaded 2-core machine two torch threads run ten times slower)
#   WORK        where the runs go (default a new folder under ${TMPDIR:-/tmp}; kept, rerun resumes)
#
# The split is se3screen's own (80/10/10, seed 0; scaffold: Bemis-Murcko), read
# back from the run's `splits` table, so the baselines and Chemprop see the same
# molecules in the same places. Molecules Open Babel or the 3D builder rejected
# are in no model's test set.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
se3=$(realpath "${1:-$root/build/se3screen}")
data=${DATA:-$root/../shared/data/moleculenet}
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/accuracy_moleculenet.XXXXXX")}
mkdir -p "$work"
epochs=${EPOCHS:-30}
model=${MODEL:-small}
seeds=${SEEDS:-0}
chemprop=${CHEMPROP:-0}
cprun=${CPRUN:-$root/../shared/cpbench/run.sh}
cpbench=${CPBENCH:-/tmp/cpbench}
if [ "$chemprop" = 1 ]; then
  [ -f "$cprun" ] || { echo "accuracy_moleculenet: $cprun not found (set CPRUN)" >&2; exit 2; }
  [ -f "$cpbench/PYTHONPATH" ] || { echo "accuracy_moleculenet: $cpbench/PYTHONPATH not found: run cpbench's setup.sh (or set CPBENCH)" >&2; exit 2; }
fi

declare -A file=([esol]=chemprop_delaney.csv [freesolv]=chemprop_freesolv.csv [lipo]=chemprop_lipo.csv
                 [bace]=chemprop_bace.csv [bbbp]=chemprop_bbbp.csv)
declare -A column=([esol]=logp [freesolv]=freesolv [lipo]=lipo [bace]=Class [bbbp]=p_np)
declare -A smiles_column=([bace]=mol)
declare -A task=([bace]=classification [bbbp]=classification)

# flow EXTRA 'key: value'...: a YAML flow mapping of the pairs whose key EXTRA does not name, then EXTRA's
flow() {
  /usr/bin/python3 - "$@" <<'PY'
import sys, yaml
extra, pairs = sys.argv[1].strip(), sys.argv[2:]
named = set(yaml.safe_load("{" + extra + "}")) if extra else set()
print("{" + ", ".join([p for p in pairs if p.split(":", 1)[0].strip() not in named] + ([extra] if extra else [])) + "}")
PY
}

for ds in ${DATASETS:-esol freesolv lipo}; do
  src=$data/${file[$ds]:?unknown dataset $ds}
  [ -f "$src" ] || { echo "accuracy_moleculenet: $src not found (set DATA)" >&2; exit 2; }
  kind=${task[$ds]:-regression}
  smi=${smiles_column[$ds]:+, smiles_column: ${smiles_column[$ds]}}
  for split in ${SPLITS:-random scaffold}; do
    for nconf in ${CONFORMERS:-1}; do
      dir=$work/$ds-$split-c$nconf
      mkdir -p "$dir"
      cp "$src" "$dir/data.csv"
      : > "$dir/seeds.jsonl"
      for seed in $seeds; do
        train=("target: ${column[$ds]}")
        [ "$kind" = classification ] && train+=("task: classification")
        train+=("model: $model" "epochs: $epochs" "seed: $seed")
        [ "$kind" = regression ] && train+=("atomref: true")
        train+=("split: {method: $split, valid: 0.1, test: 0.1, seed: 0}")
        cat > "$dir/wf.yaml" <<YAML
workflow: accuracy-$ds-$split-c$nconf
workdir: run
sets:
  train:
    - {path: data.csv, labels: [${column[$ds]}]$smi}
stages:
  ingest: $(flow "${INGEST_YAML:-}" "conformers: $nconf" "add_hydrogens: true")
  graph: $(flow "${GRAPH_YAML:-}" "edges: radius+bonds" "cutoff: 5.0")
  train: $(flow "${TRAIN_YAML:-}" "${train[@]}")
  score: {set: train}
YAML
        log=$dir/run-seed$seed.log
        t0=$(date +%s.%N)
        (cd "$dir" && "$se3" run wf.yaml > "$log" 2>&1) || {
          echo "accuracy_moleculenet: $ds $split conformers $nconf seed $seed failed; see $log" >&2
          tail -5 "$log" >&2
          exit 1
        }
        t1=$(date +%s.%N)
        line=$(/usr/bin/python3 - "$dir/run/screen.db" "$ds" "$split" "$nconf" "$seed" "$t0" "$t1" "$log" <<'PY'
import json, re, sqlite3, sys
import numpy as np
from rdkit import Chem, RDLogger
from rdkit.Chem import AllChem
RDLogger.DisableLog("rdApp.*")
db, ds, split, nconf, seed, t0, t1, log = sys.argv[1:]
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
con.row_factory = sqlite3.Row
target, task = con.execute("SELECT target, task FROM models ORDER BY rowid DESC LIMIT 1").fetchone()
n_test = con.execute("SELECT COUNT(*) FROM splits WHERE split = 'test'").fetchone()[0]
test = dict(con.execute("SELECT * FROM metrics WHERE split = 'test' ORDER BY model = 'ensemble' DESC, rowid DESC LIMIT 1").fetchone())
rows = con.execute("SELECT s.split, m.smiles, l.value FROM splits s JOIN molecules m ON m.id = s.mol_id "
                   "JOIN labels l ON l.mol_id = s.mol_id AND l.name = ?", (target,)).fetchall()
# The best checkpoint's scores of the test molecules, each aggregated over its
# conformers (stages.score.aggregate, mean): the ensemble's accuracy, where the
# train stage's metrics are taken on conformer 0. Classification: probabilities.
scored = con.execute("SELECT sc.score, l.value, sc.conformer_sd FROM splits s "
                     "JOIN scores sc ON sc.mol_id = s.mol_id "
                     "JOIN labels l ON l.mol_id = s.mol_id AND l.name = ? "
                     "WHERE s.split = 'test'", (target,)).fetchall()
spred = np.array([r[0] for r in scored])
slab = np.array([r[1] for r in scored])
sds = [r[2] for r in scored if r[2] is not None]
reused = re.findall(r"\] (\w+): nothing to do", open(log).read())
def r4(x):
    return None if x is None else round(float(x), 4)
def fp(smi):
    mol = Chem.MolFromSmiles(smi)
    if mol is None:
        return None
    bits = AllChem.GetMorganFingerprintAsBitVect(mol, 2, nBits=2048)
    return np.array(list(bits), dtype=np.float64)
X = {"train": [], "valid": [], "test": []}
y = {"train": [], "valid": [], "test": []}
unread = 0
for s, smi, v in rows:
    f = fp(smi)
    if f is None:
        unread += 1
        continue
    X[s].append(f)
    y[s].append(v)
A = {k: np.array(v) for k, v in X.items()}
b = {k: np.array(v) for k, v in y.items()}
out = {"dataset": ds, "split": split, "conformers": int(nconf), "seed": int(seed), "target": target,
       "task": task, "test_molecules": n_test, "seconds": round(float(t1) - float(t0), 1), "reused": reused}
if task == "classification":
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import average_precision_score, roc_auc_score
    def cls(lab, p):
        two = len(set(lab.tolist())) == 2
        return {"roc_auc": r4(roc_auc_score(lab, p)) if two else None,
                "pr_auc": r4(average_precision_score(lab, p)) if two else None}
    best = None
    for C in (0.01, 0.1, 1.0, 10.0):
        m = LogisticRegression(C=C, max_iter=5000).fit(A["train"], b["train"])
        pv = m.predict_proba(A["valid"])[:, 1]
        auc = roc_auc_score(b["valid"], pv) if len(set(b["valid"].tolist())) == 2 else 0.0
        if best is None or auc > best[0]:
            best = (auc, C, m)
    out["se3"] = {"roc_auc": r4(test["roc_auc"]), "pr_auc": r4(test["pr_auc"]), "ef1": r4(test["ef1"])}
    out["se3_scored"] = {**cls(slab, spred), "test_molecules": int(len(spred)),
                         "mean_conformer_sd": r4(np.mean(sds)) if sds else None}
    out["logreg_morgan"] = {**cls(b["test"], best[2].predict_proba(A["test"])[:, 1]), "C": best[1],
                            "test_molecules": int(len(b["test"])), "unreadable_smiles": unread}
else:
    serr = spred - slab
    mu = b["train"].mean()
    def fit(alpha):
        Xt = A["train"]
        w = np.linalg.solve(Xt.T @ Xt + alpha * np.eye(Xt.shape[1]), Xt.T @ (b["train"] - mu))
        return lambda Z: Z @ w + mu
    best = None
    for alpha in (0.1, 1.0, 10.0, 100.0):
        f = fit(alpha)
        e = np.abs(f(A["valid"]) - b["valid"]).mean()
        if best is None or e < best[0]:
            best = (e, alpha, f)
    err = best[2](A["test"]) - b["test"]
    out["se3"] = {"mae": r4(test["mae"]), "rmse": r4(test["rmse"])}
    out["se3_scored"] = {"mae": r4(np.abs(serr).mean()), "rmse": r4(np.sqrt((serr ** 2).mean())),
                         "test_molecules": int(len(serr)),
                         "mean_conformer_sd": r4(np.mean(sds)) if sds else None}
    out["ridge_morgan"] = {"mae": r4(np.abs(err).mean()), "rmse": r4(np.sqrt((err ** 2).mean())),
                           "alpha": best[1], "test_molecules": int(len(err)), "unreadable_smiles": unread}
print(json.dumps(out))
PY
)
        # Chemprop on the same split (this run's `splits`, the same for every seed)
        if [ "$chemprop" = 1 ]; then
          cpout=$dir/chemprop-seed$seed
          rm -rf "$cpout"
          cp=$(env -u EPOCHS ${CP_EPOCHS:+EPOCHS=$CP_EPOCHS} THREADS=${CP_THREADS:-1} CPBENCH="$cpbench" \
                 bash "$cprun" "$dir/run/screen.db" "$cpout" "$seed" 2> "$cpout.err" < /dev/null) || {
            echo "accuracy_moleculenet: Chemprop on $ds $split seed $seed failed; see $cpout.err and $cpout/train.log" >&2
            cp='{"error": "failed"}'
          }
          line=$(/usr/bin/python3 - "$line" "$cp" "${CP_EPOCHS:-30}" <<'PY'
import json, sys
out, cp, epochs = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
if "error" not in cp:
    names = {"auc": "roc_auc", "prc-auc": "pr_auc"}
    cp = {**{names.get(k, k): round(v, 4) for k, v in cp["test"].items()}, "test_molecules": cp["test_molecules"],
          "seconds": cp["seconds"], "epochs": epochs, "program": cp["program"]}
out["chemprop"] = cp
print(json.dumps(out))
PY
)
        fi
        echo "$line" >> "$dir/seeds.jsonl"
        echo "$line"
      done
      /usr/bin/python3 - "$dir/seeds.jsonl" <<'PY'
import json, sys
import numpy as np
lines = [json.loads(l) for l in open(sys.argv[1])]
first = lines[0]
def mean(key):
    got = [l[key] for l in lines if isinstance(l.get(key), dict) and "error" not in l[key]]
    if not got:
        return None
    out, sd = {}, {}
    for k, v in got[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("test_molecules", "unreadable_smiles", "epochs", "alpha", "C"):
            vals = [g[k] for g in got if g.get(k) is not None]
            if vals:
                out[k] = round(float(np.mean(vals)), 4)
                sd[k] = round(float(np.std(vals, ddof=1)), 4) if len(vals) > 1 else None
        else:
            out[k] = v
    out["sd"] = sd
    out["n"] = len(got)
    return out
summary = {k: first[k] for k in ("dataset", "split", "conformers", "target", "task", "test_molecules")}
summary["summary"] = "mean over seeds"
summary["seeds"] = [l["seed"] for l in lines]
summary["seconds"] = round(float(np.mean([l["seconds"] for l in lines])), 1)
for key in ("se3", "se3_scored", "ridge_morgan", "logreg_morgan", "chemprop"):
    if key in first:
        summary[key] = mean(key)
print(json.dumps(summary))
PY
    done
  done
done
