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
#     and dR stored in bf16, in chunks of 1 MB (several chunks a call): what
#     the path and the precision change, every operation of the table and
#     two small models (EMU_CHECK="ops model"); not the third model (degree
#     4) nor fp16's recorded steps (in fp16 whatever the table's precision,
#     over half the run's time), which `check fp32` runs.
# SE3_SOAK=1: `check bf16` whole as well (every group, as before issue 52).
# The emulated objects compile on every core (run.sh's EMU_JOBS); a block's
# threads are fibers of one OS thread (inc/emu_fiber.h), one block at a
# time: the checks run on one core.
#   usage: tests/gpu/cuda_emu.sh BUILD_DIR SOURCE_DIR
# Needs a build with its static libraries (the default build).
set -euo pipefail
bld=$1 src=$2
t0=$(date +%s)
EMU_ASAN=1 EMU_TESTS=0 bash "$src/dev/cuda_emu/run.sh" "$bld"
t1=$(date +%s)
groups="ops model"
[ "${SE3_SOAK:-0}" = 1 ] && groups="ops model deg4 steps"
echo "== the GEMM path in bf16, 1 MB chunks: $groups"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} OMP_WAIT_POLICY=passive OMP_DYNAMIC=false EMU_CONV=gemm \
  SE3_CONV_CHUNK_MB=1 EMU_CHECK=$groups "$bld/cuda_emu/check" bf16
echo "check bf16: $(($(date +%s) - t1)) s"
echo "cuda_emu: $(($(date +%s) - t0)) s"
