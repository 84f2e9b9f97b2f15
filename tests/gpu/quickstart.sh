# quickstart.sh — sourced by the GPU scripts: the quickstart on `device`,
# its training changed, in a fresh WORK_DIR.
#   gpu_quickstart SE3SCREEN SOURCE_DIR WORK_DIR WORKDIR_NAME 'TRAIN_LINES'
# writes WORK_DIR/wf.yaml (workdir WORKDIR_NAME, `device: $device`,
# `precision: $precision` (fp32 when unset) and `gpu_conv: $conv` (the
# default's when unset), the
# quickstart's `epochs: 10` line replaced by TRAIN_LINES) and runs it up to
# the graphs, so every run of the script trains from the same graphs.
#   gpu_reference SE3SCREEN WORK_DIR LOG
# runs the training; exits the script with 77 (ctest: skipped) when
# device: $device cannot run here, with 1 when the run fails.
gpu_quickstart() {
  local se3=$1 src=$2 work=$3 name=$4 lines=$5
  rm -rf "$work" && mkdir -p "$work" || exit 1
  cp -r "$src/workflows/data" "$work/" || exit 1
  sed -e "s|^workdir: .*|workdir: $name|" \
    -e "s|^workflow: quickstart|workflow: quickstart\ndevice: $device\nprecision: ${precision:-fp32}${conv:+\\ngpu_conv: $conv}|" \
    -e "s|    epochs: 10|$lines\n    ensemble: 1|" "$src/workflows/quickstart.yaml" >"$work/wf.yaml"
  grep -qF "$(printf '%b' "$lines" | head -1)" "$work/wf.yaml" || { echo "could not adapt the quickstart"; exit 1; }
  "$se3" run "$work/wf.yaml" --until graph --set run.progress=none >"$work/graph.log" 2>&1 ||
    { cat "$work/graph.log"; exit 1; }
}

gpu_reference() {
  local se3=$1 work=$2 log=$3 rc
  "$se3" run "$work/wf.yaml" --until train --set run.progress=none >"$log" 2>&1
  rc=$?
  if [ $rc -eq 2 ] && grep -q "device: $device was asked for" "$log"; then
    tail -1 "$log"
    echo "SKIPPED: device: $device cannot run here"
    exit 77
  fi
  [ $rc -eq 0 ] || { cat "$log"; exit 1; }
}

#   freeze PID
# stops process PID (SIGSTOP) and waits until each of its threads is
# stopped, so that what the test sees next cannot change under it (kill
# -CONT PID thaws it; a signal sent meanwhile lands in the state seen);
# status 1 when PID has ended (gone, or a zombie not yet waited for). A
# test that waits for a state instead of sleeping a guessed time (issue
# 30) looks while the process is frozen.
freeze() {
  local pid=$1 f s all
  kill -STOP "$pid" 2>/dev/null || return 1
  for _ in $(seq 100000); do
    [ -d "/proc/$pid/task" ] || return 1
    all=1
    for f in /proc/"$pid"/task/*/stat; do
      s=$(sed 's/.*) \(.\).*/\1/' "$f" 2>/dev/null) || continue
      case $s in
      T | t) ;;
      Z | X) return 1 ;;
      *) all=0 ;;
      esac
    done
    [ $all -eq 1 ] && return 0
    sleep 0.002
  done
  echo "process $pid did not stop after SIGSTOP"
  return 1
}
