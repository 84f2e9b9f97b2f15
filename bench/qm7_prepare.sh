#!/usr/bin/env bash
# qm7_prepare.sh — QM7 (deepchem's gdb7.tar.gz) as an SDF and a label CSV
# that se3screen joins by molecule name, pairing each record with its
# u0_atom by title rather than by position.
#
#   bash bench/qm7_prepare.sh QM7_DIR OUT_DIR [EVERY [OFFSET]]
#
# QM7_DIR holds gdb7.tar.gz (gdb7.sdf, gdb7.sdf.csv); see ../shared/data/README.md.
# Writes OUT_DIR/qm7.sdf (records copied byte for byte) and OUT_DIR/qm7.csv
# (name,u0_atom). With EVERY and OFFSET only records gdb7k_NNNN with
# NNNN % EVERY == OFFSET are kept (the quickstart's subset).
#
# Pairing: the record titled gdb7k_NNNN(.xyz) is data row NNNN (0-based, after
# the header) of gdb7.sdf.csv. Records without such a title (4 hydrogen-only
# fragments with junk titles) are left out, and so are the 9 C7H16 records
# that lack some of their 16 hydrogens (their geometry is not the molecule
# the label belongs to; found as an acyclic all-single-bond C7 skeleton
# with fewer than 16 hydrogens). Every record left out is listed on stderr
# with the reason; the last line on stdout is a JSON summary of the counts.
# Records Open Babel wrote with lost double bonds and M  RAD marks get their
# bond orders back (bench/qm7_bond_orders.py): QM7 has no radicals.
set -euo pipefail
src=${1:?usage: qm7_prepare.sh QM7_DIR OUT_DIR [EVERY [OFFSET]]}
out=${2:?usage: qm7_prepare.sh QM7_DIR OUT_DIR [EVERY [OFFSET]]}
every=${3:-1}
offset=${4:-0}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$src/gdb7.tar.gz" -C "$tmp" gdb7.sdf gdb7.sdf.csv

awk -v every="$every" -v offset="$offset" -v sdf="$out/qm7.sdf" -v csv="$out/qm7.csv" '
  # First file: the label CSV; row r (0-based after the header) -> label[r].
  FNR == NR {
    if (FNR == 1) {
      if ($0 != "u0_atom") { print "gdb7.sdf.csv: expected the header u0_atom, got " $0 > "/dev/stderr"; bad = 1; exit 1 }
      next
    }
    label[FNR - 2] = $1; n_labels = FNR - 1
    next
  }
  # Second file: gdb7.sdf, one record per "$$$$".
  { buf = buf $0 "\n"; line++ }
  line == 1 { title = $0 }
  line == 4 { n_atoms = substr($0, 1, 3) + 0; n_bonds = substr($0, 4, 3) + 0 }
  line >= 5 && line < 5 + n_atoms { el[line - 4] = $4; count[$4 == "C" ? "C" : $4 == "H" ? "H" : "other"]++ }
  line >= 5 + n_atoms && line < 5 + n_atoms + n_bonds {
    # bonds between heavy atoms, and how many of them are not single
    a = substr($0, 1, 3) + 0; b = substr($0, 4, 3) + 0
    if (el[a] != "H" && el[b] != "H") { heavy_bonds++; if (substr($0, 7, 3) + 0 != 1) multiple++ }
  }
  $0 == "$$$$" {
    rec++
    why = ""
    if (title !~ /^gdb7k_[0-9][0-9][0-9][0-9](\.xyz)?$/) why = "title is not gdb7k_NNNN"
    else {
      id = substr(title, 7, 4) + 0
      if (!(id in label)) why = "no row " id " in gdb7.sdf.csv"
      # an acyclic, saturated C7 skeleton (6 single C-C bonds) is heptane or
      # an isomer, C7H16; with fewer hydrogens the record is broken
      else if (count["C"] == 7 && count["other"] == 0 && heavy_bonds == 6 && multiple == 0 && count["H"] < 16)
        why = "C7H16 with only " count["H"] " hydrogens"
    }
    if (why != "") { printf "record %d (%s): left out: %s\n", rec, title, why > "/dev/stderr"; skipped++ }
    else if (id % every == offset) {
      if (used[id]++) { printf "record %d: title %s seen twice\n", rec, title > "/dev/stderr"; bad = 1; exit 1 }
      printf "%s", buf > sdf
      if (!kept++) print "name,u0_atom" > csv
      print title "," label[id] > csv
    }
    buf = ""; line = 0; heavy_bonds = 0; multiple = 0; delete count; delete el
  }
  END {
    if (bad) exit 1
    printf "{\"records\": %d, \"labels\": %d, \"left_out\": %d, \"kept\": %d}\n", rec, n_labels, skipped, kept
  }
' "$tmp/gdb7.sdf.csv" "$tmp/gdb7.sdf"
# The bonds Open Babel's XYZ reading left single, with M  RAD marks, get their
# orders back (bench/qm7_bond_orders.py; its JSON summary on stderr).
/usr/bin/python3 "$(dirname "$0")/qm7_bond_orders.py" "$out/qm7.sdf" "$tmp/fixed.sdf" >&2
mv "$tmp/fixed.sdf" "$out/qm7.sdf"
