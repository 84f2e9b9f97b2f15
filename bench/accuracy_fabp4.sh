#!/usr/bin/env bash
# accuracy_fabp4.sh — DUD-E FABP4 actives vs decoys with the SE(3)-Transformer
# as a classifier: ROC-AUC, PR-AUC and EF1% on a held-out split. Prints one
# JSON object.
#
#   bash bench/accuracy_fabp4.sh [SE3SCREEN [ACCURACY_BENCH]]
#   (defaults build/se3screen, build/bench/accuracy_bench;
#    or cmake --build build --target bench_accuracy_fabp4)
#
# Data: ../shared/data/screening/dude_fabp4/{actives,decoys}_final.mol2.gz.
# DUD-E lists several protomers of a compound under one name; only the first
# record of each name is kept (so a compound is counted once, and cannot sit
# in both the training and the test split), then ingest drops InChIKey
# duplicates. The split is random with a fixed seed (55/15/30, seed 7, in
# bench/workflows/accuracy_fabp4.yaml); the test metrics are the train
# stage's evaluation of its best checkpoint (by validation loss).
#
# Environment (all optional):
#   FABP4_DIR  folder with the two .mol2.gz   (default ../shared/data/screening/dude_fabp4)
#   WORK       where the data and run/ go     (default a new folder under ${TMPDIR:-/tmp}; kept)
#   EPOCHS, BATCH, LR, MODEL                  override the recipe's epochs, batch_size, lr, model
#   SPLIT=scaffold  split by scaffold (stages.train.split.method; needs a se3screen that has it)
#   SET="k=v k=v"   any further --set overrides
# Rerunning with the same WORK resumes.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
se3=$(realpath "${1:-$root/build/se3screen}")
acc=$(realpath "${2:-$root/build/bench/accuracy_bench}")
src=${FABP4_DIR:-$root/../shared/data/screening/dude_fabp4}
for f in actives_final.mol2.gz decoys_final.mol2.gz; do
  [ -f "$src/$f" ] || { echo "accuracy_fabp4: $src/$f not found (set FABP4_DIR)" >&2; exit 2; }
done
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/accuracy_fabp4.XXXXXX")}
mkdir -p "$work"

# First record per compound name; prints "records kept" for the file.
first_per_name() {
  gzip -dc "$1" | awk -v out="$2" '
    /^@<TRIPOS>MOLECULE/ { rec++; keep = -1 }
    keep == -1 && prev ~ /^@<TRIPOS>MOLECULE/ { keep = !seen[$0]++; kept += keep; if (keep) print prev > out }
    keep == 1 { print > out }
    { prev = $0 }
    END { printf "%d %d\n", rec, kept }'
}
if [ ! -s "$work/decoys.mol2" ]; then
  read -r a_rec a_kept < <(first_per_name "$src/actives_final.mol2.gz" "$work/actives.mol2")
  read -r d_rec d_kept < <(first_per_name "$src/decoys_final.mol2.gz" "$work/decoys.mol2")
  printf '{"active_records": %d, "active_compounds": %d, "decoy_records": %d, "decoy_compounds": %d}\n' \
    "$a_rec" "$a_kept" "$d_rec" "$d_kept" > "$work/prepare.json"
fi
cp "$here/workflows/accuracy_fabp4.yaml" "$work/accuracy_fabp4.yaml"

sets=()
[ -n "${EPOCHS:-}" ] && sets+=(--set "train.epochs=$EPOCHS")
[ -n "${BATCH:-}" ] && sets+=(--set "train.batch_size=$BATCH")
[ -n "${LR:-}" ] && sets+=(--set "train.lr=$LR")
[ -n "${MODEL:-}" ] && sets+=(--set "train.model=$MODEL")
[ -n "${SPLIT:-}" ] && sets+=(--set "train.split.method=$SPLIT")
for kv in ${SET:-}; do sets+=(--set "$kv"); done

echo "accuracy_fabp4: data and run in $work; log in $work/run.log" >&2
t0=$(date +%s.%N)
"$se3" run "$work/accuracy_fabp4.yaml" ${sets[@]+"${sets[@]}"} > "$work/run.log" 2>&1 || {
  echo "accuracy_fabp4: se3screen run failed; the end of $work/run.log:" >&2
  tail -n 20 "$work/run.log" >&2
  exit 1
}
t1=$(date +%s.%N)
wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
"$acc" "$work/run/screen.db" --name accuracy_fabp4 \
  --field "wall_s=$wall" --field "threads=$(nproc)" --json "prepare=$(cat "$work/prepare.json")" \
  --json "rejected=$("$se3" query "$work/run/screen.db" "SELECT count(*) FROM rejects" --csv | tail -n 1)"
