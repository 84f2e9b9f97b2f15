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
# Only the programs the tests below run (tests/CMakeLists.txt derives the
# target sanitize_fast from the tests' labels), not every test program.
cmake --build "$bld" -j "$(nproc)" --target sanitize_fast >"$bld.log" 2>&1 || { tail -50 "$bld.log"; exit 1; }
# The fast tests but those labelled nosanitize (test_grad_model: 8 minutes
# under the sanitizers; tests/CMakeLists.txt says why). A program not built
# above is "Not Run", a failure: ctest's status is the job's.
ctest --test-dir "$bld" -L '^fast$' -LE '^nosanitize$' --no-tests=error --output-on-failure
