#!/usr/bin/env bash
# The CUDA module (libse3cuda.so, loaded by se3screen with dlopen only when
# device: asks for a GPU) must need nothing of se3screen's own code: an
# undefined symbol of ours there makes dlopen fail on the GPU machine, which
# no test without a GPU would see. Every strong undefined symbol must come
# with a library's version (libc, libstdc++, libcudart, libcublas: name@VER)
# or be NCCL's (unversioned). And it must define the entry point that
# models/device.c looks up with dlsym (models/cuda/table.h). Skipped (77)
# where this build has no module.
#   usage: tests/gpu/module_symbols.sh MODULE
mod=$1
[ -f "$mod" ] || { echo "SKIPPED: this build has no CUDA module ($mod)"; exit 77; }
command -v nm >/dev/null || { echo "SKIPPED: no nm"; exit 77; }
bad=$(nm -D --undefined-only "$mod" | awk '$1 == "U" {print $2}' | grep -v '@' | grep -v '^nccl')
n=$(nm -D --undefined-only "$mod" | wc -l)
if [ -n "$bad" ]; then
  echo "FAIL: $mod needs symbols no library it links gives (dlopen would fail):"
  echo "$bad"
  exit 1
fi
entry=nn_backend_cuda_open
if ! nm -D --defined-only "$mod" | awk '{print $3}' | grep -qx "$entry"; then
  echo "FAIL: $mod does not define $entry, which models/device.c looks up (dlsym would fail)"
  exit 1
fi
echo "ok: $mod: $n undefined symbols, each a library's; defines $entry"
