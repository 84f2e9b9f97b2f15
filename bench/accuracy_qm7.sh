#!/usr/bin/env bash
# accuracy_qm7.sh — QM7 u0_atom with the SE(3)-Transformer, beside the mean
# predictor and a linear model on element counts. Prints one JSON object.
#
#   bash bench/accuracy_qm7.sh [SE3SCREEN [ACCURACY_BENCH]]
#   (defaults build/se3screen, build/bench/accuracy_bench;
#    or cmake --build build --target bench_accuracy_qm7)
#
# Data: ../shared/data/qm7/gdb7.tar.gz (QM7 by way of deepchem), extracted and
# paired title-by-title with its u0_atom by bench/qm7_prepare.sh (which leaves
# out the 4 hydrogen-only junk records and the 9 C7H16 records missing
# hydrogens); the split is random with a fixed seed (80/10/10, seed 7, in
# bench/workflows/accuracy_qm7.yaml). The recipe (the workflow's train keys)
# is meant to finish within 60 minutes on 2 cores.
#
# Environment (all optional):
#   QM7_DIR   folder with gdb7.tar.gz          (default ../shared/data/qm7 beside the checkout)
#   WORK      where the data and run/ go       (default a new folder under ${TMPDIR:-/tmp}; kept)
#   EVERY     keep only every EVERY-th record  (short validation runs; default 1 = all)
#   EPOCHS, BATCH, LR, MODEL                   override the recipe's epochs, batch_size, lr, model
#   ATOMREF=0 learn u0_atom itself instead of its residual over per-element
#             reference energies (stages.train.atomref, on in the recipe)
#   SET="k=v k=v"  any further --set overrides, e.g. SET="train.arch.degrees=2"
# Rerunning with the same WORK resumes (the pipeline skips finished work).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
se3=$(realpath "${1:-$root/build/se3screen}")
acc=$(realpath "${2:-$root/build/bench/accuracy_bench}")
qm7=${QM7_DIR:-$root/../shared/data/qm7}
[ -f "$qm7/gdb7.tar.gz" ] || { echo "accuracy_qm7: $qm7/gdb7.tar.gz not found (set QM7_DIR)" >&2; exit 2; }
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/accuracy_qm7.XXXXXX")}
mkdir -p "$work"
every=${EVERY:-1}

if [ ! -s "$work/qm7.csv" ]; then
  bash "$here/qm7_prepare.sh" "$qm7" "$work" "$every" 0 > "$work/prepare.json" 2> "$work/prepare.log"
fi
cp "$here/workflows/accuracy_qm7.yaml" "$work/accuracy_qm7.yaml"

sets=()
[ -n "${EPOCHS:-}" ] && sets+=(--set "train.epochs=$EPOCHS")
[ -n "${BATCH:-}" ] && sets+=(--set "train.batch_size=$BATCH")
[ -n "${LR:-}" ] && sets+=(--set "train.lr=$LR")
[ -n "${MODEL:-}" ] && sets+=(--set "train.model=$MODEL")
[ "${ATOMREF:-1}" = 0 ] && sets+=(--set "train.atomref=false")
for kv in ${SET:-}; do sets+=(--set "$kv"); done

echo "accuracy_qm7: data and run in $work; log in $work/run.log" >&2
t0=$(date +%s.%N)
"$se3" run "$work/accuracy_qm7.yaml" ${sets[@]+"${sets[@]}"} > "$work/run.log" 2>&1 || {
  echo "accuracy_qm7: se3screen run failed; the end of $work/run.log:" >&2
  tail -n 20 "$work/run.log" >&2
  exit 1
}
t1=$(date +%s.%N)
wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
"$acc" "$work/run/screen.db" --name accuracy_qm7 \
  --field "wall_s=$wall" --field "every=$every" --field "atomref=${ATOMREF:-1}" \
  --field "threads=$(nproc)" --json "prepare=$(cat "$work/prepare.json")"
