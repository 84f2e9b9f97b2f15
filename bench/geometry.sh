#!/usr/bin/env bash
# Geometry stages (graph, basis) on QM7 and on the PDB ligands: end-to-end
# stage throughput (molecules/s, SQLite writes included, timed here), bytes per
# molecule of graphs and of bases at fp32 and fp16, for `bonds` edges and for
# `radius` edges (cutoff 5 Å, no neighbour cap); then geometry_bench on each
# database for compute-only rates and one batch of 100 molecules read from
# SQLite versus recomputed, in the same run. Prints one JSON object per line.
#
#   bash bench/geometry.sh [SE3SCREEN] [GEOMETRY_BENCH] [LIGAND_LIMIT]
#
# Inputs (from ../shared/data): QM7 (gdb7.sdf, 7,169 records) and the 13,997
# 3D PDB ligands (one SDF each, concatenated here in sorted order). Bonds run
# on all ligands; radius runs on the first LIGAND_LIMIT ligand files (default
# 2000): their fp32 bases are about 4 MB a molecule (~990 edges). SE3_QM7_LIMIT (default
# 0 = all) caps the QM7 records the same way. Inputs and ingested databases
# are cached under ${TMPDIR:-/tmp}/se3bench_geometry; the big databases are
# deleted as soon as they are measured.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
se3=${1:-$here/build/se3screen}
geobench=${2:-$here/build/bench/geometry_bench}
lig_limit=${3:-2000}
qm7_limit=${SE3_QM7_LIMIT:-0}
shared=${SE3_SHARED:-$here/../shared}
tmp=${TMPDIR:-/tmp}/se3bench_geometry
threads=2
mkdir -p "$tmp/bin"
# Private copies of both programs: a rebuild of the tree during the run must
# not change them halfway. Cached databases older than se3screen are redone.
cp "$se3" "$tmp/bin/se3screen" && cp "$geobench" "$tmp/bin/geometry_bench"
se3_src=$se3 se3=$tmp/bin/se3screen geobench=$tmp/bin/geometry_bench
trap 'rm -rf "$tmp"/graph_* "$tmp"/basis_*' EXIT # the big databases, also on failure

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b-a}'; }
q() { "$se3" query "$1" "$2" --csv | tail -1; }
# se3screen run DIR/wf.yaml --stage STAGE, its stderr in DIR/log (shown on failure)
stage() {
  "$se3" run "$1/wf.yaml" --stage "$2" >/dev/null 2>"$1/log" || { echo "geometry.sh: $2 failed in $1:" >&2; cat "$1/log" >&2; exit 1; }
}

# first N records of an SDF (0 = all)
sdf_head() {
  if [ "$2" -gt 0 ]; then awk -v n="$2" '{print} /^\$\$\$\$/{if (++k >= n) exit}' "$1"; else cat "$1"; fi
}

prepare() {
  if [ ! -s "$tmp/qm7_all.sdf" ]; then
    rm -rf "$tmp/qm7" && mkdir -p "$tmp/qm7"
    tar xzf "$shared/data/qm7/gdb7.tar.gz" -C "$tmp/qm7" gdb7.sdf
    mv "$tmp/qm7/gdb7.sdf" "$tmp/qm7_all.sdf" && rm -rf "$tmp/qm7"
  fi
  sdf_head "$tmp/qm7_all.sdf" "$qm7_limit" > "$tmp/qm7.sdf.new"
  cmp -s "$tmp/qm7.sdf.new" "$tmp/qm7.sdf" 2>/dev/null && rm "$tmp/qm7.sdf.new" || mv "$tmp/qm7.sdf.new" "$tmp/qm7.sdf"
  if [ ! -s "$tmp/ligands.sdf" ] || [ ! -s "$tmp/ligands_files.txt" ]; then
    rm -rf "$tmp/lig" && mkdir -p "$tmp/lig"
    tar xJf "$shared/data/ligands3d/openbabel_pdb_ligands_sdf.tar.xz" -C "$tmp/lig"
    (cd "$tmp/lig" && find . -name '*.sdf' | LC_ALL=C sort) > "$tmp/ligands_files.txt"
    (cd "$tmp/lig" && xargs cat < "$tmp/ligands_files.txt") > "$tmp/ligands.sdf"
  fi
  if [ ! -s "$tmp/ligands_first$lig_limit.sdf" ]; then
    [ -d "$tmp/lig" ] || { rm -rf "$tmp/lig" && mkdir -p "$tmp/lig" &&
      tar xJf "$shared/data/ligands3d/openbabel_pdb_ligands_sdf.tar.xz" -C "$tmp/lig"; }
    (cd "$tmp/lig" && head -n "$lig_limit" "$tmp/ligands_files.txt" | xargs cat) > "$tmp/ligands_first$lig_limit.sdf"
  fi
}

# workflow.yaml for a workdir: wf DIR INPUT EDGES DTYPE
wf() {
  cat > "$1/wf.yaml" <<YAML
workflow: bench
workdir: $1/out
run: {progress: none}
sets:
  input:
    - {path: $2}
stages:
  ingest: {workers: 2, coordinates: input}   # (the files' geometries are what is measured)
  graph: {edges: $3, cutoff: 5.0, max_neighbors: 0, threads: $threads}
  basis: {max_degree: 3, dtype: $4, threads: $threads}
YAML
}

# Ingest once per input, kept: ingest NAME INPUT
ingest() {
  local name=$1 f=$2 d="$tmp/ingest_$1" t0 t1
  if [ -s "$d/ok" ] && [ "$d/out/screen.db" -nt "$f" ] && [ "$d/out/screen.db" -nt "$se3_src" ]; then return; fi
  rm -rf "$d" && mkdir -p "$d"
  wf "$d" "$f" bonds fp32
  t0=$(now)
  stage "$d" ingest
  t1=$(now)
  local n rej
  n=$(q "$d/out/screen.db" "SELECT count(*) FROM molecules")
  rej=$(q "$d/out/screen.db" "SELECT count(*) FROM rejects")
  echo "{\"bench\":\"geometry\",\"dataset\":\"$name\",\"metric\":\"ingest_stage\",\"workers\":2,\"n_mol\":$n,\"rejected\":$rej,\"s\":$(secs "$t0" "$t1")}" > "$d/ok"
}

# A fresh workdir holding a copy of SRC's database: fresh DIR SRC INPUT EDGES DTYPE
fresh() {
  rm -rf "$1" && mkdir -p "$1/out"
  cp "$2/out/screen.db" "$1/out/screen.db"
  wf "$1" "$3" "$4" "$5"
  sync # the copy's writeback must not land in a timed run
}

# One dataset x edges: graph stage once, then basis at fp32 and fp16 (each on
# a copy of the graph database, so no run deletes an earlier run's bases).
one() {
  local name=$1 f=$2 edges=$3 ing="$tmp/ingest_$1" g="$tmp/graph_$1_$3" t0 t1 s
  local geo=(--dataset "$name" --edges "$edges" --cutoff 5 --max-neighbors 0 --threads "$threads" --reps 5)
  fresh "$g" "$ing" "$f" "$edges" fp32
  t0=$(now)
  stage "$g" graph
  t1=$(now)
  s=$(secs "$t0" "$t1")
  local n e gbytes
  IFS=, read -r n e gbytes < <(q "$g/out/screen.db" "SELECT count(*), sum(n_edges), avg(length(graph)) FROM graphs")
  awk -v name="$name" -v edges="$edges" -v n="$n" -v e="$e" -v gb="$gbytes" -v s="$s" -v t="$threads" 'BEGIN{
    printf "{\"bench\":\"geometry\",\"dataset\":\"%s\",\"edges\":\"%s\",", name, edges;
    if (edges != "bonds") printf "\"cutoff\":5,\"max_neighbors\":0,";
    printf "\"metric\":\"graph_stage\",\"threads\":%d,\"n_mol\":%d,\"n_edges\":%.0f,\"edges_per_mol\":%.1f,", t, n, e, e/n;
    printf "\"s\":%.3f,\"mol_per_s\":%.1f,\"edges_per_s\":%.0f,\"graph_bytes_per_mol\":%.0f}\n", s, n/s, e/s, gb }'
  for dtype in fp32 fp16; do
    local d="$tmp/basis_$1_$3_$dtype" bb size
    fresh "$d" "$g" "$f" "$edges" "$dtype"
    t0=$(now)
    stage "$d" basis
    t1=$(now)
    s=$(secs "$t0" "$t1")
    IFS=, read -r n e bb < <(q "$d/out/screen.db" "SELECT count(*), sum(n_edges), avg(length(basis)) FROM bases")
    size=$(stat -c %s "$d/out/screen.db")
    awk -v name="$name" -v edges="$edges" -v dtype="$dtype" -v n="$n" -v e="$e" -v bb="$bb" -v gb="$gbytes" -v s="$s" \
        -v t="$threads" -v size="$size" 'BEGIN{
      printf "{\"bench\":\"geometry\",\"dataset\":\"%s\",\"edges\":\"%s\",", name, edges;
      if (edges != "bonds") printf "\"cutoff\":5,\"max_neighbors\":0,";
      printf "\"max_degree\":3,\"dtype\":\"%s\",\"metric\":\"basis_stage\",\"threads\":%d,\"n_mol\":%d,\"n_edges\":%.0f,", dtype, t, n, e;
      printf "\"edges_per_mol\":%.1f,\"s\":%.3f,\"mol_per_s\":%.1f,\"edges_per_s\":%.0f,", e/n, s, n/s, e/s;
      printf "\"basis_bytes_per_mol\":%.0f,\"graph_bytes_per_mol\":%.0f,\"db_bytes\":%.0f}\n", bb, gb, size }'
    if [ "$dtype" = fp32 ]; then
      "$geobench" "$d/out/screen.db" "${geo[@]}" --compute-reps 3 --parts graph,basis,encode,batch
    else
      "$geobench" "$d/out/screen.db" "${geo[@]}" --compute-reps 2 --parts encode,batch
    fi
    rm -rf "$d"
  done
  rm -rf "$g"
}

t_start=$(now)
prepare
ingest qm7 "$tmp/qm7.sdf"
ingest pdb_ligands "$tmp/ligands.sdf"
ingest "pdb_ligands_first$lig_limit" "$tmp/ligands_first$lig_limit.sdf"
cat "$tmp/ingest_qm7/ok" "$tmp/ingest_pdb_ligands/ok" "$tmp/ingest_pdb_ligands_first$lig_limit/ok"
one qm7 "$tmp/qm7.sdf" bonds
one qm7 "$tmp/qm7.sdf" radius
one pdb_ligands "$tmp/ligands.sdf" bonds
one "pdb_ligands_first$lig_limit" "$tmp/ligands_first$lig_limit.sdf" radius
echo "{\"bench\":\"geometry\",\"metric\":\"total\",\"s\":$(secs "$t_start" "$(now)")}"
