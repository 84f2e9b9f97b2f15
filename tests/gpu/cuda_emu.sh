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
#     cudaMalloc'd buffer stopped by ASan, a cudaMalloc inside a capture
#     stopped, half a warp at a tensor-core product stopped; the correct
#     kernels beside them pass, the warp's products (mma.sync's bf16, fp16
#     and tf32 shapes, PTX's fragment layouts) exact;
#   - `devices`: the GPU a process opens by local rank or index;
#   - the op table (tests/gpu/test_backend_ops.c, the suite's one table of
#     cases for every backend: each operation and shape, its two runs, the
#     guards past every buffer; --quick: the qm9-wide convolutions, most of
#     its time here, on the small graph) on the emulated GPU, in fp32 on the
#     direct convolution, on the fused tensor-core kernels (gpu_conv: fused)
#     in each of fp32, tf32, bf16 and fp16, and in bf16 on the GEMM path
#     (gpu_conv: gemm), its R, U and dR stored in bf16, in chunks of 1 MB
#     (several a call),
#     under the strict emulator (a call a capture refuses, a default-stream
#     call stop the run; a launch over CUDA's limits fails the backend's
#     sync; every block's shared memory starts poisoned). Its gradient mode
#     (--grad, central differences) needs real = double, which the CUDA
#     backend is not built for: test_backend_ops_grad runs it on the CPU;
#   - `check fp32`: what the table cannot express: two small models' and a
#     degree-4 model's forward, backward and Adam step, fp16's loss-scaled
#     steps recorded against the same steps padded and plain;
#   - `check bf16` on the GEMM path in 1 MB chunks, and on the fused
#     kernels: the two small models (EMU_CHECK=model); not the degree-4
#     model nor fp16's recorded steps (in fp16 whatever the table's
#     precision), which `check fp32` runs.
# SE3_SOAK=1: the whole table (not --quick) in every precision on the three
# paths, and `check bf16` whole (every group) on the GEMM path.
# The emulated objects compile on every core (run.sh's EMU_JOBS); a block's
# threads are fibers of one OS thread (inc/emu_fiber.h), one block at a
# time: the checks run on one core.
#   usage: tests/gpu/cuda_emu.sh BUILD_DIR SOURCE_DIR
# Needs a build with its static libraries (the default build).
set -euo pipefail
bld=$1 src=$2
t0=$(date +%s)
ops="fp32:direct bf16:gemm fp32:fused tf32:fused bf16:fused fp16:fused" quick=1 groups="model"
[ "${SE3_SOAK:-0}" = 1 ] && ops="" quick="" groups="model deg4 steps" # (ops "": run.sh's default, all of them)
EMU_ASAN=1 EMU_TESTS=0 EMU_OPS=$ops EMU_OPS_QUICK=$quick SE3_CONV_CHUNK_MB=1 bash "$src/dev/cuda_emu/run.sh" "$bld"
t1=$(date +%s)
echo "== the GEMM path in bf16, 1 MB chunks: check $groups"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} OMP_WAIT_POLICY=passive OMP_DYNAMIC=false EMU_CONV=gemm \
  SE3_CONV_CHUNK_MB=1 EMU_CHECK=$groups "$bld/cuda_emu/check" bf16
echo "check bf16: $(($(date +%s) - t1)) s"
t1=$(date +%s)
echo "== the fused tensor-core kernels in bf16: check model"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} OMP_WAIT_POLICY=passive OMP_DYNAMIC=false EMU_CONV=fused \
  EMU_CHECK=model "$bld/cuda_emu/check" bf16
echo "check bf16 fused: $(($(date +%s) - t1)) s"
echo "cuda_emu: $(($(date +%s) - t0)) s"
