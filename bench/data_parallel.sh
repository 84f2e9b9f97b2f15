#!/usr/bin/env bash
# data_parallel.sh — the train stage on one process and on several (mpirun),
# on the same graphs, in alternated rounds; the several twice: with the
# gradient summed bucket by bucket while the backward runs (bucket_mb, the
# default) and with one sum after the backward (bucket_mb: 0). Prints one
# JSON object per run and one summary object: medians of molecules/s per
# setting and the ratios, the parallel runs' share of a step spent waiting
# for the sums after the backward, the share the sums took in all, and in
# the per-step agreement (which waits for the slowest process), the overlap
# (the fraction of the one-sum runs' sum time that the bucketed runs no
# longer wait for), and the parameters' relative distance between one
# process and several after the same steps (data parallel trains the same
# model up to the order of the sums; bucketed and one sum: the same bits).
#
#   bash bench/data_parallel.sh [SE3SCREEN]      (default build/se3screen)
#
# Environment (all optional):
#   NP       processes of the parallel runs       (default: the cores, at least 2)
#   MODEL    stages.train.model                   (default small; se3_qm9 is NVIDIA's QM9 model)
#   EDGES    stages.graph.edges                   (default bonds)
#   EPOCHS, BATCH                                 (defaults 2, 32)
#   ROUNDS   alternated rounds                     (default 3)
#   BUCKET_MB  stages.train.bucket_mb of the bucketed runs (default: the default, 4)
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
  ingest: {add_hydrogens: true, coordinates: input}   # (the DFT geometries, as the quickstart)
  graph: {edges: $edges, cutoff: 5.0}
  train: {ensemble: 1, target: u0_atom, model: $model, epochs: $epochs, batch_size: $batch} # (one model: the rate of one)
EOF
[ -f "$work/base/screen.db" ] || "$se3" run "$work/dp.yaml" --until graph >"$work/prepare.log" 2>&1

# one run: training molecules a second over its epochs (metrics.seconds:
# each epoch's steps and its validation)
run() { # name np [--set ...]
  rm -rf "${work:?}/$1" && cp -r "$work/base" "$work/$1"
  local cmd=("$se3" run "$work/dp.yaml" --stage train --workdir "$work/$1" "${@:3}")
  [ "$2" -gt 1 ] && cmd=(mpirun -np "$2" "${cmd[@]}")
  "${cmd[@]}" >"$work/$1.log" 2>&1
  /usr/bin/python3 -c '
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
secs, = db.execute("SELECT sum(seconds) FROM metrics WHERE split = \"train\"").fetchone()
n, = db.execute("SELECT n_train FROM models").fetchone()
print(round(n * int(sys.argv[2]) / secs, 1))' "$work/$1/screen.db" "$epochs"
}

# a parallel run's shares of its steps, over its epochs, from train's log
# lines, in percent: "WAIT SUM AGREE BUCKETS" (waiting for the sums after
# the backward, the sums in all, the per-step agreement, buckets a step)
shares() {
  /usr/bin/python3 -c '
import re, sys
rows = [tuple(map(float, m.groups())) for m in re.finditer(
    r"of ([0-9.]+) s of steps, ([0-9.]+) % waiting for the gradients. sums after the backward "
    r"\(the sums took ([0-9.]+) %, in ([0-9]+) buckets? a step\) and ([0-9.]+) % agreeing", open(sys.argv[1]).read())]
t = sum(r[0] for r in rows) or 1
w = lambda i: round(sum(r[0] * r[i] for r in rows) / t, 2)
print(w(1), w(2), w(4), int(rows[-1][3]) if rows else 0)' "$work/$1.log"
}

bucket=()
[ -n "${BUCKET_MB:-}" ] && bucket=(--set "stages.train.bucket_mb=$BUCKET_MB")
threads=$((cores / np > 0 ? cores / np : 1))
one=() many=() after=() waits=() sums=() agrees=() waits0=() sums0=() agrees0=() nb=1
for r in $(seq 1 "$rounds"); do
  a=$(run one 1)
  b=$(run many "$np" "${bucket[@]}")
  read -r wa su ag nb <<<"$(shares many)"
  c=$(run after "$np" --set stages.train.bucket_mb=0)
  read -r wa0 su0 ag0 _ <<<"$(shares after)"
  one+=("$a") many+=("$b") after+=("$c") waits+=("$wa") sums+=("$su") agrees+=("$ag")
  waits0+=("$wa0") sums0+=("$su0") agrees0+=("$ag0")
  printf '{"bench":"data_parallel","round":%d,"processes":1,"threads":%d,"mol_per_s":%s}\n' "$r" "$cores" "$a"
  printf '{"bench":"data_parallel","round":%d,"processes":%d,"threads":%d,"sums":"bucketed","buckets_per_step":%d,"mol_per_s":%s,"wait_pct":%s,"sum_pct":%s,"agree_pct":%s}\n' \
    "$r" "$np" "$threads" "$nb" "$b" "$wa" "$su" "$ag"
  printf '{"bench":"data_parallel","round":%d,"processes":%d,"threads":%d,"sums":"after_backward","mol_per_s":%s,"wait_pct":%s,"sum_pct":%s,"agree_pct":%s}\n' \
    "$r" "$np" "$threads" "$c" "$wa0" "$su0" "$ag0"
done

/usr/bin/python3 - "$work" "$np" "$model" "$edges" "$epochs" "$batch" "$cores" "${one[*]}" "${many[*]}" \
  "${after[*]}" "${waits[*]}" "${sums[*]}" "${agrees[*]}" "${waits0[*]}" "${agrees0[*]}" "$nb" <<'EOF'
import json, math, statistics, struct, sys
(work, np_, model, edges, epochs, batch, cores, one, many, after, waits, sums, agrees, waits0, agrees0,
 nb) = sys.argv[1:]
def params(wd):
    b = open(f"{work}/{wd}/models/train-0/epoch-{int(epochs)}.ckpt", "rb").read()
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
a, b, c = params("one"), params("many"), params("after")
rel = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)) / sum(x * x for x in a))
med = lambda s: statistics.median(float(x) for x in s.split())
m1, mn, m0 = med(one), med(many), med(after)
w, w0 = med(waits), med(waits0)
print(json.dumps({"bench": "data_parallel", "summary": True, "model": model, "edges": edges, "epochs": int(epochs),
                  "batch_size": int(batch), "cores": int(cores), "processes": int(np_),
                  "buckets_per_step": int(nb), "one_process_mol_per_s": m1, "processes_mol_per_s": mn,
                  "ratio": round(mn / m1, 3), "one_sum_after_backward_mol_per_s": m0,
                  "bucketed_vs_one_sum": round(mn / m0, 3),
                  "wait_pct_of_step": w, "sums_pct_of_step": med(sums),
                  "agreement_pct_of_step": med(agrees),
                  "one_sum_wait_pct_of_step": w0, "one_sum_agreement_pct_of_step": med(agrees0),
                  "overlap": round(1 - w / w0, 3) if w0 > 0 else None,
                  "bucketed_equals_one_sum": b == c,
                  "params_rel_diff": rel}))
EOF
