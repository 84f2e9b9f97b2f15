#!/usr/bin/env bash
# The prior of docking's ETA (chem/dock_cost.c: seconds of one core a
# docking takes, before any has ended): 13 ligands (11 Enamine molecules
# picked by size from ../shared/data/docking with a fixed seed, a C24
# diester with 19 rotatable bonds, benzene) made PDBQT by Open Babel and
# docked by the real Vina (--cpu 1, as se3screen runs it) into FABP4
# (tests/data/dock) at exhaustiveness 1, 4 and 2, one at a time. Fits
# log t = log K + e log(exhaustiveness) + a log(heavy) + b log(1 + rotors)
# by least squares (heavy atoms by Open Babel, rotors as the PDBQT's
# BRANCH lines, which dock_rotors counts) and prints one JSON object: K,
# e, a, b, and each docking's time over the fit's, min / median / max.
#
#   bash bench/dock_cost_fit.sh        (about 5 min on 2 idle cores)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${SE3_SHARED:-$here/../shared}
tmp=${TMPDIR:-/tmp}/se3bench_dock_cost
rm -rf "$tmp" && mkdir -p "$tmp" && cd "$tmp"
command -v vina >/dev/null || { echo "dock_cost_fit.sh: no vina (scripts/setup.sh installs it)" >&2; exit 2; }
zcat "$shared/data/docking/Enamine10k.csv.gz" | tail -n +2 | cut -d, -f1 | shuf -n 400 --random-source=<(yes) >pool.smi
/usr/bin/python3 - <<'PY'
import subprocess
out = subprocess.run(["obabel", "-ismi", "pool.smi", "-otxt", "--append", "atoms"], capture_output=True,
                     text=True).stdout.split("\n")
rows = sorted((int(l.split()[-1]), s.strip()) for s, l in zip(open("pool.smi"), out) if l.split())
step = len(rows) // 10
pick = [rows[i] for i in range(0, len(rows), step)][:10] + [rows[-1]]
with open("sel.smi", "w") as f:
    for k, (_, s) in enumerate(pick):
        f.write(f"{s} L{k}\n")
    f.write("CCCCCCCCCCOC(=O)CCCCCCC(=O)OCC diester\nc1ccccc1 benzene\n")
PY
obabel -ismi sel.smi -opdbqt -O lig.pdbqt -m --gen3d -p 7.4 2>/dev/null
obabel "$here/tests/data/dock/receptor.pdb" -xr -opdbqt -O rec.pdbqt -p 7.4 2>/dev/null
obabel -ismi sel.smi -otxt --append atoms 2>/dev/null | awk '{print $NF}' >heavy.txt
: >times.txt
for e in 1 4 2; do
  for i in $(seq 1 13); do
    t=$({ /usr/bin/time -f "%e" vina --receptor rec.pdbqt --ligand "lig$i.pdbqt" --center_x 4.43 --center_y 7.53 \
      --center_z 18.68 --size_x 17.7 --size_y 19.1 --size_z 18.3 --exhaustiveness $e --cpu 1 --seed 1 \
      --num_modes 3 --out "out$i.pdbqt" >/dev/null; } 2>&1 | tail -1)
    echo "$e $(sed -n "${i}p" heavy.txt) $(grep -c '^BRANCH' "lig$i.pdbqt") $t" >>times.txt
  done
done
/usr/bin/python3 - <<'PY'
import json, math, statistics
data = [tuple(float(x) for x in l.split()) for l in open("times.txt") if l.strip()]
X = [(1.0, math.log(e), math.log(h), math.log(1 + r)) for e, h, r, _ in data]
y = [math.log(t) for *_, t in data]
n = 4
M = [[sum(x[i] * x[j] for x in X) for j in range(n)] + [sum(x[i] * v for x, v in zip(X, y))] for i in range(n)]
for i in range(n):
    p = M[i][i]
    M[i] = [v / p for v in M[i]]
    for k in range(n):
        if k != i:
            f = M[k][i]
            M[k] = [a - f * b for a, b in zip(M[k], M[i])]
c, e, a, b = (M[i][n] for i in range(n))
r = [t / (math.exp(c) * ex ** e * h ** a * (1 + ro) ** b) for ex, h, ro, t in data]
print(json.dumps({"bench": "dock_cost_fit", "dockings": len(data), "K": round(math.exp(c), 4), "e": round(e, 3),
                  "a": round(a, 3), "b": round(b, 3),
                  "ratio": {"min": round(min(r), 2), "median": round(statistics.median(r), 2), "max": round(max(r), 2)}}))
PY
