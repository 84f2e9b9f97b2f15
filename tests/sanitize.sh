#!/usr/bin/env bash
# The sanitizer job (DESIGN §8): builds se3screen with AddressSanitizer and
# UndefinedBehaviorSanitizer into its own build folder and runs tests there.
# The suite runs it as the ctest test `sanitizers`, so the README's test
# command, and CI, run it too.
#   usage: tests/sanitize.sh SOURCE_DIR BUILD_DIR
#
# By default (issue 52: the suite within 20 minutes on 2 cores) the tests
# labelled sanitize_default (SE3_SANITIZE_DEFAULT in tests/CMakeLists.txt
# says which and why): what parses input (records, labels, YAML, blobs, the
# fuzzer), the checkpoints (reader, fuzzer, crafted files through
# se3screen), the store and its migrations, and the kernels (the backend
# table forward and backward, the convolution's tiles, the model). The
# fuzzers get SE3_FUZZ_SECONDS=20 each (test_fuzz_checkpoint 60 s otherwise
# under ASan, test_fuzz 25 s); a SE3_FUZZ_SECONDS in the environment wins.
#
# Every `fast` test but test_grad_model, as the job ran before (408 s on 2
# cores in CI, one test at a time; test_fuzz_checkpoint's minute and the
# gradient checks, whose se3nn_f64 build alone is about 150 CPU seconds,
# included):
#   SE3_SOAK=1 bash tests/sanitize.sh . build/asan
set -euo pipefail
src=$1 bld=$2
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
# Without the CUDA backend: the sanitizers watch host code, the GPU code
# cannot run on a machine without a GPU, and the main build already compiles
# it with warnings as errors; nvcc would double this job's build time.
cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=Debug -DSE3_SANITIZE=ON -DSE3_WERROR=$werror -DSE3_CUDA=OFF >/dev/null
if [ "${SE3_SOAK:-0}" = 1 ]; then
  # The fast tests but those labelled nosanitize (test_grad_model: 8 minutes
  # under the sanitizers; tests/CMakeLists.txt says why).
  target=sanitize_fast
  select=(-L '^fast$' -LE '^nosanitize$')
else
  target=sanitize_default
  select=(-L '^sanitize_default$')
  export SE3_FUZZ_SECONDS=${SE3_FUZZ_SECONDS:-20}
fi
# Only the programs the tests below run (tests/CMakeLists.txt derives the
# targets from the tests' labels and SE3_SANITIZE_DEFAULT), not every test
# program.
cmake --build "$bld" -j "$(nproc)" --target "$target" >"$bld.log" 2>&1 || { tail -50 "$bld.log"; exit 1; }
# Side by side, as many as there are cores: most of these tests keep one
# core busy, and the fuzzers run for their budget whatever the load. Each
# test has a folder of its own (testtmp/NAME). A program not built above is
# "Not Run", a failure: ctest's status is the job's.
ctest --test-dir "$bld" "${select[@]}" -j "$(nproc)" --no-tests=error --output-on-failure
