#!/usr/bin/env bash
# dev/cuda_emu — runs the CUDA backend (models/cuda/) on the host, without a
# GPU, and compares every operation of its table, and a whole model's
# forward, backward and Adam step, with the CPU backend (check.c).
#
# How: launch.py rewrites each kernel launch `k<<<grid, block, ...>>>(args)`
# into a call of inc/cuda_runtime.h's emulator, where a block's threads are an
# OpenMP team (__syncthreads is its barrier), blocks run one after another,
# __shared__ arrays are statics and device memory is host memory (poisoned
# with NaN when allocated, so reading what no kernel wrote shows);
# inc/cublas_v2.h does cublasSgemm naively by its column-major definition.
# The kernels' index arithmetic, tiling, shared-memory use and the GEMMs'
# transposes are checked this way; timing, warp behaviour, real cuBLAS and
# anything only a GPU does are not. A development tool, not part of the
# build or the suite.
#
#   usage: dev/cuda_emu/run.sh [BUILD_DIR]   (default build; needs its libse3nn.a)
# EMU_BUDGET=65536 shrinks the convolution backward's chunks to a few edges.
# EMU_PRECISION=fp32|tf32|bf16 opens check.c's table in that precision (the
# emulated cuBLAS rounds the products' inputs as tensor cores would).
# Then, unless EMU_TESTS=0, the suite's GPU programs (test_backend_ops in
# each precision, test_gpu_train) run against the emulated GPU: the same
# sources as a module beside copies of them. Their verdicts there say
# nothing about a real GPU's warps, cuBLAS or driver.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bld=$(cd "${1:-$root/build}" && pwd)
out=$bld/cuda_emu
rm -rf "$out" && mkdir -p "$out/gen" "$out/obj"
python3 "$here/launch.py" "$root/models/cuda" "$out/gen"
cat >"$out/gen/emu.cpp" <<'X'
#include "cuda_runtime.h"
#include "cublas_v2.h"
dim3 emu_grid, emu_block, emu_bidx;
X
for f in "$out"/gen/*.cpp; do
  g++ -std=c++17 -fopenmp -O1 -g -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas -I"$here/inc" -I"$root" \
    -c "$f" -o "$out/obj/$(basename "$f" .cpp).o"
done
gcc -std=gnu17 -O1 -g -fopenmp -Wall -I"$root" -c "$here/check.c" -o "$out/obj/check.o"
# the data-parallel hooks (common/comm.c) come along; with MPI when the build has it
mpi=()
if nm "$bld/libse3common.a" 2>/dev/null | grep " U MPI_" >/dev/null; then  # not -q: nm would die of SIGPIPE under pipefail
  read -r -a mpi <<<"$(mpicc --showme:link)"
fi
g++ -fopenmp "$out"/obj/*.o "$bld/libse3nn.a" "$bld/libse3models.a" "$bld/libse3common.a" "${mpi[@]}" -lopenblas -lm \
  -o "$out/check"
OMP_WAIT_POLICY=passive OMP_DYNAMIC=false "$out/check" "${EMU_PRECISION:-fp32}"
[ "${EMU_TESTS:-1}" = 0 ] && exit 0

# The suite's own GPU programs against the emulated GPU: the same sources
# built as the module libse3cuda.so (what models/device.c loads from beside
# the executable), and copies of tests/gpu's binaries put beside it.
mkdir -p "$out/module"
for f in "$out"/gen/*.cpp; do
  g++ -std=c++17 -fopenmp -fPIC -O1 -g -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas -I"$here/inc" \
    -I"$root" -c "$f" -o "$out/module/$(basename "$f" .cpp).o"
done
g++ -shared -fopenmp -Wl,--no-undefined "$out"/module/*.o -o "$out/module/libse3cuda.so"
cp "$bld/tests/test_backend_ops" "$bld/tests/test_gpu_train" "$out/module/"
status=0
for p in fp32 tf32 bf16; do
  echo "== test_backend_ops cuda --precision $p (emulated GPU)"
  OMP_WAIT_POLICY=passive OMP_DYNAMIC=false "$out/module/test_backend_ops" cuda --precision $p >"$out/ops_$p.txt" || status=1
  grep -E "^(FAIL|fail)|passed|failed" "$out/ops_$p.txt" | tail -5
done
echo "== test_gpu_train cuda (emulated GPU)"
OMP_WAIT_POLICY=passive OMP_DYNAMIC=false "$out/module/test_gpu_train" cuda >"$out/train.txt" || status=1
tail -15 "$out/train.txt"
exit $status
