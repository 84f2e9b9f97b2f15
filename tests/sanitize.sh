#!/usr/bin/env bash
# The sanitizer job (DESIGN §8): builds se3screen with AddressSanitizer and
# UndefinedBehaviorSanitizer into its own build folder and runs the `fast`
# tests there. The suite runs it as the ctest test `sanitizers`, so the
# README's test command, and CI, run it too.
#   usage: tests/sanitize.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 bld=$2
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
# Without the CUDA backend: the sanitizers watch host code, the GPU code
# cannot run on a machine without a GPU, and the main build already compiles
# it with warnings as errors; nvcc would double this job's build time.
cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=Debug -DSE3_SANITIZE=ON -DSE3_WERROR=$werror -DSE3_CUDA=OFF >/dev/null
cmake --build "$bld" -j "$(nproc)" >"$bld.log" 2>&1 || { tail -50 "$bld.log"; exit 1; }
# test_grad_model takes 8 minutes under the sanitizers; the model's float
# build (test_model) and the layers' gradient checks cover its code there.
ctest --test-dir "$bld" -L fast -E '^test_grad_model$' --output-on-failure
