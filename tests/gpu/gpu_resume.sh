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
conv=${CONV:-}               # direct: the convolution's direct kernels (gpu_conv; default gemm)
. "$(dirname "$0")/quickstart.sh"
# Up to the training's input, once, then copied: both runs train from the same graphs.
gpu_quickstart "$se3" "$src" "$work" ref "    epochs: 4\n    checkpoint_every: 2"
cp -r "$work/ref" "$work/killed"

# The reference; the device is checked before its training starts.
start=$(date +%s.%N)
gpu_reference "$se3" "$work" "$work/ref.log"
full=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "uninterrupted training on $device in $precision (gpu_conv: ${conv:-the default}): ${full} s"

# One kill -9 in a state seen, not at a moment guessed: the run frozen while
# a mid-epoch checkpoint newer than every epoch's exists (training removes
# it once its epoch's checkpoint is written), so the next run must resume
# from it mid-epoch, on a fast GPU or a slow one.
ck="$work/killed/models/train-0"
mid_epoch() {
  local e
  [ -f "$ck/step.ckpt" ] || return 1
  for e in "$ck"/epoch-*.ckpt; do
    [ -e "$e" ] || continue
    [ "$ck/step.ckpt" -nt "$e" ] || return 1
  done
}
"$se3" run "$work/wf.yaml" --workdir "$work/killed" --until train --set run.progress=none >>"$work/killed.log" 2>&1 &
pid=$!
seen=0
t0=$SECONDS
while freeze $pid; do
  if mid_epoch; then
    kill -9 $pid
    seen=1
    break
  fi
  kill -CONT $pid
  [ $((SECONDS - t0)) -gt 600 ] && { kill -9 $pid; break; }
  sleep 0.02
done
wait $pid 2>/dev/null
rc=$?
[ $seen -eq 1 ] || { tail -20 "$work/killed.log"; echo "FAIL: the training was not seen mid-epoch (exit $rc)"; exit 1; }
echo "killed with a mid-epoch checkpoint at hand"

# Then kill -9 at random moments within the training (every outcome of a
# random moment is accepted: a run killed, or one that ended by itself with
# nothing left to interrupt), then let it finish
kills=0
for i in $(seq 1 40); do
  [ $kills -ge 6 ] && break
  "$se3" run "$work/wf.yaml" --workdir "$work/killed" --until train --set run.progress=none >>"$work/killed.log" 2>&1 &
  pid=$!
  sleep "$(awk -v f="$full" -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.3 + (r / 32768) * 0.3 * f }')"
  kill -9 $pid 2>/dev/null
  wait $pid 2>/dev/null
  rc=$? # what happened is read from the status, not guessed before the kill
  case $rc in
  137) kills=$((kills + 1)) ;;
  0) break ;; # it finished: nothing left to interrupt
  *) echo "a run failed before its kill (exit $rc)"; tail -20 "$work/killed.log"; exit 1 ;;
  esac
done
"$se3" run "$work/wf.yaml" --workdir "$work/killed" --until train --set run.progress=none >>"$work/killed.log" 2>&1 ||
  { tail -20 "$work/killed.log"; exit 1; }
resumed=$(grep -c "resuming from its checkpoint at step" "$work/killed.log")
echo "1 kill mid-epoch and $kills at random moments; $resumed runs resumed mid-epoch"
[ "$resumed" -ge 1 ] || { echo "FAIL: no run resumed mid-epoch (one was killed with a mid-epoch checkpoint)"; exit 1; }
fail=0
for f in best.ckpt epoch-4.ckpt epoch-3.ckpt; do
  if cmp -s "$work/ref/models/train-0/$f" "$work/killed/models/train-0/$f"; then
    echo "ok   $f identical"
  else
    echo "FAIL $f differs from the uninterrupted run's"
    fail=1
  fi
done
exit $fail
