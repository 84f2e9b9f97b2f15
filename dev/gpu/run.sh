#!/usr/bin/env bash
# dev/gpu/run.sh — on a lent GPU machine (the library's `device` tool), in
# one call: build se3screen with the CUDA backend against the kit of
# dev/gpu/kit.sh, run the `gpu` tests, the quickstart on the CPU and on the
# GPU, and model_bench on the GPU at
# NVIDIA's settings (../shared/notes/se3_reference.md): training at batch
# 240, inference at batch 1600, se3_qm9, bond and radius graphs, in each
# precision (first the fused kernels against the GEMM path in bf16). What it finds goes to $OUT (the tool brings it back):
#   device.txt      nvidia-smi, the compilers, what the build loads
#   build.log       the configure and build (its end on failure)
#   gpu_tests.txt   ctest -L gpu, every test's output (-V)
#   workflow.txt    the quickstart run on the CPU and on the GPU: times, log lines
#   bench.jsonl     one model_bench JSON line per setting
#   sanitize.txt    compute-sanitizer (memcheck, racecheck, synccheck,
#                   initcheck) over the op test and the training test
#   profile.txt     ncu on the convolution's kernels of one training step at
#                   batch 240, and nsys of a step where nsys is installed;
#                   each skipped with its reason where the machine refuses
#   summary.txt     what passed and failed, each phase's seconds
# (eight files: the device tool brings back at most eight.)
#
#   bash dev/gpu/run.sh [build] [test] [workflow] [bench] [sanitize] [profile] [all]
#                                                               (default all)
# Environment: OUT (default build-gpu/out), SE3_KIT_PREFIX (where the kit
# is unpacked, default /opt/se3kit), DEVICE (default cuda; cpu runs the same
# steps on the CPU, to check this script on a machine without a GPU),
# BENCH_REPS (default 5), BENCH_QUICK=1 (one setting per mode, for the
# check). The build is kept in build-gpu/ for later calls while the machine
# is warm. Each phase stops where its time is up (TEST_S, BENCH_S,
# SANITIZE_S, PROFILE_S), and no phase runs past DEADLINE_S seconds from the
# script's start (default 540), so the call ends inside the tool's 10
# minutes. SE3_ARCH: the CUDA architectures built (default 90, the H100 and
# H200 the tool lends). MPI is built where the machine has mpicc.
# SANITIZE_TOOLS: compute-sanitizer's tools run (default all four);
# PROFILE_CONV (default "fused gemm"), PROFILE_PRECISION (default bf16;
# ComputeWorkloadAnalysis gives the tensor pipes' use),
# PROFILE_LAUNCHES (kernels ncu measures a run, default 12), PROFILE_CSV=1
# (every kernel's time, DRAM and SM throughput as CSV, ncu_CONV_MODE.csv,
# instead of ncu's sections; ncu measured fewer than 11 kernels a second on
# an H100, so 1,500 did not finish in 140 s: a few hundred a call): the profile's;
# WORKFLOW_CPU=0: the quickstart on the GPU alone.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kit=$root/.gpukit
prefix=${SE3_KIT_PREFIX:-/opt/se3kit}
bld=$root/build-gpu
out=${OUT:-$bld/out}
device=${DEVICE:-cuda}
mkdir -p "$out" "$bld"
summary=$out/summary.txt
say() { echo "$*" | tee -a "$summary"; }
start=$(date +%s)
deadline=${DEADLINE_S:-540}
# seconds a phase may take: its own budget, cut to what the deadline leaves
budget_of() {
  local left=$((deadline - ($(date +%s) - start) - 5))
  [ "$left" -lt "$1" ] && echo $((left > 0 ? left : 0)) || echo "$1"
}
phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(all)
want() { local p; for p in "${phases[@]}"; do [ "$p" = "$1" ] || [ "$p" = all ] && return 0; done; return 1; }

# ---- the kit: Debian's packages unpacked into a prefix of their own ----
lib=$prefix/usr/lib/x86_64-linux-gnu
if [ ! -f "$prefix/.unpacked" ]; then
  ls "$kit"/*.deb >/dev/null 2>&1 || { say "no kit in $kit: run bash dev/gpu/kit.sh here first, carry .gpukit"; exit 2; }
  mkdir -p "$prefix"
  for f in "$kit"/*.deb; do dpkg-deb -x "$f" "$prefix" || { say "could not unpack $f"; exit 2; }; done
  touch "$prefix/.unpacked"
fi
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig:$prefix/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$prefix
export BABEL_LIBDIR=$lib/openbabel/3.1.1 BABEL_DATADIR=$prefix/usr/share/openbabel/3.1.1
pkgconf=$prefix/usr/bin/pkgconf
export PATH=/usr/local/cuda/bin:$PATH

# ---- build ----
if want build; then
  t0=$(date +%s)
  {
    nvidia-smi 2>&1 || echo "(no nvidia-smi)"
    nvcc --version 2>&1 | tail -2
    cc --version 2>&1 | head -1
    cmake --version | head -1
    grep PRETTY_NAME /etc/os-release
    echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
    for t in mpicc mpirun compute-sanitizer ncu nsys; do echo "$t: $(command -v $t || echo none)"; done
  } >"$out/device.txt"
  mpi=OFF
  command -v mpicc >/dev/null && mpi=ON
  if cmake -S "$root" -B "$bld" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSE3_CUDA=ON -DSE3_MPI=$mpi \
    -DSE3_CUDA_ARCHITECTURES="${SE3_ARCH:-90}" \
    -DSE3_CRITERION_TESTS=OFF -DPKG_CONFIG_EXECUTABLE="$pkgconf" >"$out/build.log" 2>&1 &&
    cmake --build "$bld" -j "$(nproc)" --target se3screen se3cuda test_backend_ops test_backend_ops_f64 \
      test_gpu_train model_bench >>"$out/build.log" 2>&1; then
    say "build: ok ($(($(date +%s) - t0)) s)"
  else
    tail -40 "$out/build.log"
    say "build: FAILED ($(($(date +%s) - t0)) s); build.log has it"
    exit 1
  fi
  # what the programs load: everything found, the kit's where the machine has none
  missing=0
  for b in "$bld/se3screen" "$bld/libse3cuda.so"; do
    echo "== ldd $b" >>"$out/device.txt"
    ldd "$b" >>"$out/device.txt" 2>&1
    if ldd "$b" | grep -q "not found"; then
      missing=1
      say "build: $b cannot load: $(ldd "$b" | grep 'not found' | tr -s ' \t' ' ' | tr '\n' ';')"
    fi
  done
  [ $missing = 0 ] || exit 1
  "$bld/se3screen" --version >>"$out/device.txt" 2>&1
fi

# ---- the gpu tests ----
if want test; then
  t0=$(date +%s)
  # (DEVICE is this script's; the GPU tests' scripts read their own DEVICE)
  if [ "$device" = cpu ]; then
    # the CPU's op test and the GPU tests' skip paths: this script's check
    env -u DEVICE ctest --test-dir "$bld" -R "test_backend_ops|test_gpu" -V --timeout "${TEST_S:-420}" \
      >"$out/gpu_tests.txt" 2>&1
  else
    env -u DEVICE timeout "$(budget_of "${TEST_S:-420}")" ctest --test-dir "$bld" -L gpu -V \
      --timeout "${TEST_S:-420}" >"$out/gpu_tests.txt" 2>&1
  fi
  rc=$?
  grep -E "tests passed|tests failed|Passed|Failed|Skipped|\*\*\*" "$out/gpu_tests.txt" | grep -E "Test +#|tests " | grep -v following |
    tee -a "$summary"
  say "tests: rc $rc ($(($(date +%s) - t0)) s)"
fi

# ---- the quickstart end to end, on the GPU and on the host's CPU ----
if want workflow; then
  t0=$(date +%s)
  w=$bld/quickstart
  rm -rf "$w" && mkdir -p "$w"
  cp -r "$root/workflows/data" "$w/"
  sed -e "s|^workdir: .*|workdir: run|" "$root/workflows/quickstart.yaml" >"$w/wf.yaml"
  : >"$out/workflow.txt"
  devs=("$device")
  [ "${WORKFLOW_CPU:-1}" = 1 ] && [ "$device" != cpu ] && devs=(cpu "$device")
  for dev in "${devs[@]}"; do
    rm -rf "$w/run"
    s0=$(date +%s%N)
    "$bld/se3screen" run "$w/wf.yaml" --set device="$dev" --set run.progress=none >"$w/$dev.log" 2>&1
    rc=$?
    ms=$((($(date +%s%N) - s0) / 1000000))
    {
      echo "== device: $dev, rc $rc, $ms ms"
      grep -E "runs on|memory for|: done|test \(|finished" "$w/$dev.log"
    } >>"$out/workflow.txt"
    say "workflow: device $dev rc $rc ($ms ms)"
  done
fi

# ---- the benchmark ----
if want bench; then
  t0=$(date +%s)
  budget=$(budget_of "${BENCH_S:-300}")
  reps=${BENCH_REPS:-5}
  runs=()
  # first, what issue 56 asks: the fused tensor-core kernels (gpu_conv:
  # fused) against the GEMM path, bf16, in the same call
  for g in bonds radius; do
    for c in fused gemm; do
      runs+=("--mode infer --batch 1600 --graph $g --precision bf16 --conv $c"
        "--mode train --batch 240 --graph $g --precision bf16 --conv $c")
    done
  done
  for p in fp32 tf32 fp16; do
    runs+=("--mode infer --batch 1600 --graph bonds --precision $p --conv fused"
      "--mode train --batch 240 --graph bonds --precision $p --conv fused")
  done
  for g in bonds radius; do
    for p in fp32 tf32 bf16 fp16; do runs+=("--mode train --batch 240 --graph $g --precision $p"); done
    for p in fp32 bf16 fp16; do runs+=("--mode infer --batch 1600 --graph $g --precision $p"); done
  done
  # the convolution on tensor cores (gpu_conv: gemm), the same settings
  for g in bonds radius; do
    for p in fp32 tf32; do runs+=("--mode train --batch 240 --graph $g --precision $p --conv gemm"); done
    for p in fp32 tf32 fp16; do runs+=("--mode infer --batch 1600 --graph $g --precision $p --conv gemm"); done
  done
  # what recording the step (CUDA graphs) gains: the same step plain, and padded without recording
  runs+=("--mode train --batch 240 --graph bonds --precision tf32 --steps plain"
    "--mode train --batch 240 --graph bonds --precision tf32 --steps padded")
  # and a data-parallel step (one process joined alone, SE3_COMM=mpi):
  # each step's calls in turn, or whole and recorded with NCCL's sums inside
  runs+=("--mode train --batch 240 --graph bonds --precision bf16 --conv gemm --dp eager"
    "--mode train --batch 240 --graph bonds --precision bf16 --conv gemm --dp whole")
  [ "${BENCH_QUICK:-0}" = 1 ] && runs=("--mode train --batch 16 --graph bonds" "--mode infer --batch 32 --graph radius")
  # BENCH_RUNS: lines of model_bench's options instead, each optionally
  # after SE3_CONV_CHUNK_MB=N (the GEMM path's chunk; the line then has "chunk_mb")
  if [ -n "${BENCH_RUNS:-}" ]; then
    mapfile -t runs <<<"$BENCH_RUNS"
  fi
  : >"$out/bench.jsonl"
  for r in "${runs[@]}"; do
    [ -n "$r" ] || continue
    if [ $(($(date +%s) - t0)) -gt "$budget" ]; then
      say "bench: time up before: $r"
      continue
    fi
    mb=
    if [[ $r == SE3_CONV_CHUNK_MB=* ]]; then
      mb=${r%% *}
      mb=${mb#*=}
      r=${r#* }
    fi
    dp=
    [[ $r == *--dp* ]] && dp=mpi # (a process joined to MPI alone)
    # shellcheck disable=SC2086
    if line=$(SE3_COMM=$dp SE3_CONV_CHUNK_MB=$mb "$bld/bench/model_bench" --device "$device" --model se3_qm9 --reps "$reps" $r 2>&1 |
      tail -1) && [ "${line:0:1}" = "{" ]; then
      [ -n "$mb" ] && line="${line%\}},\"chunk_mb\":$mb}"
      echo "$line" >>"$out/bench.jsonl"
    else
      say "bench: $r: $line"
    fi
  done
  say "bench: $(wc -l <"$out/bench.jsonl") of ${#runs[@]} settings ($(($(date +%s) - t0)) s)"
fi

# ---- compute-sanitizer over the op test and the training test ----
if want sanitize; then
  t0=$(date +%s)
  budget=$(budget_of "${SANITIZE_S:-240}")
  : >"$out/sanitize.txt"
  if ! command -v compute-sanitizer >/dev/null; then
    say "sanitize: skipped, no compute-sanitizer on the PATH"
  else
    # the op test in fp32 and in bf16 (its own kernels), then a few training
    # steps; the slow tools (racecheck) get what is left
    # SANITIZE_RUNS: lines "tool|program and arguments" instead of every tool
    # over the three programs
    runs=${SANITIZE_RUNS:-}
    if [ -z "$runs" ]; then
      for tool in ${SANITIZE_TOOLS:-memcheck synccheck initcheck racecheck}; do
        for prog in "tests/test_backend_ops cuda --precision bf16 --conv fused" "tests/test_backend_ops cuda" \
          "tests/test_backend_ops cuda --precision bf16" "tests/test_backend_ops cuda --precision bf16 --conv gemm" \
          "tests/test_gpu_train cuda"; do
          runs+="$tool|$prog"$'\n'
        done
      done
    fi
    while IFS='|' read -r tool prog; do
      [ -n "$tool" ] || continue
      {
        left=$((budget - ($(date +%s) - t0)))
        if [ $left -lt 10 ]; then
          say "sanitize: $tool $prog: time up"
          continue
        fi
        echo "== $tool: $prog" >>"$out/sanitize.txt"
        # shellcheck disable=SC2086
        timeout "$left" compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 20 \
          "$bld"/$prog >"$bld/san.log" 2>&1
        rc=$?
        # the sanitizer's lines and the program's summary, not its case lines
        grep -E "^=========|FAIL|passed|failed|skipped" "$bld/san.log" | head -200 >>"$out/sanitize.txt"
        case $rc in
          0) say "sanitize: $tool $prog: clean" ;;
          9) say "sanitize: $tool $prog: ERRORS ($(grep -m1 -o 'ERROR SUMMARY: [0-9]* error' "$bld/san.log"))" ;;
          124) say "sanitize: $tool $prog: time up after ${left} s" ;;
          *) say "sanitize: $tool $prog: rc $rc ($(grep -m1 -E 'FAIL|rror' "$bld/san.log"))" ;;
        esac
      } </dev/null
    done <<<"$runs"
  fi
  say "sanitize: ($(($(date +%s) - t0)) s)"
fi

# ---- ncu on the convolution, nsys of a step ----
if want profile; then
  t0=$(date +%s)
  budget=$(budget_of "${PROFILE_S:-120}")
  : >"$out/profile.txt"
  if ! command -v ncu >/dev/null; then
    say "profile: ncu skipped, not on the PATH"
  else
    # one plain (unrecorded) training step at batch 240 and one inference
    # at batch 1600; the convolution's kernels and the GEMMs beside them
    # (each path of the convolution: its kernels, or cuBLAS's GEMMs and conv_u_fill)
    for conv in ${PROFILE_CONV:-fused gemm}; do
      for mode in "train --batch 240" "infer --batch 1600"; do
        left=$((budget - ($(date +%s) - t0)))
        [ $left -lt 15 ] && { say "profile: ncu $conv $mode: time up"; continue; }
        echo "== ncu: model_bench --conv $conv --mode $mode" >>"$out/profile.txt"
        if [ "${PROFILE_CSV:-0}" = 1 ]; then # every kernel of the run, three figures each, as CSV
          # shellcheck disable=SC2086
          timeout "$left" ncu --clock-control none --csv --launch-count "${PROFILE_LAUNCHES:-12}" --metrics \
            gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed \
            "$bld/bench/model_bench" --device cuda --model se3_qm9 --graph bonds --reps 1 --profile 0 --steps plain \
            --conv $conv --precision "${PROFILE_PRECISION:-bf16}" --mode $mode >"$out/ncu_${conv}_${mode%% *}.csv" 2>"$bld/ncu.log"
          say "profile: ncu $conv $mode (csv): rc $?"
          continue
        fi
        # shellcheck disable=SC2086
        timeout "$left" ncu --clock-control none --kernel-name regex:'conv|gemm|radial' --launch-skip 0 \
          --launch-count "${PROFILE_LAUNCHES:-12}" --section SpeedOfLight --section Occupancy --section LaunchStats \
          --section ComputeWorkloadAnalysis \
          "$bld/bench/model_bench" --device cuda --model se3_qm9 --graph bonds --reps 1 --profile 0 \
          --steps plain --conv $conv --precision "${PROFILE_PRECISION:-bf16}" --mode $mode >"$bld/ncu.log" 2>&1
        rc=$?
        grep -vE "^\s*$|^----" "$bld/ncu.log" | head -400 >>"$out/profile.txt"
        say "profile: ncu $conv $mode: rc $rc"
      done
    done
  fi
  if command -v nsys >/dev/null; then
    left=$((budget - ($(date +%s) - t0)))
    echo "== nsys: model_bench --mode train --batch 240 (recorded steps)" >>"$out/profile.txt"
    timeout "$left" nsys profile -o "$bld/step" --force-overwrite true --stats=true \
      "$bld/bench/model_bench" --device cuda --model se3_qm9 --graph bonds --reps 2 --profile 0 \
      --mode train --batch 240 >"$bld/nsys.log" 2>&1
    say "profile: nsys: rc $?"
    head -300 "$bld/nsys.log" >>"$out/profile.txt"
  else
    say "profile: nsys skipped, not on the PATH"
  fi
  say "profile: ($(($(date +%s) - t0)) s)"
fi
