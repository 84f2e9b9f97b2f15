#!/usr/bin/env bash
# Ingest throughput (molecules/s) with 1 and 2 workers, beside `obabel`
# converting the same input to canonical SMILES and to InChIKey in the same run.
# Prints one JSON object per line; times are the minimum over repetitions.
#
#   bash bench/ingest.sh [SE3SCREEN] [NCI_LIMIT]
#
# Inputs (from ../shared/data): the 13,997 3D PDB ligands (one SDF each,
# concatenated here into one file) and NCI first 5K SMILES with 3D generation
# (NCI_LIMIT records, default all 4999).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
se3=${1:-$here/build/se3screen}
nci_limit=${2:-0}
shared=${SE3_SHARED:-$here/../shared}
tmp=${TMPDIR:-/tmp}/se3bench_ingest
mkdir -p "$tmp"

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b-a}'; }

prepare() {
  if [ ! -s "$tmp/ligands.sdf" ]; then
    rm -rf "$tmp/lig" && mkdir -p "$tmp/lig"
    tar xJf "$shared/data/ligands3d/openbabel_pdb_ligands_sdf.tar.xz" -C "$tmp/lig"
    find "$tmp/lig" -name '*.sdf' | sort | xargs cat > "$tmp/ligands.sdf"
  fi
  if [ "$nci_limit" -gt 0 ]; then
    zcat "$shared/data/nci/rdkit-data_Data_NCI_first_5K.smi.gz" | awk -v n="$nci_limit" 'NR <= n' > "$tmp/nci.smi"
  else
    zcat "$shared/data/nci/rdkit-data_Data_NCI_first_5K.smi.gz" > "$tmp/nci.smi"
  fi
}

# obabel conversions of one input: prints "t_can t_inchikey"
obabel_times() {
  local f=$1 t0 t1 t2
  t0=$(now)
  OMP_NUM_THREADS=1 obabel "$f" -ocan -O "$tmp/out.can" >/dev/null 2>&1 || true
  t1=$(now)
  OMP_NUM_THREADS=1 obabel "$f" -oinchikey -O "$tmp/out.ikey" >/dev/null 2>&1 || true
  t2=$(now)
  echo "$(secs "$t0" "$t1") $(secs "$t1" "$t2")"
}

# se3screen ingest of one input with N workers: prints "seconds stored rejected"
ingest_time() {
  local f=$1 workers=$2 extra=$3 wd="$tmp/wd_$2" t0 t1
  rm -rf "$wd" && mkdir -p "$wd"
  cat > "$wd/wf.yaml" <<YAML
workflow: bench
workdir: $wd/out
run: {progress: none}
sets:
  input:
    - {path: $f}
stages:
  ingest: {workers: $workers, coordinates: input, conformers: 1 $extra}
YAML
  t0=$(now)
  "$se3" run "$wd/wf.yaml" >/dev/null 2>"$wd/log"
  t1=$(now)
  local ok rej
  ok=$("$se3" query "$wd/out/screen.db" "SELECT count(*) FROM molecules" --csv | tail -1)
  rej=$("$se3" query "$wd/out/screen.db" "SELECT count(*) FROM rejects" --csv | tail -1)
  echo "$(secs "$t0" "$t1") $ok $rej"
}

min() { awk -v a="$1" -v b="$2" 'BEGIN{print (b == "" || a + 0 < b + 0) ? a : b}'; }

# reps rounds of (obabel can, obabel inchikey, se3screen 1 worker, 2 workers),
# interleaved so that load on this shared machine hits all alike; the minimum
# of each is reported.
bench_one() {
  local name=$1 f=$2 extra=$3 reps=$4
  local n tc="" ti="" t1="" t2="" a b r
  for ((r = 0; r < reps; r++)); do
    read -r a b < <(obabel_times "$f"); tc=$(min "$a" "$tc"); ti=$(min "$b" "$ti")
    read -r a ok1 rej1 < <(ingest_time "$f" 1 "$extra"); t1=$(min "$a" "$t1")
    read -r a ok2 rej2 < <(ingest_time "$f" 2 "$extra"); t2=$(min "$a" "$t2")
  done
  n=$((ok1 + rej1))
  awk -v name="$name" -v reps="$reps" -v n="$n" -v tc="$tc" -v ti="$ti" -v t1="$t1" -v t2="$t2" -v ok="$ok1" -v rej="$rej1" \
      -v ok2="$ok2" -v rej2="$rej2" 'BEGIN{
    printf "{\"bench\":\"ingest\",\"input\":\"%s\",\"records\":%d,\"stored\":%d,\"rejected\":%d,\"repetitions\":%d,", name, n, ok, rej, reps;
    printf "\"obabel_can_s\":%.2f,\"obabel_inchikey_s\":%.2f,\"se3_1worker_s\":%.2f,\"se3_2workers_s\":%.2f,", tc, ti, t1, t2;
    printf "\"mol_per_s_1worker\":%.1f,\"mol_per_s_2workers\":%.1f,", n/t1, n/t2;
    printf "\"ratio_1worker_vs_obabel_can_plus_inchikey\":%.3f,\"speedup_2_vs_1\":%.3f,", t1/(tc+ti), t1/t2;
    printf "\"same_result_1_and_2_workers\":%s}\n", (ok==ok2 && rej==rej2) ? "true" : "false" }'
}

prepare
bench_one "pdb_ligands_3d_sdf" "$tmp/ligands.sdf" "" 3
bench_one "nci_smiles_gen3d_medium" "$tmp/nci.smi" ", gen3d: auto" 1
