#!/usr/bin/env bash
# NCCL on a GPU: a process joined to MPI alone (SE3_COMM=mpi) trains with
# the data-parallel paths, its gradient summed by NCCL on the GPU (a
# one-rank communicator: NCCL refuses two ranks on one GPU), and ends with
# checkpoints byte-identical to a plain GPU run's; so does one with Adam's
# moments sharded (NCCL's reduce-scatter and all-gather). With two GPUs or more,
# two processes (mpirun -np 2, one GPU each) also train, and their final
# validation loss must match one process's to 1e-4; with one GPU that check
# is reported as not run.
#   usage: tests/gpu/gpu_nccl.sh SE3SCREEN SOURCE_DIR WORK_DIR
# Exit 77 (ctest: skipped) when device: cuda cannot run here, or this
# se3screen has no MPI. DEVICE=cpu
# runs the one-process check on the CPU (summed by MPI: a check of this
# script, not of NCCL).
set -uo pipefail
se3=$1 src=$2 work=$3
device=${DEVICE:-cuda}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. "$(dirname "$0")/quickstart.sh"
if "$se3" --version 2>/dev/null | grep -q "^mpi: none"; then # (dev/gpu/run.sh builds without MPI)
  echo "SKIPPED: this se3screen was built without MPI: the data-parallel paths cannot run"
  exit 77
fi
gpu_quickstart "$se3" "$src" "$work" plain "    epochs: 2"
cp -r "$work/plain" "$work/alone"
cp -r "$work/plain" "$work/sharded"
cp -r "$work/plain" "$work/two"
gpu_reference "$se3" "$work" "$work/plain.log"

SE3_COMM=mpi "$se3" run "$work/wf.yaml" --workdir "$work/alone" --until train --set run.progress=none \
  >"$work/alone.log" 2>&1 || { cat "$work/alone.log"; exit 1; }
want=NCCL
[ "$device" = cpu ] && want=MPI
grep -q "training on 1 process (.*summed by $want" "$work/alone.log" ||
  { echo "FAIL: the gradients were not summed by $want:"; grep "training on" "$work/alone.log"; exit 1; }
# and Adam's moments sharded (one slice): NCCL's reduce-scatter and all-gather
SE3_COMM=mpi "$se3" run "$work/wf.yaml" --workdir "$work/sharded" --until train --set run.progress=none \
  --set stages.train.shard_optimizer=true >"$work/sharded.log" 2>&1 || { cat "$work/sharded.log"; exit 1; }
fail=0
for wd in alone sharded; do
  for f in best.ckpt epoch-2.ckpt; do
    if cmp -s "$work/plain/models/train-0/$f" "$work/$wd/models/train-0/$f"; then
      echo "ok   $wd: $f identical through $want"
    else
      echo "FAIL $wd: $f differs from the plain run's"
      fail=1
    fi
  done
done

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$device" = cuda ] && [ "${gpus:-0}" -ge 2 ] && command -v mpirun >/dev/null; then
  mpirun -np 2 "$se3" run "$work/wf.yaml" --workdir "$work/two" --until train --set run.progress=none \
    >"$work/two.log" 2>&1 || { tail -20 "$work/two.log"; exit 1; }
  q="SELECT loss FROM metrics WHERE split='valid' ORDER BY epoch DESC LIMIT 1"
  /usr/bin/python3 - "$work/plain/screen.db" "$work/two/screen.db" "$q" <<'PY' || fail=1
import sqlite3, sys
a, b = (sqlite3.connect(p).execute(sys.argv[3]).fetchone()[0] for p in sys.argv[1:3])
ok = abs(a - b) <= 1e-4 * abs(a)
print("%s 2 GPUs: validation loss %.6g, 1 GPU %.6g" % ("ok  " if ok else "FAIL", b, a))
sys.exit(0 if ok else 1)
PY
else
  echo "not run: the 2-process check needs 2 GPUs (this machine has ${gpus:-0})"
fi
exit $fail
