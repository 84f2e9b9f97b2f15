#!/usr/bin/env bash
# Install what se3screen needs on Debian 12 (apt packages), then build it into
# build/. Safe to run again: installed packages and an up-to-date build are
# left as they are. Works as root or, through sudo, as a user.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config git
          libopenbabel-dev openbabel libyaml-dev libsqlite3-dev sqlite3 zlib1g-dev
          libopenblas-dev libopenmpi-dev openmpi-bin libcriterion-dev
          python3 chromium fonts-dejavu-core  # the tests' helpers; report.html rendered in a real browser
          python3-rdkit  # test_gen3d_bench: RDKit's ETKDG and RMSD beside se3screen's 3D generation
          strace  # test_bundle: every file the bundled quickstart opens comes from the bundle
          python3-pandas  # the README's tutorial reads its hits with pandas (test_tutorial runs it)
          librdkit-dev libboost-dev  # 3D generation's ETKDG fallback (chem/etkdg.h)
          autodock-vina)  # the dock stage runs its `vina` program (chem/dock.h)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSE3_WERROR=$werror >/dev/null
cmake --build build -j "$(nproc)"
