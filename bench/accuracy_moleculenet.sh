#!/usr/bin/env bash
# accuracy_moleculenet.sh — ESOL, FreeSolv and Lipophilicity (MoleculeNet, as
# Chemprop ships them) with the SE(3)-Transformer, beside a Morgan-fingerprint
# ridge regression on the very same split, in one run. Prints one JSON object a
# line: one per dataset, split and conformer count, each with the model's and the
# ridge's test MAE and RMSE.
#
#   bash bench/accuracy_moleculenet.sh [SE3SCREEN]
#
# "se3" is the train stage's test metrics (conformer 0); "se3_scored" the
# score stage's predictions for the same test molecules, each the mean over its
# conformers: the two agree for one conformer.
#
# Environment (all optional):
#   DATA        folder with chemprop_{delaney,freesolv,lipo}.csv (default ../shared/data/moleculenet)
#   DATASETS    which (default "esol freesolv lipo")
#   SPLITS      which (default "random scaffold"): stages.train.split.method
#   CONFORMERS  conformer counts to compare (default "1"; e.g. "1 5" where
#               stages.ingest.conformers exists): each a workdir of its own
#   EPOCHS      training epochs (default 30), MODEL (default small)
#   WORK        where the runs go (default a new folder under ${TMPDIR:-/tmp}; kept, rerun resumes)
#
# The split is se3screen's own (80/10/10, seed 0; scaffold: Bemis-Murcko), read
# back from the run's `splits` table, so the ridge (radius 2, 2048 bits, alpha
# chosen on the validation split from 0.1, 1, 10, 100) sees the same molecules
# in the same places. Molecules Open Babel or the 3D builder rejected are in
# neither model's test set.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
se3=$(realpath "${1:-$root/build/se3screen}")
data=${DATA:-$root/../shared/data/moleculenet}
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/accuracy_moleculenet.XXXXXX")}
mkdir -p "$work"
epochs=${EPOCHS:-30}
model=${MODEL:-small}

declare -A file=([esol]=chemprop_delaney.csv [freesolv]=chemprop_freesolv.csv [lipo]=chemprop_lipo.csv)
declare -A column=([esol]=logp [freesolv]=freesolv [lipo]=lipo)

for ds in ${DATASETS:-esol freesolv lipo}; do
  src=$data/${file[$ds]:?unknown dataset $ds}
  [ -f "$src" ] || { echo "accuracy_moleculenet: $src not found (set DATA)" >&2; exit 2; }
  for split in ${SPLITS:-random scaffold}; do
    for nconf in ${CONFORMERS:-1}; do
      dir=$work/$ds-$split-c$nconf
      mkdir -p "$dir"
      cp "$src" "$dir/data.csv"
      cat > "$dir/wf.yaml" <<YAML
workflow: accuracy-$ds-$split-c$nconf
workdir: run
sets:
  train:
    - {path: data.csv, labels: [${column[$ds]}]}
stages:
  ingest: {conformers: $nconf, add_hydrogens: true}
  graph: {edges: radius+bonds, cutoff: 5.0}
  train:
    target: ${column[$ds]}
    model: $model
    epochs: $epochs
    atomref: true
    split: {method: $split, valid: 0.1, test: 0.1, seed: 0}
  score: {set: train}
YAML
      t0=$(date +%s.%N)
      (cd "$dir" && "$se3" run wf.yaml > run.log 2>&1) || {
        echo "accuracy_moleculenet: $ds $split conformers $nconf failed; see $dir/run.log" >&2
        tail -5 "$dir/run.log" >&2
        exit 1
      }
      t1=$(date +%s.%N)
      /usr/bin/python3 - "$dir/run/screen.db" "$ds" "$split" "$nconf" "$t0" "$t1" <<'PY'
import json, sqlite3, sys
import numpy as np
from rdkit import Chem, RDLogger
from rdkit.Chem import AllChem
RDLogger.DisableLog("rdApp.*")
db, ds, split, nconf, t0, t1 = sys.argv[1:]
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
target = con.execute("SELECT target FROM models ORDER BY rowid DESC LIMIT 1").fetchone()[0]
test = con.execute("SELECT n_molecules, mae, rmse FROM metrics m "
                   "LEFT JOIN (SELECT COUNT(*) AS n_molecules FROM splits WHERE split = 'test') "
                   "WHERE m.split = 'test' ORDER BY m.rowid DESC LIMIT 1").fetchone()
rows = con.execute("SELECT s.split, m.smiles, l.value FROM splits s JOIN molecules m ON m.id = s.mol_id "
                   "JOIN labels l ON l.mol_id = s.mol_id AND l.name = ?", (target,)).fetchall()
# The best checkpoint's scores of the test molecules, each aggregated over its
# conformers (stages.score.aggregate, mean): the ensemble's accuracy, where the
# train stage's metrics are taken on conformer 0.
scored = con.execute("SELECT sc.score - l.value, sc.conformer_sd FROM splits s "
                     "JOIN scores sc ON sc.mol_id = s.mol_id "
                     "JOIN labels l ON l.mol_id = s.mol_id AND l.name = ? "
                     "WHERE s.split = 'test'", (target,)).fetchall()
serr = np.array([r[0] for r in scored])
sds = [r[1] for r in scored if r[1] is not None]
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
pred = best[2](A["test"])
err = pred - b["test"]
print(json.dumps({
    "dataset": ds, "split": split, "conformers": int(nconf), "target": target,
    "test_molecules": test[0], "seconds": round(float(t1) - float(t0), 1),
    "se3": {"mae": round(test[1], 4), "rmse": round(test[2], 4)},
    "se3_scored": {"mae": round(float(np.abs(serr).mean()), 4),
                   "rmse": round(float(np.sqrt((serr ** 2).mean())), 4),
                   "test_molecules": int(len(serr)),
                   "mean_conformer_sd": round(float(np.mean(sds)), 4) if sds else None},
    "ridge_morgan": {"mae": round(float(np.abs(err).mean()), 4),
                     "rmse": round(float(np.sqrt((err ** 2).mean())), 4), "alpha": best[1],
                     "test_molecules": int(len(err)), "unreadable_smiles": unread},
}))
PY
    done
  done
done
