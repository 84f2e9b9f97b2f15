#!/usr/bin/env bash
# Two se3screen processes on the same cores: the quickstart's training run
# alone, then two copies of it at once (as two shards, two users or two
# tests on one machine), for each way OpenMP's idle threads may wait:
#
#   se3screen       what se3screen sets when the user sets nothing
#                   (GOMP_SPINCOUNT=1000, models/cpu/isa.h)
#   libgomp         libgomp's own default (300,000 spins, then sleep)
#   passive         OMP_WAIT_POLICY=passive (sleep at once)
#   active          OMP_WAIT_POLICY=active (spin without end)
#
#   bash bench/contention.sh [SE3SCREEN] [TMPDIR] [ROUNDS]
#
# Prints one JSON object per setting: seconds alone and for the pair (the
# slower of the two; medians over ROUNDS, default 3), and slowdown = pair /
# alone. Two processes that share the cores fairly take about 2x alone;
# the figures are comparable within one run of this script only.
set -euo pipefail
here=${SE3_REPO:-$(cd "$(dirname "$0")/.." && pwd)}
se3=${1:-$here/build/se3screen}
tmp=${2:-${TMPDIR:-/tmp}/se3bench_contention}
rounds=${3:-3}
se3=$(cd "$(dirname "$se3")" && pwd)/$(basename "$se3")
rm -rf "$tmp"
mkdir -p "$tmp"
sed "s#data/#$here/workflows/data/#g; s#^workdir: .*#workdir: $tmp/base#" "$here/workflows/quickstart.yaml" >"$tmp/wf.yaml"
"$se3" run "$tmp/wf.yaml" --until graph >/dev/null 2>&1

now() { date +%s.%N; }
# train W: the train stage in a fresh copy of the prepared workdir; prints seconds
train() {
  rm -rf "$tmp/$1"
  cp -r "$tmp/base" "$tmp/$1"
  local t0
  t0=$(now)
  env "${envs[@]}" "$se3" run "$tmp/wf.yaml" --workdir "$tmp/$1" --stage train >"$tmp/$1.log" 2>&1
  awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.3f\n", b - a}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

for setting in se3screen libgomp passive active; do
  case $setting in
  se3screen) envs=(-u GOMP_SPINCOUNT -u OMP_WAIT_POLICY) ;;
  libgomp) envs=(-u OMP_WAIT_POLICY GOMP_SPINCOUNT=300000) ;;
  passive) envs=(-u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive) ;;
  active) envs=(-u GOMP_SPINCOUNT OMP_WAIT_POLICY=active) ;;
  esac
  alone=() pair=()
  for _ in $(seq "$rounds"); do
    alone+=("$(train a)")
    train p1 >"$tmp/p1.t" &
    train p2 >"$tmp/p2.t"
    wait
    pair+=("$(printf '%s\n%s\n' "$(cat "$tmp/p1.t")" "$(cat "$tmp/p2.t")" | sort -g | tail -1)")
  done
  a=$(printf '%s\n' "${alone[@]}" | median)
  p=$(printf '%s\n' "${pair[@]}" | median)
  printf '{"bench": "contention", "setting": "%s", "waiting": "%s", "alone_s": %.2f, "pair_s": %.2f, "slowdown": %.2f, "rounds": %d, "alone_all": [%s], "pair_all": [%s]}\n' \
    "$setting" "$(env "${envs[@]}" "$se3" --version | sed -n 's/.*waiting: //p')" "$a" "$p" "$(awk -v p="$p" -v a="$a" 'BEGIN {print p / a}')" "$rounds" \
    "$(printf '%.2f,' "${alone[@]}" | sed 's/,$//')" "$(printf '%.2f,' "${pair[@]}" | sed 's/,$//')"
done
rm -rf "$tmp"
