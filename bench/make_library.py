#!/usr/bin/python3
"""A synthetic 3D screening library for bench/screen_scale.sh.

    make_library.py LIGAND_DIR N OUT.sdf.gz [SEED]

Writes N SDF records cycling through the V2000 SDF files of LIGAND_DIR (the
13,997 PDB ligands of ../shared/data/ligands3d, sorted by file name). Copy i
of a ligand gets its own rigid motion (a uniformly random rotation, from a
random unit quaternion, and a translation uniform in [-50, 50) Å on each
axis) and its own name, "<title>_<i>", so every record is distinct; the
chemistry repeats every 13,997 records. Bonds, charges and properties are
copied unchanged. Deterministic for a given SEED.
"""
import gzip
import math
import os
import random
import sys


def read_ligands(folder):
    out = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".sdf"):
            continue
        with open(os.path.join(folder, name), encoding="latin-1") as f:
            text = f.read()
        rec = text.split("$$$$")[0].rstrip("\n").split("\n")
        if len(rec) < 4 or "V2000" not in rec[3]:
            continue  # only V2000 connection tables are moved
        n_atoms = int(rec[3][0:3])
        out.append((rec, n_atoms))
    return out


def rotation(rng):
    # a uniformly random unit quaternion (Shoemake), as a matrix
    u1, u2, u3 = rng.random(), rng.random(), rng.random()
    a, b = math.sqrt(1 - u1), math.sqrt(u1)
    w, x = a * math.sin(2 * math.pi * u2), a * math.cos(2 * math.pi * u2)
    y, z = b * math.sin(2 * math.pi * u3), b * math.cos(2 * math.pi * u3)
    return ((1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
            (2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
            (2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)))


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    folder, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    ligs = read_ligands(folder)
    if not ligs:
        sys.exit(f"make_library.py: no V2000 SDF files in {folder}")
    tmp = out + ".part"
    with gzip.open(tmp, "wt", compresslevel=1, encoding="latin-1", newline="\n") as f:
        for i in range(n):
            rec, n_atoms = ligs[i % len(ligs)]
            r = rotation(rng)
            t = [rng.uniform(-50, 50) for _ in range(3)]
            lines = [f"{rec[0].strip()}_{i}", rec[1], rec[2], rec[3]]
            for line in rec[4:4 + n_atoms]:
                p = (float(line[0:10]), float(line[10:20]), float(line[20:30]))
                q = [r[k][0] * p[0] + r[k][1] * p[1] + r[k][2] * p[2] + t[k] for k in range(3)]
                lines.append(f"{q[0]:10.4f}{q[1]:10.4f}{q[2]:10.4f}{line[30:]}")
            lines.extend(rec[4 + n_atoms:])
            f.write("\n".join(lines))
            f.write("\n$$$$\n")
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
