#!/usr/bin/env bash
# data_parallel.sh — the train stage on one process and on several (mpirun),
# on the same graphs, in alternated rounds. Prints one JSON object per run
# and one summary object: medians of molecules/s per setting and their
# ratio, the parallel runs' share of a step spent summing the gradients and
# in the per-step agreement (which includes waiting for the slowest
# process), and the parameters' relative distance between the settings after
# the same steps (data parallel trains the same model up to the order of
# the sums).
#
#   bash bench/data_parallel.sh [SE3SCREEN]      (default build/se3screen)
#
# Environment (all optional):
#   NP       processes of the parallel runs       (default: the cores, at least 2)
#   MODEL    stages.train.model                   (default small; se3_qm9 is NVIDIA's QM9 model)
#   EDGES    stages.graph.edges                   (default bonds)
#   EPOCHS, BATCH                                 (defaults 2, 32)
#   ROUNDS   alternated rounds                     (default 3)
#   WORK     where the graphs and runs go          (default a new folder under ${TMPDIR:-/tmp}; kept)
# The one-process runs use every core (OpenMP); each of the NP processes gets
# cores / NP threads (se3screen's own default under a launcher). Data: the
# quickstart's 1,192 bundled QM7 molecules.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
se3=$(realpath "${1:-$root/build/se3screen}")
cores=$(nproc)
np=${NP:-$((cores > 2 ? cores : 2))}
model=${MODEL:-small}
edges=${EDGES:-bonds}
epochs=${EPOCHS:-2}
batch=${BATCH:-32}
rounds=${ROUNDS:-3}
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/se3dp.XXXXXX")}
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

cat >"$work/dp.yaml" <<EOF
workflow: dp_bench
workdir: base
run: {progress: none}
sets:
  train:
    - path: $root/workflows/data/qm7_quick.sdf.gz
      labels_csv: {path: $root/workflows/data/qm7_quick.csv, join: name, columns: [u0_atom]}
stages:
  ingest: {add_hydrogens: true}
  graph: {edges: $edges, cutoff: 5.0}
  train: {target: u0_atom, model: $model, epochs: $epochs, batch_size: $batch}
EOF
[ -f "$work/base/screen.db" ] || "$se3" run "$work/dp.yaml" --until graph >"$work/prepare.log" 2>&1

# one run: training molecules a second over its epochs (metrics.seconds:
# each epoch's steps and its validation)
run() { # name np
  rm -rf "${work:?}/$1" && cp -r "$work/base" "$work/$1"
  local cmd=("$se3" run "$work/dp.yaml" --stage train --workdir "$work/$1")
  [ "$2" -gt 1 ] && cmd=(mpirun -np "$2" "${cmd[@]}")
  "${cmd[@]}" >"$work/$1.log" 2>&1
  /usr/bin/python3 -c '
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
secs, = db.execute("SELECT sum(seconds) FROM metrics WHERE split = \"train\"").fetchone()
n, = db.execute("SELECT n_train FROM models").fetchone()
print(round(n * int(sys.argv[2]) / secs, 1))' "$work/$1/screen.db" "$epochs"
}

# the parallel run's share of its steps spent summing the gradients and in
# the per-step agreement (which waits for the slowest process), over its
# epochs, from train's log lines: "SUM AGREE" in percent
shares() {
  /usr/bin/python3 -c '
import re, sys
rows = [tuple(map(float, m.groups())) for m in re.finditer(
    r"of ([0-9.]+) s of steps, ([0-9.]+) % summing the gradients and ([0-9.]+) % agreeing", open(sys.argv[1]).read())]
t = sum(r[0] for r in rows) or 1
print(round(sum(r[0] * r[1] for r in rows) / t, 2), round(sum(r[0] * r[2] for r in rows) / t, 2))' "$work/$1.log"
}

one=() many=() sums=() agrees=()
for r in $(seq 1 "$rounds"); do
  a=$(run one 1)
  b=$(run many "$np")
  read -r su ag <<<"$(shares many)"
  one+=("$a") many+=("$b") sums+=("$su") agrees+=("$ag")
  printf '{"bench":"data_parallel","round":%d,"processes":1,"threads":%d,"mol_per_s":%s}\n' "$r" "$cores" "$a"
  printf '{"bench":"data_parallel","round":%d,"processes":%d,"threads":%d,"mol_per_s":%s,"sum_pct":%s,"agree_pct":%s}\n' \
    "$r" "$np" $((cores / np > 0 ? cores / np : 1)) "$b" "$su" "$ag"
done

/usr/bin/python3 - "$work" "$np" "$model" "$edges" "$epochs" "$batch" "$cores" "${one[*]}" "${many[*]}" \
  "${sums[*]}" "${agrees[*]}" <<'EOF'
import json, math, statistics, struct, sys
work, np_, model, edges, epochs, batch, cores, one, many, sums, agrees = sys.argv[1:]
def params(wd):
    b = open(f"{work}/{wd}/models/train-0/epoch-{int(epochs) - 1}.ckpt", "rb").read()
    o = 8
    while b[o:o + 4] != b"END!":
        n, = struct.unpack_from("<H", b, o); o += 2
        name = b[o:o + n].decode(); o += n
        t = b[o]; o += 2
        c, = struct.unpack_from("<Q", b, o); o += 8
        size = [4, 8, 8, 1][t]
        if name == "params":
            return struct.unpack_from("<%df" % c, b, o)
        o += c * size
a, b = params("one"), params("many")
rel = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)) / sum(x * x for x in a))
m1 = statistics.median(float(x) for x in one.split())
mn = statistics.median(float(x) for x in many.split())
print(json.dumps({"bench": "data_parallel", "summary": True, "model": model, "edges": edges, "epochs": int(epochs),
                  "batch_size": int(batch), "cores": int(cores), "processes": int(np_),
                  "one_process_mol_per_s": m1, "processes_mol_per_s": mn, "ratio": round(mn / m1, 3),
                  "gradient_sum_pct_of_step": statistics.median(float(x) for x in sums.split()),
                  "agreement_pct_of_step": statistics.median(float(x) for x in agrees.split()),
                  "params_rel_diff": rel}))
EOF
