#!/usr/bin/env bash
# The relocatable bundle (scripts/bundle.sh) runs the quickstart on its own:
# made from this build's binary, its .tar.gz unpacked at another path (the
# folder it was made in is deleted first: nothing may point back there), then
# run by an unprivileged user (root drops to nobody; the bundle stays owned
# by root, so nothing may be written into it) with a clean environment (no
# LD_LIBRARY_PATH but what the launcher sets, no BABEL_* variables) and a
# workdir of its own. Asserts: exit 0; screen.db has a model, a score for
# every library molecule and the 20 ranked hits, and hits.csv, hits.sdf and
# report.html are written; and every file the run opened or loaded came from
# the bundle, its workdir, or the host's C library (libc, libm, ld-linux,
# glibc's locales; /etc, /proc, /sys, /dev and SQLite's /var/tmp): a
# library (Open Babel's plugins included) or an Open Babel data file taken
# from /usr fails the test, named. With strace (Debian's strace) every
# open() of every process is checked, data files included; without it the
# dynamic loader's own log (LD_DEBUG=libs,files) says where each library and
# plugin was loaded from, but data files are not seen, and the test says so.
#
#   test_bundle.sh SE3SCREEN SOURCE_DIR WORK
set -uo pipefail
se3=$1 src=$2 work=$3
fail() {
  echo "test_bundle: FAIL: $*"
  exit 1
}
build=$(dirname "$se3")
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
t0=$(date +%s%N)

# 1. the bundle, from this build
SE3_BUNDLE_GZIP=1 bash "$src/scripts/bundle.sh" "$build" "$work/dist" >"$work/bundle.log" 2>&1 ||
  { cat "$work/bundle.log"; fail "scripts/bundle.sh $build"; }
tarball=$(ls "$work"/dist/se3screen-*.tar.gz 2>/dev/null | head -1)
[ -n "$tarball" ] || fail "scripts/bundle.sh made no .tar.gz in $work/dist"
name=$(basename "$tarball" .tar.gz)
[ -x "$work/dist/$name/bin/se3screen" ] || fail "no bin/se3screen in $work/dist/$name"

# 2. unpacked elsewhere, the original folder gone. The run's folder is under
# /tmp (world-searchable) so that nobody can reach it wherever WORK is.
run=$(mktemp -d /tmp/se3bundle.XXXXXX) || fail "mktemp"
trap 'rm -rf "$run"' EXIT
chmod 755 "$run"
mkdir -p "$run/opt" "$run/home/lddebug"
tar -C "$run/opt" -xzf "$tarball" || fail "cannot unpack $tarball"
rm -rf "${work:?}/dist/$name"
bundle=$run/opt/$name
launcher=$bundle/bin/se3screen

# 3. who runs it: an unprivileged user
as=()
if [ "$(id -u)" -eq 0 ]; then
  nobody_gid=$(id -g nobody 2>/dev/null)
  chown -R nobody "$run/home" 2>/dev/null
  if [ -n "$nobody_gid" ] &&
    setpriv --reuid=nobody --regid="$nobody_gid" --clear-groups test -x "$launcher" -a -w "$run/home" 2>/dev/null; then
    as=(setpriv --reuid=nobody --regid="$nobody_gid" --clear-groups)
    echo "test_bundle: runs the bundle as nobody (uid $(id -u nobody)) through setpriv"
  else
    echo "test_bundle: NOTE: running as root and cannot switch to nobody with setpriv: the bundle runs as root"
  fi
else
  echo "test_bundle: runs the bundle as uid $(id -u) (not root)"
fi

# 4. the quickstart from the bundle, what it opens or loads recorded
wf=$bundle/workflows/quickstart.yaml
qs=$run/home/quickstart
clean=(env -i PATH=/usr/bin:/bin HOME="$run/home")
trace=$work/opens.txt
: >"$trace"
# strace where it is installed and may trace (a container may forbid ptrace)
use_strace=0
if [ "${SE3_BUNDLE_TEST_NO_STRACE:-0}" != 1 ] && command -v strace >/dev/null; then
  if "${as[@]}" "${clean[@]}" strace -f -qq -o /dev/null true 2>/dev/null; then
    use_strace=1
  else
    echo "test_bundle: NOTE: strace is installed but cannot trace here"
  fi
fi
if [ $use_strace = 1 ]; then
  how=strace
  # every process, successful open/openat only (the loader's misses along its
  # search path are not loads); strace runs as the bundle's user, inside the
  # clean environment, and writes into the run's home
  "${as[@]}" "${clean[@]}" strace -f -qq -e trace=open,openat -e status=successful -o "$run/home/strace.txt" \
    "$launcher" run "$wf" --workdir "$qs" --set run.progress=none --set stages.train.ensemble=1 >"$work/quickstart.log" 2>&1
  rc=$?
  # `PID openat(AT_FDCWD, "/path", O_RDONLY|O_CLOEXEC) = 3` -> /path
  sed -n 's/^[0-9]* *open[a-z]*([^"]*"\([^"]*\)".*/\1/p' "$run/home/strace.txt" | sort -u >"$trace"
else
  how=ld.so
  echo "test_bundle: NOTE: no strace: the loader's own log (LD_DEBUG) shows the libraries; Open Babel's data files are not checked"
  "${as[@]}" "${clean[@]}" LD_DEBUG=libs,files LD_DEBUG_OUTPUT="$run/home/lddebug/ld" "$launcher" run "$wf" \
    --workdir "$qs" --set run.progress=none --set stages.train.ensemble=1 >"$work/quickstart.log" 2>&1
  rc=$?
  # what each load resolved to: a library by name is the last file tried
  # before its link map is made; one opened by path (dlopen of a plugin) is
  # that path
  cat "$run/home/lddebug"/ld.* | awk '
    { pid = $1 }
    /trying file=/ { sub(/.*trying file=/, ""); tried[pid] = $0; next }
    /generating link map/ {
      f = $0; sub(/.*file=/, "", f); sub(/ \[[0-9]+\];.*/, "", f)
      if (f ~ /^\//) print f; else if (tried[pid] != "") print tried[pid]; else print "unresolved: " f
    }' | sort -u >"$trace"
fi
secs=$((($(date +%s%N) - t0) / 1000000))
[ $rc -eq 0 ] || { tail -30 "$work/quickstart.log"; fail "the quickstart from the bundle exited $rc"; }

# 5. the results
db=$qs/screen.db
[ -f "$db" ] || fail "no $db"
q() { sqlite3 -readonly -batch -noheader "$db" "$1" 2>&1; }
command -v sqlite3 >/dev/null || q() { "${clean[@]}" "$launcher" query "$db" "$1" --csv | tail -1; }
n_models=$(q "SELECT count(*) FROM models")
n_lib=$(q "SELECT count(*) FROM molecules WHERE set_name = 'library'")
n_scored=$(q "SELECT count(DISTINCT s.mol_id) FROM scores s JOIN molecules m ON m.id = s.mol_id WHERE m.set_name = 'library'")
n_hits=$(q "SELECT count(*) FROM ranked_hits")
# InChIKeys: Open Babel's InChI plugin and libinchi, from the bundle
n_ikey=$(q "SELECT count(*) FROM molecules WHERE set_name = 'library' AND length(inchikey) = 27")
[ "$n_models" -ge 1 ] 2>/dev/null || fail "screen.db has no model ($n_models)"
[ "$n_lib" -ge 20 ] 2>/dev/null || fail "screen.db has $n_lib library molecules, fewer than the quickstart's 20 hits"
[ "$n_scored" = "$n_lib" ] || fail "$n_scored of $n_lib library molecules scored"
[ "$n_ikey" = "$n_lib" ] || fail "$n_ikey of $n_lib library molecules have an InChIKey"
[ "$n_hits" = 20 ] || fail "$n_hits ranked hits, not the quickstart's 20"
for f in hits.csv hits.sdf report.html; do [ -s "$qs/$f" ] || fail "no $f in the workdir"; done

# 6. where every file opened or loaded came from
[ "$(wc -l <"$trace")" -gt 10 ] || fail "recorded nothing of the run ($how): the check below would pass vacuously"
glibc_re='/(ld-linux[^/]*|libc|libm|libdl|libpthread|librt|libutil|libresolv|libanl|libmvec|libnsl|libnss_[a-z0-9]+)\.so[.0-9]*$'
# allowed: the run's folder (the bundle, the workdir), the kernel's files,
# /etc, SQLite's temporary files (/var/tmp), the C library's locales and
# iconv modules; and a shared object only from the bundle or the C library
outside=$(
  grep -v -e "^$run/" -e '^/etc/' -e '^/proc/' -e '^/sys/' -e '^/dev/' -e '^/var/tmp/' \
    -e '^/usr/lib/locale/' -e '^/usr/share/locale/' -e '^/usr/share/zoneinfo/' -e '/gconv/' "$trace"
  grep -E '\.so(\.[0-9.]*)?$' "$trace" | grep -v "^$bundle/"
)
outside=$(grep -Ev "$glibc_re" <<<"$outside" | sort -u | sed '/^$/d')
if [ -n "$outside" ]; then
  echo "$outside" | sed 's/^/  /'
  fail "the run from the bundle used the files above from outside it ($how): a library scripts/bundle.sh" \
    "did not bundle, or Open Babel's plugins or data found outside the bundle (BABEL_LIBDIR, BABEL_DATADIR)"
fi
# and the bundle's own were used: Open Babel, its plugins (and, traced, its force field's data)
grep -q "^$bundle/lib/libopenbabel.so" "$trace" || fail "libopenbabel was not loaded from the bundle ($how)"
n_plugins=$(grep -c "^$bundle/lib/openbabel/[^/]*/.*\.so$" "$trace")
[ "$n_plugins" -ge 100 ] || fail "only $n_plugins Open Babel plugins loaded from the bundle ($how)"
if [ $how = strace ]; then
  grep -q "^$bundle/share/openbabel/[^/]*/mmff94.ff$" "$trace" ||
    fail "MMFF94's parameters (mmff94.ff) were not read from the bundle"
fi
# 7. sbatch scripts written from the bundle run its launcher, not libexec's
# bare binary, which a job submitted later from a plain shell could not start
"${as[@]}" "${clean[@]}" "$launcher" slurm "$wf" --set "workdir=$qs" >"$work/slurm.log" 2>&1 ||
  { cat "$work/slurm.log"; fail "se3screen slurm from the bundle failed"; }
n_sbatch=$(ls "$qs"/slurm/*.sbatch 2>/dev/null | wc -l)
[ "$n_sbatch" -ge 3 ] || fail "se3screen slurm wrote $n_sbatch sbatch scripts"
grep -q "$bundle/libexec/se3screen" "$qs"/slurm/*.sbatch &&
  fail "an sbatch script runs the bundle's bare binary $bundle/libexec/se3screen"
[ "$(grep -l "$bundle/bin/se3screen" "$qs"/slurm/*.sbatch | wc -l)" = "$n_sbatch" ] ||
  fail "not every sbatch script runs the bundle's launcher $bundle/bin/se3screen"
n_libs=$(grep -c "^$bundle/lib/.*\.so[.0-9]*$" "$trace")
echo "test_bundle: ok: $name ($(du -sm "$bundle" | cut -f1) MB, $(du -m "$tarball" | cut -f1) MB packed)" \
  "ran the quickstart from $bundle: $n_models model(s), $n_scored scored, $n_hits hits;" \
  "$(wc -l <"$trace") files $( [ $how = strace ] && echo opened || echo loaded), $n_libs libraries" \
  "($n_plugins Open Babel plugins) all from the bundle or the C library; ${secs} ms"
