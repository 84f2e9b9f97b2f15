#!/usr/bin/env bash
# Docking that says how long it will take, and keeps its workers busy
# (issue 70): a screen of N Enamine molecules (../shared/data/docking,
# picked at random with a fixed seed, so sizes vary) docked by the real
# Vina into FABP4 (tests/data/dock) at exhaustiveness E, 2 workers, in
# chunks of C. Vina is run through a wrapper that writes each docking's
# start and end time. Prints one JSON object:
#   wall_s          the dock stage's wall time (its first line to its last)
#   eta_first_s     the first ETA the log gives (before any docking ended,
#                   where the se3screen gives one; an earlier one gives its
#                   first only when the first docking ends), and
#   eta_first_ratio that ETA over the time actually left then (1: exact)
#   eta_quarter_ratio, eta_half_ratio: the same at a quarter and half done
#   idle_s          seconds a worker sat idle while molecules were left to
#                   start (between the first start and the last)
#   beat_gap_s      the longest the log stayed silent while Vina ran
#   docking_s       a docking's seconds, min / median / max
#
#   bash bench/dock_eta.sh [SE3SCREEN] [N] [E] [C]     (defaults 16, 2, 4)
#
# About 2 min on 2 cores at the defaults. Run it with an earlier
# se3screen's binary too: the same screen, its ETA and idle time.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
se3=$(realpath "${1:-$here/build/se3screen}")
n=${2:-16}
exh=${3:-2}
chunk=${4:-4}
shared=${SE3_SHARED:-$here/../shared}
tmp=${TMPDIR:-/tmp}/se3bench_dock_eta
rm -rf "$tmp" && mkdir -p "$tmp/tmp"
command -v vina >/dev/null || { echo "dock_eta.sh: no vina (scripts/setup.sh installs it)" >&2; exit 2; }
zcat "$shared/data/docking/Enamine10k.csv.gz" | tail -n +2 | cut -d, -f1 |
  shuf -n "$n" --random-source=<(yes) | awk '{print $1, "E" NR}' >"$tmp/lib.smi"
cat >"$tmp/vina" <<EOF
#!/bin/sh
[ "\$1" = --version ] && exec vina --version
echo "\$(date +%s.%N) start" >> '$tmp/times'
vina "\$@"
rc=\$?
echo "\$(date +%s.%N) end" >> '$tmp/times'
exit \$rc
EOF
chmod +x "$tmp/vina"
cat >"$tmp/dock.yaml" <<EOF
workflow: dock_eta
workdir: $tmp/run
run: {progress: lines, progress_interval_s: 5}
sets:
  library:
    - path: $tmp/lib.smi
stages:
  dock:
    receptor: $here/tests/data/dock/receptor.pdb
    box_ligand: $here/tests/data/dock/crystal_ligand.mol2
    exhaustiveness: $exh
    workers: 2
    chunk_size: $chunk
    vina: $tmp/vina
EOF
TMPDIR=$tmp/tmp "$se3" run "$tmp/dock.yaml" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
/usr/bin/python3 - "$tmp" "$n" "$exh" "$chunk" <<'EOF'
import datetime, json, re, sqlite3, statistics, sys
tmp, n, exh, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def ts(line):
    return datetime.datetime.strptime(line[1:20], "%Y-%m-%d %H:%M:%S").timestamp()
lines = [l for l in open(tmp + "/log") if l.startswith("[") and "] dock: " in l]
t0, t1 = ts(lines[0]), ts(lines[-1])
def eta_s(text):
    m = re.search(r"ETA (?:about )?(\d+(?::\d\d)+)", text)
    if not m:
        return None
    s = 0
    for part in m.group(1).split(":"):
        s = 60 * s + int(part)
    return s
def done(text):
    m = re.search(r"\((\d+) of \d+ done|: (\d+)/\d+ mol", text)
    return int(m.group(1) or m.group(2)) if m else None
first = quarter = half = None
for l in lines:
    e, d = eta_s(l), done(l)
    if e is None:
        continue
    left = t1 - ts(l)
    if first is None:
        first = (e, left)
    if quarter is None and d is not None and d >= n / 4:
        quarter = (e, left)
    if half is None and d is not None and d >= n / 2:
        half = (e, left)
ratio = lambda p: round(p[0] / p[1], 2) if p and p[1] > 0 else None
ev = sorted((float(t), k) for t, k in (l.split() for l in open(tmp + "/times")))
last_start = max(i for i, (_, k) in enumerate(ev) if k == "start")
idle, running = 0.0, 0
for i in range(last_start):
    running += 1 if ev[i][1] == "start" else -1
    idle += max(0, 2 - running) * (ev[i + 1][0] - ev[i][0])
gaps = [ts(b) - ts(a) for a, b in zip(lines, lines[1:])]
db = sqlite3.connect(tmp + "/run/screen.db")
secs = [r[0] for r in db.execute("SELECT seconds FROM docking ORDER BY mol_id")]
heavy = [r[0] for r in db.execute("SELECT n_heavy FROM molecules m JOIN docking k ON k.mol_id = m.id ORDER BY m.id")]
print(json.dumps({
    "bench": "dock_eta", "molecules": n, "exhaustiveness": exh, "chunk_size": chunk, "workers": 2,
    "docked": len(secs), "wall_s": round(t1 - t0, 1),
    "eta_first_s": first[0] if first else None, "eta_first_left_s": round(first[1], 1) if first else None,
    "eta_first_ratio": ratio(first), "eta_quarter_ratio": ratio(quarter), "eta_half_ratio": ratio(half),
    "idle_s": round(idle, 2), "beat_gap_s": round(max(gaps), 1),
    "docking_s": {"min": round(min(secs), 1), "median": round(statistics.median(secs), 1), "max": round(max(secs), 1)},
    "heavy_atoms": {"min": min(heavy), "max": max(heavy)},
}))
EOF
