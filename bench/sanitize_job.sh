#!/usr/bin/env bash
# The sanitizer job (tests/sanitize.sh, the ctest test `sanitizers`) timed as
# CI runs it: from an empty build folder (CI builds a clean clone: no
# compiler cache; the job sets no launcher), warnings as errors (CI=true).
#
#   bash bench/sanitize_job.sh [SOURCE_DIR] [BUILD_DIR] [SCRIPT]
#
# SCRIPT (default SOURCE_DIR/tests/sanitize.sh) lets another version of the
# job be timed against the same tree. BUILD_DIR (default
# $TMPDIR/se3bench_sanitize) is emptied first. Prints one JSON object: the
# wall seconds, the CPU seconds of the job and everything it started (user,
# sys: comparable where other work shares the cores, unlike the wall time),
# ctest's own test time, and its summary line; the exit status is the job's.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-$here}
bld=${2:-${TMPDIR:-/tmp}/se3bench_sanitize}
script=${3:-$src/tests/sanitize.sh}
rm -rf "$bld" "$bld.log"
out=$(mktemp)
TIMEFORMAT='%R %U %S'
# bash's `time` reports the job's children too (getrusage of the children)
t=$( { time CI=true bash "$script" "$src" "$bld" >"$out" 2>&1; echo "rc $?" >>"$out"; } 2>&1 )
rc=$(sed -n 's/^rc //p' "$out")
read -r wall user sys <<<"$t"
summary=$(grep -E 'tests passed|tests failed' "$out" | tail -1)
testtime=$(sed -n 's/^Total Test time (real) = *\([0-9.]*\) sec.*/\1/p' "$out")
printf '{"wall_s": %s, "user_s": %s, "sys_s": %s, "test_s": %s, "summary": "%s", "rc": %s}\n' \
  "$wall" "$user" "$sys" "${testtime:-null}" "$summary" "$rc"
[ "$rc" = 0 ] || grep -v "^rc " "$out" | tail -40 >&2
rm -f "$out"
exit "$rc"
