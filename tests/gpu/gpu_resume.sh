#!/usr/bin/env bash
# GPU resume: kill -9 during training on the GPU, resume, and end with
# checkpoints byte-identical to an uninterrupted GPU run's (the CUDA backend
# is deterministic: backend.h). The quickstart's training with a checkpoint
# every 2 steps, so many kills land mid-epoch.
#   usage: tests/gpu/gpu_resume.sh SE3SCREEN SOURCE_DIR WORK_DIR
# Exit 77 (ctest: skipped) when device: cuda cannot run here: this build has
# no CUDA backend or the machine no usable GPU. DEVICE=cpu runs the same
# check on the CPU (a check of this script, not of a GPU).
set -uo pipefail
se3=$1 src=$2 work=$3
device=${DEVICE:-cuda}
precision=${PRECISION:-fp32} # fp16: the loss scale is part of what must resume bit for bit
. "$(dirname "$0")/quickstart.sh"
# Up to the training's input, once, then copied: both runs train from the same graphs.
gpu_quickstart "$se3" "$src" "$work" ref "    epochs: 4\n    checkpoint_every: 2"
cp -r "$work/ref" "$work/killed"

# The reference; the device is checked before its training starts.
start=$(date +%s.%N)
gpu_reference "$se3" "$work" "$work/ref.log"
full=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "uninterrupted training on $device in $precision: ${full} s"

# kill -9 at random moments within the training, then let it finish
kills=0
for i in $(seq 1 40); do
  [ $kills -ge 6 ] && break
  "$se3" run "$work/wf.yaml" --workdir "$work/killed" --until train --set run.progress=none >>"$work/killed.log" 2>&1 &
  pid=$!
  sleep "$(awk -v f="$full" -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.3 + (r / 32768) * 0.3 * f }')"
  if kill -0 $pid 2>/dev/null; then
    kill -9 $pid
    wait $pid 2>/dev/null
    kills=$((kills + 1))
  else
    wait $pid || { echo "a run failed before its kill"; tail -20 "$work/killed.log"; exit 1; }
    break # it finished: nothing left to interrupt
  fi
done
"$se3" run "$work/wf.yaml" --workdir "$work/killed" --until train --set run.progress=none >>"$work/killed.log" 2>&1 ||
  { tail -20 "$work/killed.log"; exit 1; }
resumed=$(grep -c "resuming from its checkpoint at step" "$work/killed.log")
echo "$kills kills, $resumed resumed mid-epoch"
[ $kills -ge 2 ] || { echo "FAIL: only $kills runs were killed"; exit 1; }
[ "$resumed" -ge 1 ] || { echo "FAIL: no run resumed mid-epoch"; exit 1; }
fail=0
for f in best.ckpt epoch-3.ckpt epoch-2.ckpt; do
  if cmp -s "$work/ref/models/train-0/$f" "$work/killed/models/train-0/$f"; then
    echo "ok   $f identical"
  else
    echo "FAIL $f differs from the uninterrupted run's"
    fail=1
  fi
done
exit $fail
