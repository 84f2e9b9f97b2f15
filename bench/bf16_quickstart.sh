#!/usr/bin/env bash
# bf16_quickstart.sh — what `precision: bf16` does to the quickstart's scores.
# Runs workflows/quickstart.yaml twice, as it is (fp32) and with
# --set precision=bf16: training runs in fp32 both times (bf16 on the CPU is
# for scoring), so the two runs must train the same model, which is checked
# (the checkpoints are compared byte for byte), and only the scoring differs.
# Prints one JSON object: the largest score change over the score spread of
# the fp32 run (the target: <= 1e-2), the mean change, the rank-stage top-20
# overlap, and each run's wall time.
#
#   bash bench/bf16_quickstart.sh [SE3SCREEN]     (default build/se3screen)
#
# Needs a processor with AVX512-BF16 (se3screen --version says whether it has
# it); elsewhere it says so and exits 2. WORK (default a new folder under
# ${TMPDIR:-/tmp}) holds the two runs.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
se3=$(realpath "${1:-$root/build/se3screen}")
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/bf16_quickstart.XXXXXX")}
mkdir -p "$work"
if ! "$se3" --version | grep -q 'bf16: yes'; then
  echo "bf16_quickstart: this processor has no AVX512-BF16 ($se3 --version)" >&2
  exit 2
fi

run() { # name, extra args...
  local name=$1
  shift
  local t0 t1
  t0=$(date +%s.%N)
  "$se3" run "$root/workflows/quickstart.yaml" --workdir "$work/$name" "$@" > "$work/$name.log" 2>&1 || {
    echo "bf16_quickstart: the $name run failed; the end of $work/$name.log:" >&2
    tail -n 20 "$work/$name.log" >&2
    exit 1
  }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }'
}
wall32=$(run fp32)
wall16=$(run bf16 --set precision=bf16)
grep -q 'in bf16' "$work/bf16.log" || { echo "bf16_quickstart: the bf16 run did not score in bf16 (see $work/bf16.log)" >&2; exit 1; }
for f in "$work"/fp32/models/*/*.ckpt; do
  cmp -s "$f" "$work/bf16/models/${f#"$work"/fp32/models/}" || {
    echo "bf16_quickstart: the two runs trained different models ($f); the comparison would not be of scoring alone" >&2
    exit 1
  }
done

q() { sqlite3 -readonly -separator ' ' "$work/fp32/screen.db" "ATTACH '$work/bf16/screen.db' AS b;" "$1"; }
read -r n spread dmax dmean < <(q "SELECT count(*), max(a.score) - min(a.score), max(abs(a.score - c.score)),
  avg(abs(a.score - c.score)) FROM scores a JOIN b.scores c USING (mol_id, model, target)")
overlap=$(q "SELECT count(*) FROM ranks a JOIN b.ranks c USING (mol_id)")
top=$(q "SELECT count(*) FROM ranks")
awk -v n="$n" -v s="$spread" -v dm="$dmax" -v da="$dmean" -v o="$overlap" -v t="$top" -v w32="$wall32" -v w16="$wall16" \
  -v cpu="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')" 'BEGIN {
  printf "{\"bench\":\"bf16_quickstart\",\"molecules\":%d,\"score_spread\":%.6g,\"max_abs_change\":%.6g,", n, s, dm
  printf "\"max_change_over_spread\":%.3e,\"mean_abs_change\":%.6g,\"top_overlap\":%d,\"top\":%d,", dm / s, da, o, t
  printf "\"wall_s_fp32\":%s,\"wall_s_bf16\":%s,\"cpu\":\"%s\"}\n", w32, w16, cpu
}'
