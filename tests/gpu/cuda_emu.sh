#!/usr/bin/env bash
# The CUDA backend on the emulator (dev/cuda_emu), in the suite: a reduced
# set that fits a few minutes on 2 cores (issue 37: the whole emulator run,
# with the GPU programs and the workflows, takes over an hour there), built
# with AddressSanitizer (EMU_ASAN=1: every buffer exactly its size, so an
# access past its end stops the run with ASan's report):
#   - the emulator's self-test: launch.py's refusals (a __shared__ not every
#     thread of a block reaches, a launch not checked at once), a missing
#     barrier caught in every block by the poisoned shared memory, launches
#     over CUDA's limits refused with CUDA's codes, a float written past a
#     cudaMalloc'd buffer stopped by ASan; the correct kernels beside them
#     pass;
#   - `check devices`: the GPU a process opens by local rank or index;
#   - `check fp32`: every operation of the table against the CPU, a whole
#     model's forward, backward and Adam step, recorded steps, the bases of a
#     prepared plan, under the strict emulator (a call a capture refuses, a
#     default-stream call stop the run; a launch over CUDA's limits fails the
#     backend's sync; every block's shared memory starts poisoned);
#   - `check bf16` on the convolution's GEMM path (gpu_conv: gemm), its R, U
#     and dR stored in bf16, in chunks of 1 MB (several chunks a call).
#   usage: tests/gpu/cuda_emu.sh BUILD_DIR SOURCE_DIR
# Needs a build with its static libraries (the default build).
set -euo pipefail
bld=$1 src=$2
t0=$(date +%s)
EMU_ASAN=1 EMU_TESTS=0 bash "$src/dev/cuda_emu/run.sh" "$bld"
echo "== the GEMM path in bf16, 1 MB chunks"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} OMP_WAIT_POLICY=passive OMP_DYNAMIC=false EMU_CONV=gemm \
  SE3_CONV_CHUNK_MB=1 "$bld/cuda_emu/check" bf16
echo "cuda_emu: $(($(date +%s) - t0)) s"
