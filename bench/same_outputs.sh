#!/usr/bin/env bash
# same_outputs.sh OLD_BINARY NEW_BINARY [OUT]: a restructuring changes no
# result. Runs the quickstart, the active-learning workflow and the README's
# tutorial (tests/integration/test_tutorial.sh) with each binary, then
# compares what they wrote: every checkpoint byte for byte, hits.csv and
# hits.sdf (Open Babel's time stamp line masked), and every table of every
# screen.db row by row, with the columns that hold times, hosts, pids,
# paths and command lines masked (bench/same_outputs.py says which); both
# sides run in one folder, so paths match. Prints
# one JSON line; exit 1 on any difference. About 10 minutes on 2 cores.
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2")
src=$(cd "$(dirname "$0")/.." && pwd)
out=${3:-$(mktemp -d /tmp/same_outputs.XXXXXX)}
mkdir -p "$out"
for side in old new; do
  bin=${!side}
  # a side already run into OUT (its "done" file) is kept: the old side once, many new ones
  if [ -f "$out/$side/done" ] && [ "$(cat "$out/$side/done")" = "$(sha256sum < "$bin")" ]; then continue; fi
  # both sides run in the same folder (OUT/run), then move aside: paths,
  # and the molecule ids made from an input file's path, come out the same
  rm -rf "$out/$side" "$out/run" && mkdir -p "$out/run"
  start=$(date +%s)
  "$bin" run "$src/workflows/quickstart.yaml" --workdir "$out/run/quickstart" > "$out/run/quickstart.log" 2>&1
  "$bin" run "$src/workflows/active_learning.yaml" --workdir "$out/run/active_learning" > "$out/run/active.log" 2>&1
  bash "$src/tests/integration/test_tutorial.sh" "$bin" "$src" "$out/run/tutorial" > "$out/run/tutorial.log" 2>&1
  echo "$side: $(( $(date +%s) - start )) s" >&2
  mv "$out/run" "$out/$side"
  sha256sum < "$bin" > "$out/$side/done"
done
/usr/bin/python3 "$src/bench/same_outputs.py" "$out/old" "$out/new"
