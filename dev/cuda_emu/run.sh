#!/usr/bin/env bash
# dev/cuda_emu — runs the CUDA backend (models/cuda/) on the host, without a
# GPU, and compares every operation of its table with the CPU backend (the
# suite's op table, tests/gpu/test_backend_ops.c, linked with the emulated
# objects), then whole models' forward, backward and Adam step and fp16's
# recorded steps (check.c: what the op table cannot express).
#
# How: launch.py rewrites each kernel launch `k<<<grid, block, ...>>>(args)`
# into a call of inc/cuda_runtime.h's emulator, where a block's threads are
# fibers of one OS thread, run in turn from barrier to barrier
# (inc/emu_fiber.h; __syncthreads switches to the next), blocks run one after another,
# __shared__ arrays are statics poisoned afresh for every block (NaN: a read
# before any thread of the block wrote, a barrier missing or misplaced, shows
# in every block) and device memory is host memory (poisoned with NaN when
# allocated, so reading what no kernel wrote shows);
# inc/cublas_v2.h does cublasSgemm naively by its column-major definition,
# inc/cublasLt.h the dense layers' matmul with its bias epilogue (EMU_LT=0:
# its heuristic offers nothing, so the layers take their other path);
# uploads' pinned staging halves are 64 KiB (32 MiB on a GPU), so batches
# cross from one half to the other (copies finish at once here, so a reuse
# of a half too early would not show).
# The kernels' index arithmetic, tiling, shared-memory use and the GEMMs'
# transposes are checked this way; timing, warp behaviour, real cuBLAS and
# anything only a GPU does are not. A development tool, not part of the
# build; the suite runs a reduced set (tests/gpu/cuda_emu.sh).
# Stricter than a GPU where the backend would degrade silently there: work
# on the legacy default stream (cudaMemcpy, cudaMemset, cudaStreamCreate,
# cudaDeviceSynchronize are compile errors; a launch, copy or event without
# the backend's non-blocking stream stops the run), and a call a stream
# capture refuses (cudaMalloc, a synchronous copy, a wait) stops the run
# naming it (EMU_CAPTURE=lenient: a GPU's invalidated capture instead).
# As strict as a GPU at a launch: over CUDA's limits (threads a block, block
# and grid dimensions, 48 KiB of shared memory) it does not run and the next
# cudaGetLastError gives CUDA's code; launch.py stops on a launch not checked
# at once (CU_LAUNCHED) and on a __shared__ not at its function's top level.
# EMU_ASAN=1 (with EMU_TESTS=0 or ops): the emulated objects, check.c, the op
# table and the self-test with AddressSanitizer; allocations are exactly
# their size, so a kernel's access past the end of a buffer stops the run
# with ASan's report (ASAN_OPTIONS defaults to detect_leaks=0: check.c frees
# little).
# First, the emulator's self-test (selftest.cu, launch_test.py): broken
# kernels and sources it must catch, correct ones it must pass (with
# EMU_ASAN=1, a float written past a buffer too), stream captures forked and
# joined or not, work outside a capture stopping the process, and with MPI
# in the build NCCL's calls inside CUDA graphs (selftest_mpi under mpirun
# -np 2, and EMU_NCCL_FAULT at a replay). Then `devices` (devices.c): the
# GPU a process opens by node-local rank (modulo the GPUs it sees) or by
# index, each case with EMU_DEVICES GPUs visible (EMU_DEVICES=N, default 1,
# sets that for any run here). Then the op table, test_backend_ops cuda,
# built here against the emulated objects (SE3_OPS_LINKED), once per
# precision and convolution path of EMU_OPS (default every precision on
# each path of EMU_CONV, "direct gemm fused"; e.g. EMU_OPS="fp32:direct
# bf16:gemm", the suite's; EMU_OPS_QUICK=1: with --quick, the suite's too,
# the qm9-wide convolutions on a small graph); SE3_CONV_CHUNK_MB=1 makes the
# GEMM path's chunks a few edges. Then `check` in EMU_PRECISION (fp32|tf32|bf16|fp16, default
# fp32; the emulated cuBLAS rounds the products' inputs as tensor cores
# would).
#
#   usage: dev/cuda_emu/run.sh [BUILD_DIR]   (default build; needs its libse3nn.a)
# Then, unless EMU_TESTS=0 or ops, the suite's test_gpu_train and a small
# workflow with device: cuda (against the same on the CPU;
# EMU_TESTS=workflow: that alone, no op table) run against the emulated GPU:
# the same sources as a module beside copies of test_gpu_train and
# se3screen. Their verdicts there say nothing about a real GPU's warps,
# cuBLAS or driver.
# With MPI in the build, the collectives are compiled against inc/nccl.h,
# NCCL emulated over MPI (a process an emulated GPU), and a second module
# without NCCL is built beside (module_host/: the gradient through the
# host). EMU_TESTS=nccl builds the modules and runs nccl.sh alone (two
# emulated GPUs under mpirun -np 2, and NCCL's failure paths; no check).
# EMU_OUT: the output folder (default BUILD_DIR/cuda_emu). EMU_JOBS: the
# compilers at once (default nproc). EMU_CHECK="model deg4 steps":
# check's groups to run (default all; tests/gpu/cuda_emu.sh's bf16 run
# takes "model"). Each step prints its seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bld=$(cd "${1:-$root/build}" && pwd)
out=${EMU_OUT:-$bld/cuda_emu}
# EMU_ASAN=1: the emulated objects, check.c and the self-test built and
# linked with AddressSanitizer (the static libraries stay as built).
asan=()
if [ "${EMU_ASAN:-0}" = 1 ]; then
  if [ "${EMU_TESTS:-1}" != 0 ] && [ "${EMU_TESTS:-1}" != ops ]; then
    echo "run.sh: EMU_ASAN=1 covers the self-test, check and the op table only: run it with EMU_TESTS=0 or ops" >&2
    exit 2
  fi
  asan=(-fsanitize=address -fno-omit-frame-pointer)
  # detect_leaks=0: check.c's tests free little of what they allocate (host
  # arrays and the backend's buffers, some 460 at exit): not what this checks.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
fi
rm -rf "$out" && mkdir -p "$out/gen" "$out/obj" "$out/selftest"
out=$(cd "$out" && pwd)
python3 "$here/launch.py" "$root/models/cuda" "$out/gen"
cat >"$out/gen/emu.cpp" <<'X'
#include "cuda_runtime.h"
#include "cublas_v2.h"
#include "cublasLt.h"
#include "emu_fiber.h"
dim3 emu_grid, emu_block, emu_bidx;
extern "C" long emu_lt_count(void) { return emu_lt_runs(); }
X
# the data-parallel hooks (common/comm.c) come along; with MPI when the
# build has it, and then the collectives with inc/nccl.h's NCCL over MPI
mpi=() nccl=()
if nm "$bld/libse3common.a" 2>/dev/null | grep " U MPI_" >/dev/null; then  # not -q: nm would die of SIGPIPE under pipefail
  read -r -a mpi <<<"$(mpicc --showme:link)"
  read -r -a nccl <<<"-DSE3_HAVE_NCCL=1 $(mpicc --showme:compile)"
fi
# the emulated sources' flags (position-independent: the same objects make
# check and the module); -g1: line tables (ASan's reports and backtraces
# name file and line) at two thirds of -g's compile time (EMU_G=-g: full)
cxx=(g++ -std=c++17 -fopenmp -O1 "${EMU_G:--g1}" -Wall -Wextra -Werror=deprecated-declarations -Wno-unused-parameter
  -Wno-unknown-pragmas -I"$here/inc" -I"$root")
# on every core (EMU_JOBS, default nproc): one g++ a source, the longest
# (conv) first
jobs=${EMU_JOBS:-$(nproc)}
# shellcheck disable=SC2011 # (our own file names: no spaces)
ls -S "$out"/gen/*.cpp | xargs -n1 basename | sed 's/\.cpp$//' |
  xargs -P "$jobs" -I{} "${cxx[@]}" -fPIC -DCU_STAGE_BYTES=65536 "${nccl[@]}" "${asan[@]}" -c "$out/gen/{}.cpp" \
    -o "$out/obj/{}.o"
# the error value (common/error.c) goes with them, as it goes into the module
gcc -std=c11 -O1 -fPIC "${asan[@]}" -I"$root" -c "$root/common/error.c" -o "$out/obj/error.o"
echo "(the emulated sources compiled on $jobs cores: $SECONDS s)"
# EMU_TESTS=nccl: the collectives over the emulated NCCL alone (no self-test, no check)
if [ "${EMU_TESTS:-1}" != nccl ]; then
  echo "== the emulator's self-test: launch.py's refusals, then broken kernels caught, correct ones passed"
  python3 "$here/launch_test.py"
  python3 "$here/launch.py" "$here/selftest.cu" "$out/selftest"
  # (with MPI, the same source again with inc/nccl.h: compiled beside it)
  "${cxx[@]}" "${asan[@]}" -c "$out/selftest/selftest.cpp" -o "$out/selftest/selftest.o" &
  cc=$!
  if [ ${#nccl[@]} -gt 0 ]; then
    "${cxx[@]}" "${nccl[@]}" "${asan[@]}" -c "$out/selftest/selftest.cpp" -o "$out/selftest/selftest_mpi.o"
  fi
  wait $cc
  g++ -fopenmp "${asan[@]}" "$out/selftest/selftest.o" "$out/obj/emu.o" -o "$out/selftest/selftest"
  OMP_WAIT_POLICY=passive OMP_DYNAMIC=false "$out/selftest/selftest"
  # a float written past a cudaMalloc'd buffer: ASan's report, naming the kernel
  if [ ${#asan[@]} -gt 0 ]; then
    if OMP_WAIT_POLICY=passive OMP_DYNAMIC=false "$out/selftest/selftest" overflow >"$out/selftest/overflow.txt" 2>&1; then
      echo "FAIL: a float written past a cudaMalloc'd buffer went unnoticed under ASan"
      exit 1
    elif grep -q "ERROR: AddressSanitizer: heap-buffer-overflow" "$out/selftest/overflow.txt" &&
      grep -q "WRITE of size 4" "$out/selftest/overflow.txt" && grep -Eq "#0 .* in fill\(" "$out/selftest/overflow.txt"; then
      printf "%-80s ok\n" "fill, one float past its cudaMalloc'd buffer: ASan stops it"
    else
      echo "FAIL: the overflow stopped without ASan's report of a 4-byte write in fill:"
      tail -20 "$out/selftest/overflow.txt"
      exit 1
    fi
  else
    echo "(a float past a cudaMalloc'd buffer: checked with EMU_ASAN=1)"
  fi
  # the runs that must stop the process; with MPI, the self-test built again
  # with inc/nccl.h: the collectives inside CUDA graphs, under mpirun
  if [ ${#nccl[@]} -gt 0 ]; then
    g++ -fopenmp "${asan[@]}" "$out/selftest/selftest_mpi.o" "$out/obj/emu.o" "${mpi[@]}" -o "$out/selftest/selftest_mpi"
  fi
  python3 "$here/launch_test.py" "$out/selftest"
  # check, devices and the op table, each a program linked with the
  # emulated objects (the op table calls nn_backend_cuda_open itself:
  # SE3_OPS_LINKED), compiled side by side
  pids=()
  for c in "$here/check.c" "$here/devices.c" "$root/tests/gpu/test_backend_ops.c"; do
    p=$(basename "$c" .c)
    (gcc -std=gnu17 -O1 -g -fopenmp -Wall -I"$root" -DSE3_OPS_LINKED=1 "${asan[@]}" -c "$c" -o "$out/$p.o" &&
      g++ -fopenmp "${asan[@]}" "$out"/obj/*.o "$out/$p.o" "$bld/libse3nn.a" "$bld/libse3models.a" \
        "$bld/libse3common.a" "${mpi[@]}" -lopenblas -lm -o "$out/$p") &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done # (each: a failed build stops the run)
  echo "(the self-test, check, devices and the op table built: $SECONDS s)"
  echo "== the GPU a process opens, by local rank or by index, among the EMU_DEVICES it sees"
  "$out/devices"
  status=0
  if [ "${EMU_TESTS:-1}" != workflow ]; then
    ops=${EMU_OPS:-}
    if [ -z "$ops" ]; then
      for c in ${EMU_CONV:-direct gemm fused}; do ops="$ops fp32:$c tf32:$c bf16:$c fp16:$c"; done
    fi
    for o in $ops; do
      p=${o%%:*} c=${o#*:}
      echo "== the op table: test_backend_ops cuda --precision $p --conv $c${EMU_OPS_QUICK:+ --quick} (emulated GPU)"
      if OMP_WAIT_POLICY=passive OMP_DYNAMIC=false "$out/test_backend_ops" cuda --precision "$p" --conv "$c" \
        ${EMU_OPS_QUICK:+--quick} >"$out/ops_${p}_$c.txt" 2>&1; then
        tail -1 "$out/ops_${p}_$c.txt"
      else
        status=1
        grep -E "^FAIL" "$out/ops_${p}_$c.txt" | head -20
        tail -20 "$out/ops_${p}_$c.txt"
      fi
      echo "(op table $p $c done: $SECONDS s)"
    done
  fi
  OMP_WAIT_POLICY=passive OMP_DYNAMIC=false "$out/check" "${EMU_PRECISION:-fp32}" || status=1
  echo "(check ${EMU_PRECISION:-fp32} done: $SECONDS s)"
  [ "${EMU_TESTS:-1}" = 0 ] || [ "${EMU_TESTS:-1}" = ops ] && exit $status
fi

# The suite's own GPU programs against the emulated GPU: the same sources
# built as the module libse3cuda.so (what models/device.c loads from beside
# the executable), and copies of tests/gpu's binaries put beside it.
mkdir -p "$out/module"
g++ -shared -fopenmp -Wl,--no-undefined "$out"/obj/*.o "${mpi[@]}" -o "$out/module/libse3cuda.so"
# and beside it the same module without NCCL (the gradient summed through
# the host and MPI, as a build without nccl.h does): nccl.sh's yardstick
if [ ${#nccl[@]} -gt 0 ]; then
  mkdir -p "$out/module_host"
  printf '%s\n' collectives table | xargs -P "$jobs" -I{} "${cxx[@]}" -fPIC -DCU_STAGE_BYTES=65536 \
    -c "$out/gen/{}.cpp" -o "$out/module_host/{}.o"
  for f in "$out"/obj/*.o; do [ -e "$out/module_host/$(basename "$f")" ] || ln -s "$f" "$out/module_host/"; done
  g++ -shared -fopenmp -Wl,--no-undefined "$out"/module_host/*.o -o "$out/module_host/libse3cuda.so"
  cp "$bld/se3screen" "$out/module_host/"
fi
cp "$bld/tests/test_gpu_train" "$out/module/"
cp "$bld/se3screen" "$out/module/"
if [ "${EMU_TESTS:-1}" = nccl ]; then
  echo "== the collectives over the emulated NCCL (mpirun -np 2)"
  exec bash "$here/nccl.sh" "$out" "$root"
fi
if [ "${EMU_TESTS:-1}" != workflow ]; then
  echo "== test_gpu_train cuda (emulated GPU)"
  OMP_WAIT_POLICY=passive OMP_DYNAMIC=false "$out/module/test_gpu_train" cuda >"$out/train.txt" || status=1
  tail -15 "$out/train.txt"
fi

# A whole workflow with device: cuda (se3screen beside the emulated module)
# against the same workflow on the CPU: the 20 molecules of qm9_mini, 3
# epochs, scored. fp32: trained and scored on the GPU, the scores agree to
# 1e-3 of their spread. bf16, fp16: trained on the GPU in that precision
# (it must finish; fp16's log gives its loss scale), and the CPU-trained
# model scored on the GPU in that precision agrees to 2e-2 of the spread
# (trainings in other precisions drift apart, so their scores are not
# compared). Then the same fp32 and bf16 checks on the fused kernels
# (gpu_conv: fused).
echo "== a workflow with device: cuda (emulated GPU) against device: cpu"
cat >"$out/wf.yaml" <<X
workflow: emu
workdir: cpu
run: {progress: none}
sets:
  train:
    - path: $root/workflows/data/qm9_mini.sdf
      labels_csv: {path: $root/workflows/data/qm9_mini.sdf.csv, join: mol_id, columns: [gap]}
stages:
  ingest: {workers: 1}
  graph: {edges: radius+bonds, cutoff: 4.0}
  train: {ensemble: 1, target: gap, epochs: 3, batch_size: 4}
  score: {set: train}
X
rm -rf "$out/wf_"*
export OMP_WAIT_POLICY=passive OMP_DYNAMIC=false
se3() { "$out/module/se3screen" "$@"; }
same_scores() { # CPU_DB GPU_DB BOUND
  python3 - "$@" <<'Y'
import sqlite3, sys
a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
q = "SELECT mol_id, score FROM scores ORDER BY mol_id"
x = sqlite3.connect(a).execute(q).fetchall()
y = sqlite3.connect(b).execute(q).fetchall()
assert len(x) == len(y) > 0 and [i for i, _ in x] == [i for i, _ in y], "not the same molecules scored"
spread = max(v for _, v in x) - min(v for _, v in x)
worst = max(abs(u - v) for (_, u), (_, v) in zip(x, y)) / spread
print(f"  {len(x)} scores: max |cuda - cpu| / spread = {worst:.2e} (bound {tol:g})")
sys.exit(0 if worst <= tol else 1)
Y
}
se3 run "$out/wf.yaml" --workdir "$out/wf_cpu" >"$out/wf_cpu.log" 2>&1 || { tail "$out/wf_cpu.log"; status=1; }
grep -E "train: test \(" "$out/wf_cpu.log" | sed 's/^\[[^]]*\] /  cpu: /'
for p in fp32 bf16 fp16; do
  echo "-- $p"
  se3 run "$out/wf.yaml" --workdir "$out/wf_$p" --set device=cuda --set precision=$p >"$out/wf_$p.log" 2>&1 ||
    { tail "$out/wf_$p.log"; status=1; }
  grep -E "runs on|test \(|loss scale" "$out/wf_$p.log" | sed 's/^\[[^]]*\] /  /'
  if [ $p = fp32 ]; then
    same_scores "$out/wf_cpu/screen.db" "$out/wf_$p/screen.db" 1e-3 || status=1
  else
    [ $p = bf16 ] || grep -q "loss scale" "$out/wf_$p.log" || { echo "  no loss scale in the log"; status=1; }
    cp -r "$out/wf_cpu" "$out/wf_${p}_score" # the CPU's model, scored again (another batch size) on the GPU
    se3 run "$out/wf.yaml" --workdir "$out/wf_${p}_score" --stage score --set stages.score.batch_size=7 \
      --set device=cuda --set precision=$p >"$out/wf_${p}_score.log" 2>&1 || { tail "$out/wf_${p}_score.log"; status=1; }
    echo "  the CPU-trained model scored in $p:"
    same_scores "$out/wf_cpu/screen.db" "$out/wf_${p}_score/screen.db" 2e-2 || status=1
  fi
done
# The fused tensor-core kernels (gpu_conv: fused): trained and scored in
# fp32 (three tf32 products), against the CPU's scores as fp32's above; the
# CPU-trained model scored in bf16, as bf16's above.
echo "-- fused, fp32"
se3 run "$out/wf.yaml" --workdir "$out/wf_fused" --set device=cuda --set gpu_conv=fused >"$out/wf_fused.log" 2>&1 ||
  { tail "$out/wf_fused.log"; status=1; }
grep -E "runs on|test \(" "$out/wf_fused.log" | sed 's/^\[[^]]*\] /  /'
same_scores "$out/wf_cpu/screen.db" "$out/wf_fused/screen.db" 1e-3 || status=1
echo "-- fused, bf16: the CPU-trained model scored"
cp -r "$out/wf_cpu" "$out/wf_fused_bf16_score"
se3 run "$out/wf.yaml" --workdir "$out/wf_fused_bf16_score" --stage score --set stages.score.batch_size=7 \
  --set device=cuda --set precision=bf16 --set gpu_conv=fused >"$out/wf_fused_bf16_score.log" 2>&1 ||
  { tail "$out/wf_fused_bf16_score.log"; status=1; }
same_scores "$out/wf_cpu/screen.db" "$out/wf_fused_bf16_score/screen.db" 2e-2 || status=1
# One process joined alone (SE3_COMM=mpi): data-parallel steps are padded as
# the plain run's recorded ones, so its checkpoints are the plain fp32 run's,
# byte for byte (summed by the emulated NCCL where MPI is built in).
echo "-- fp32, one process joined alone (SE3_COMM=mpi)"
if se3 --version | grep "^mpi: none" >/dev/null; then
  echo "  not run: this se3screen has no MPI"
else
  SE3_COMM=mpi OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 se3 run "$out/wf.yaml" \
    --workdir "$out/wf_alone" --set device=cuda >"$out/wf_alone.log" 2>&1 || { tail "$out/wf_alone.log"; status=1; }
  grep -E "training on" "$out/wf_alone.log" | sed 's/^\[[^]]*\] /  /'
  for f in best.ckpt epoch-3.ckpt; do
    if cmp -s "$out/wf_fp32/models/train-0/$f" "$out/wf_alone/models/train-0/$f"; then
      echo "  $f identical to the plain run's"
    else
      echo "  FAIL: $f differs from the plain run's"
      status=1
    fi
  done
fi
exit $status
