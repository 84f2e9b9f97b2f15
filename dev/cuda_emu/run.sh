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
if nm "$bld/libse3common.a" 2>/dev/null | grep -q " U MPI_Init"; then
  read -r -a mpi <<<"$(mpicc --showme:link)"
fi
g++ -fopenmp "$out"/obj/*.o "$bld/libse3nn.a" "$bld/libse3models.a" "$bld/libse3common.a" "${mpi[@]}" -lopenblas -lm \
  -o "$out/check"
OMP_WAIT_POLICY=passive OMP_DYNAMIC=false "$out/check"
