#!/usr/bin/env bash
# scripts/bundle.sh — a relocatable se3screen: one folder (and a .tar.gz of
# it) that runs on another Linux machine without root and without the build's
# packages, e.g. copied to a cluster's home or scratch directory.
#
#   bash scripts/bundle.sh [BUILD_DIR] [OUT_DIR]     (defaults: build/ and dist/ of the checkout)
#
# makes OUT_DIR/se3screen-VERSION-OS-ARCH/ and OUT_DIR/se3screen-VERSION-OS-ARCH.tar.gz:
#   bin/se3screen       a sh launcher: finds its folder, sets LD_LIBRARY_PATH,
#                       BABEL_LIBDIR and BABEL_DATADIR to the bundle's, runs the binary
#   libexec/se3screen   the binary of BUILD_DIR (and libse3cuda.so, the CUDA backend,
#                       beside it where the build has one: models/device.c looks there)
#   lib/                every shared library the binary and Open Babel's plugins load,
#                       found with ldd, but the C library's own (libc, libm, ld-linux, ...:
#                       the host's, one piece with its dynamic loader) and the CUDA runtime
#   lib/mpi/            the MPI libraries (Open MPI's, where the build has MPI): after the
#                       user's LD_LIBRARY_PATH, so a cluster's Open MPI module takes their place
#   lib/openbabel/VER/  all of Open Babel's plugins (formats, force fields, InChI, depiction):
#                       ingest reads "any format Open Babel reads", so none is left out
#   share/openbabel/VER Open Babel's data (force-field parameters, atom types, ...)
#   workflows/ configs/ docs/ README.md LICENSE, and BUNDLE.txt: what came from where,
#   the glibc the host needs at least.
# ldd resolves as the binary would here, so run this where the build runs.
# SE3_BUNDLE_GZIP (1-9, default 6): the .tar.gz's compression level.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
die() {
  echo "bundle.sh: $*" >&2
  exit 1
}
build=$(cd "${1:-$src/build}" 2>/dev/null && pwd) || die "no build folder ${1:-$src/build}"
out=${2:-$src/dist}
exe=$build/se3screen
[ -x "$exe" ] || die "no se3screen in $build (build it first: cmake --build $build)"
command -v ldd >/dev/null || die "ldd not found (glibc's libc-bin)"

# ---- names: the version from the binary itself (the CMake project version it was built with) ----
verinfo=$("$exe" --version 2>&1) || die "$exe --version failed: $verinfo"
version=$(sed -n '1s/^se3screen \([^ ]*\).*/\1/p' <<<"$verinfo")
if [ -z "$version" ]; then # fall back on the build's cache
  version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")
fi
[ -n "$version" ] || die "cannot tell se3screen's version"
obver=$(sed -n 's/^open babel \([0-9][0-9.]*\).*/\1/p' <<<"$verinfo")
[ -n "$obver" ] || die "cannot tell Open Babel's version from se3screen --version"
os=$(uname -s | tr '[:upper:]' '[:lower:]')
name=se3screen-$version-$os-$(uname -m)
mkdir -p "$out"
out=$(cd "$out" && pwd)
dir=$out/$name
rm -rf "$dir" "$dir.tar.gz"
mkdir -p "$dir/bin" "$dir/libexec" "$dir/lib/mpi" "$dir/share"

# The C library's family comes from the host: these libraries are one piece
# with the host's ld-linux and kernel, and a copied libc breaks there.
glibc_re='^(linux-vdso|linux-gate|ld-linux[^/]*|ld64|libc|libm|libdl|libpthread|librt|libutil|libresolv|libanl|libmvec|libnsl|libBrokenLocale|libthread_db|libnss_[a-z0-9]+|libc_malloc_debug)\.so([.0-9]*)?$'
# The CUDA runtime and driver: the GPU machine's own (its driver must match).
cuda_re='^lib(cuda|cudart|cublas|cublasLt|nccl|nvidia-[a-z-]+|nvrtc|nvJitLink|cufft|curand|cusparse|cusolver)\.so'

manifest=$dir/.manifest # "SONAME<TAB>source path<TAB>group", folded into BUNDLE.txt
: >"$manifest"
# closure FILE: "SONAME PATH" of everything FILE loads (ldd is itself recursive)
closure() {
  local f=$1 lines
  lines=$(ldd "$f" 2>&1) || die "ldd $f failed: $lines"
  if grep -q "not found" <<<"$lines"; then
    die "$f cannot load here: $(grep 'not found' <<<"$lines" | tr -s ' \t' ' ' | tr '\n' ';')"
  fi
  awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<<"$lines"
}

# ---- the MPI group: what libmpi loads that nothing else does ----
declare -A mpi_only=()
read -r mpi_name mpi_so < <(closure "$exe" | awk '$1 ~ /^libmpi\.so/ {print; exit}') || true
if [ -n "${mpi_so:-}" ]; then
  declare -A other=()
  needed=$(readelf -d "$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  # the closures of the binary's direct dependencies but libmpi
  while read -r s p; do
    [ "$s" = "$mpi_name" ] && continue
    grep -qxF "$s" <<<"$needed" || continue
    other[$s]=1
    while read -r s2 _; do other[$s2]=1; done < <(closure "$p")
  done < <(closure "$exe")
  mpi_only[$mpi_name]=1
  while read -r s _; do [ -z "${other[$s]:-}" ] && mpi_only[$s]=1; done < <(closure "$mpi_so")
fi

# ---- the Open Babel plugins and data: BABEL_LIBDIR/BABEL_DATADIR where set (what
# se3screen here would use), else beside the libopenbabel that the binary loads ----
obso=$(closure "$exe" | awk '$1 ~ /^libopenbabel\.so/ {print $2; exit}')
[ -n "$obso" ] || die "$exe does not load libopenbabel"
oblib=$(dirname "$(readlink -f "$obso")")
obprefix=${oblib%/lib*}
ob_plugins=${BABEL_LIBDIR:-$oblib/openbabel/$obver}
ob_data=${BABEL_DATADIR:-$obprefix/share/openbabel/$obver}
ls "$ob_plugins"/*.so >/dev/null 2>&1 || die "no Open Babel plugins in $ob_plugins (set BABEL_LIBDIR)"
[ -f "$ob_data/mmff94.ff" ] || die "no Open Babel data (mmff94.ff) in $ob_data (set BABEL_DATADIR)"
mkdir -p "$dir/lib/openbabel/$obver" "$dir/share/openbabel"
cp -L "$ob_plugins"/*.so "$dir/lib/openbabel/$obver/"
cp -rL "$ob_data" "$dir/share/openbabel/$obver"
printf 'openbabel plugins\t%s\tlib/openbabel/%s\nopenbabel data\t%s\tshare/openbabel/%s\n' \
  "$ob_plugins" "$obver" "$ob_data" "$obver" >>"$manifest"

# ---- the libraries: the binary's closure and every plugin's ----
declare -A have=()
add_closure() {
  local s p dest
  while read -r s p; do
    [[ $s =~ $glibc_re ]] && continue
    [[ $s =~ $cuda_re ]] && continue
    [ -n "${have[$s]:-}" ] && continue
    have[$s]=1
    dest=lib
    [ -n "${mpi_only[$s]:-}" ] && dest=lib/mpi
    cp -L "$p" "$dir/$dest/$s"
    printf '%s\t%s\t%s\n' "$s" "$(readlink -f "$p")" "$dest" >>"$manifest"
  done < <(closure "$1")
}
cp "$exe" "$dir/libexec/se3screen"
add_closure "$exe"
for p in "$dir/lib/openbabel/$obver"/*.so; do add_closure "$p"; done
cuda_note="no (this build has no CUDA backend: device: cpu only)"
if [ -f "$build/libse3cuda.so" ]; then
  # its own libraries but CUDA's (libstdc++ and the like) are bundled; the CUDA
  # runtime, cuBLAS and NCCL stay the GPU machine's
  cp "$build/libse3cuda.so" "$dir/libexec/"
  while read -r s p; do
    [[ $s =~ $glibc_re || $s =~ $cuda_re || -n ${have[$s]:-} ]] && continue
    have[$s]=1
    cp -L "$p" "$dir/lib/$s"
    printf '%s\t%s\t%s\n' "$s" "$(readlink -f "$p")" lib >>"$manifest"
  done < <(ldd "$build/libse3cuda.so" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
  cuda_note="yes: libexec/libse3cuda.so; needs the GPU machine's NVIDIA driver and CUDA runtime: $(readelf -d "$build/libse3cuda.so" | sed -n 's/.*(NEEDED).*\[\(lib\(cudart\|cublas\|cublasLt\|nccl\)[^]]*\)\].*/\1/p' | tr '\n' ' ')"
fi
rmdir "$dir/lib/mpi" 2>/dev/null || true

# ---- the lowest glibc the host may have: the newest GLIBC_x.y any bundled object asks for ----
# (objdump: binutils, which the build's compiler comes with)
glibc_min="unknown (no objdump)"
if command -v objdump >/dev/null; then
  glibc_min=$(find "$dir/libexec" "$dir/lib" -type f \( -name '*.so*' -o -name se3screen \) -exec objdump -T {} + 2>/dev/null |
    grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
fi

# ---- the launcher ----
cat >"$dir/bin/se3screen" <<EOF
#!/bin/sh
# se3screen $version, relocatable bundle (made by scripts/bundle.sh): runs the
# binary in ../libexec with the bundle's libraries and Open Babel's plugins
# and data, wherever the folder was copied to. The bundle's libraries come
# first on LD_LIBRARY_PATH, then the caller's (where a GPU machine's CUDA
# runtime or a cluster's MPI may be), then lib/mpi (the MPI the bundle brings,
# used where the caller's path has none). Open Babel's variables are always
# the bundle's: another Open Babel's plugins would not load into this one.
set -e
self=\$(readlink -f -- "\$0" 2>/dev/null || printf '%s' "\$0")
root=\${self%/bin/*}
[ "\$root" != "\$self" ] || root=\$(cd "\$(dirname -- "\$self")/.." && pwd -P)
LD_LIBRARY_PATH="\$root/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}:\$root/lib/mpi"
BABEL_LIBDIR="\$root/lib/openbabel/$obver"
BABEL_DATADIR="\$root/share/openbabel/$obver"
# se3screen slurm writes this launcher, not libexec's binary, into its sbatch
# scripts, so jobs submitted later from a plain shell find the libraries too
SE3_LAUNCHER="\$root/bin/se3screen"
export LD_LIBRARY_PATH BABEL_LIBDIR BABEL_DATADIR SE3_LAUNCHER
exec "\$root/libexec/se3screen" "\$@"
EOF
chmod 755 "$dir/bin/se3screen"

# ---- the user's files ----
cp -r "$src/workflows" "$src/configs" "$src/docs" "$dir/"
cp "$src/README.md" "$src/LICENSE" "$dir/"
[ -f "$src/CHANGELOG.md" ] && cp "$src/CHANGELOG.md" "$dir/"
{
  echo "se3screen $version for $os $(uname -m), bundled by scripts/bundle.sh on $(date -u +%Y-%m-%d)"
  [ -r /etc/os-release ] && echo "built on: $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "needs: Linux $(uname -m) with glibc $glibc_min or newer (ldd --version says which one a machine has)"
  echo "CUDA backend: $cuda_note"
  echo
  echo "Run:  $name/bin/se3screen run $name/workflows/quickstart.yaml --workdir runs/quickstart"
  echo "(bin/ may go on PATH, or be linked from it; the folder may be moved as a whole.)"
  echo
  # what was built in (the rest of --version describes this machine's processor)
  "$exe" --version 2>&1 | grep -E '^(se3screen|sqlite|open babel|mpi):? ' | sed 's/^/  /'
  echo
  echo "Shared libraries (name, where it came from, where it is):"
  sed 's/^/  /' "$manifest"
} >"$dir/BUNDLE.txt"
rm -f "$manifest"

# gzip's level: SE3_BUNDLE_GZIP=1 packs in a third of the time, 10 % larger (the test uses it)
tar -C "$out" -cf - "$name" | gzip "-${SE3_BUNDLE_GZIP:-6}" >"$dir.tar.gz"
echo "bundle.sh: $dir ($(du -sm "$dir" | cut -f1) MB: $(find "$dir/lib" -path "$dir/lib/openbabel" -prune -o -name '*.so*' -type f -print | wc -l) libraries, $(find "$dir/lib/openbabel" -name '*.so' | wc -l) Open Babel plugins)"
echo "bundle.sh: $dir.tar.gz ($(du -m "$dir.tar.gz" | cut -f1) MB); needs glibc >= $glibc_min"
