#!/usr/bin/env bash
# dev/gpu/kit.sh — packs what a lent GPU machine lacks to build and run
# se3screen: Debian 12's packages of Open Babel, OpenBLAS, libyaml, SQLite,
# zlib's headers and pkg-config, with the libraries they load, as .deb files
# in .gpukit/ (ignored by git; about 35 MB, under the device tool's 64 MiB).
# That machine (the library's `device` tool) has CUDA, cmake and a compiler
# but reaches no package registry; dev/gpu/run.sh unpacks the kit there into
# a prefix of its own and builds against it.
#
#   bash dev/gpu/kit.sh        (here: needs apt-get and Debian's mirror)
# then the device tool's run with carry [".gpukit"] and the command
#   bash dev/gpu/run.sh all    (there; see run.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kit=$root/.gpukit
# the build's own packages, then what they load that a CUDA image need not
# have (libcairo2 for Open Babel's depictions and its X and font libraries,
# Open Babel's InChI, Maestro and Boost libraries, ICU for libxml2, the
# Fortran runtime for OpenBLAS)
pkgs=(libopenbabel7 libopenbabel-dev libopenblas0 libopenblas0-pthread libopenblas-dev libopenblas-pthread-dev
  libyaml-0-2 libyaml-dev libsqlite3-0 libsqlite3-dev zlib1g-dev pkg-config pkgconf pkgconf-bin libpkgconf3
  libgfortran5 libquadmath0 libgomp1 libinchi1 libmaeparser1 libboost-iostreams1.74.0 libxml2 libicu72 libcairo2
  libpixman-1-0 libpng16-16 libfreetype6 libfontconfig1 libexpat1 libbrotli1 libx11-6 libxau6 libxdmcp6 libxcb1
  libxcb-render0 libxcb-shm0 libxext6 libxrender1)
rm -rf "$kit" && mkdir -p "$kit"
cd "$kit"
apt-get download "${pkgs[@]}" >/dev/null 2>"$kit/apt.log" || { cat "$kit/apt.log"; exit 1; }
rm -f "$kit/apt.log"
n=$(ls "$kit"/*.deb | wc -l)
[ "$n" -eq "${#pkgs[@]}" ] || { echo "kit.sh: $n of ${#pkgs[@]} packages downloaded"; exit 1; }
echo "kit.sh: $n packages, $(du -sm "$kit" | cut -f1) MB in $kit"
