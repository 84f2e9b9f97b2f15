#!/usr/bin/python3
"""A SMILES screening library for bench/screen_scale.sh (INPUT=smiles).

    make_smiles_library.py SHARED_DATA_DIR N OUT.smi.gz

Collects the distinct SMILES strings available in ../shared/data (MolPAL's
Enamine 10k, NCI's first 5,000, QM8, the MoleculeNet sets; first column of
each CSV named smiles or mol, the SMILES field of the .smi), in that order,
and writes N records cycling through them, record i named
"<source>_<k>_<i>" (k: the SMILES's index in its source), so that every
record is its own molecule to ingest: 3D coordinates are generated afresh
for each record, nothing is reused between records. Prints the number of
distinct SMILES and where they came from as JSON on stderr.
"""
import csv
import gzip
import io
import json
import os
import sys


def opener(path):
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def from_csv(path):
    with opener(path) as f:
        rows = csv.reader(f)
        head = next(rows)
        col = next(i for i, h in enumerate(head) if h.strip().lower() in ("smiles", "mol"))
        for row in rows:
            if len(row) > col and row[col].strip():
                yield row[col].strip()


def from_smi(path):
    with opener(path) as f:
        for line in f:
            fields = line.split()
            if fields:
                yield fields[0]


def main():
    data, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    sources = [("enamine", from_csv, "docking/Enamine10k.csv.gz"),
               ("nci", from_smi, "nci/rdkit-data_Data_NCI_first_5K.smi.gz"),
               ("qm8", from_csv, "qm8/qm8.csv.gz")]
    mn = os.path.join(data, "moleculenet")
    for name in sorted(os.listdir(mn)) if os.path.isdir(mn) else []:
        if name.endswith(".csv"):
            sources.append((name[:-4].replace("chemprop_", ""), from_csv, os.path.join("moleculenet", name)))
    seen, pool, counts = set(), [], {}
    for tag, read, rel in sources:
        path = os.path.join(data, rel)
        if not os.path.exists(path):
            continue
        counts[tag] = 0
        for k, smi in enumerate(read(path)):
            if smi in seen:
                continue
            seen.add(smi)
            pool.append((smi, "%s_%d" % (tag, k)))
            counts[tag] += 1
    if not pool:
        sys.exit("make_smiles_library: no SMILES found under %s" % data)
    with gzip.open(out, "wt", compresslevel=3) as f:
        for i in range(n):
            smi, name = pool[i % len(pool)]
            f.write("%s %s_%d\n" % (smi, name, i))
    print(json.dumps({"distinct_smiles": len(pool), "by_source": counts, "records": n}), file=sys.stderr)


if __name__ == "__main__":
    main()
