#!/usr/bin/python3
"""qm7_bond_orders.py - put back the multiple bonds that QM7's SD file lost.

deepchem's gdb7.sdf was written by Open Babel from XYZ files; where its bond
perception missed a double or triple bond it wrote every bond single and
marked atoms with "M  RAD" (CH3-O-N=CH2 came out as CH3-O-[N]-[CH2]; an
oxazole with a four-valent N and a radical C). QM7's molecules are neutral
and closed-shell: for a record with M  RAD lines this assigns the bond
orders afresh from the connectivity, every C four-valent, N three, O two,
S two, four or six (a search over the heavy-atom bonds, the first assignment found; rings
of alternating bonds have several, all one molecule), and drops the M  RAD
lines. A record with no such assignment is copied unchanged (se3screen then
rejects it as a radical) and named on stderr.

  bench/qm7_bond_orders.py IN.sdf OUT.sdf    (prints a JSON summary)
"""
import itertools
import json
import sys

VALENCE = {"C": 4, "N": 3, "O": 2, "S": 2, "H": 1}


def assign(bonds, need, extra):
    """Extra bond orders (0-2) on bonds whose ends both need more, meeting
    every atom's need exactly; True when found (extra filled)."""
    open_bonds = [k for k, (_, a, b) in enumerate(bonds) if need[a] > 0 and need[b] > 0]
    for k in range(len(extra)):
        extra[k] = 0

    def search(pos):
        if pos == len(open_bonds):
            return all(v == 0 for v in need.values())
        k = open_bonds[pos]
        _, a, b = bonds[k]
        for add in range(min(need[a], need[b], 2), -1, -1):  # most multiple first
            need[a] -= add
            need[b] -= add
            extra[k] = add
            if search(pos + 1):
                return True
            need[a] += add
            need[b] += add
            extra[k] = 0
        return False

    return search(0)


def fix(lines):
    """lines of one record (without $$$$); returns (lines, status)."""
    counts = lines[3]
    n_atoms, n_bonds = int(counts[0:3]), int(counts[3:6])
    first_bond = 4 + n_atoms
    rad_lines = [i for i, l in enumerate(lines) if l.startswith("M  RAD")]
    if not rad_lines:
        return lines, "unchanged"
    element = {k + 1: lines[4 + k][31:34].strip() for k in range(n_atoms)}
    bonds = []  # [line index, a, b]
    for i in range(first_bond, first_bond + n_bonds):
        l = lines[i]
        bonds.append((i, int(l[0:3]), int(l[3:6])))
    # bond orders beyond single that each atom needs: its valence minus its
    # neighbours, every bond starting single; S may be two-, four- or
    # six-valent (sulfoxides, sulfones): each choice in turn, lowest first
    degree = {a: 0 for a in element}
    for _, a, b in bonds:
        degree[a] += 1
        degree[b] += 1
    sulfurs = [a for a, e in element.items() if e == "S"]
    extra = [0] * len(bonds)
    for choice in itertools.product((2, 4, 6), repeat=len(sulfurs)):
        valence = {a: VALENCE.get(e, -99) for a, e in element.items()}
        valence.update(zip(sulfurs, choice))
        need = {a: valence[a] - degree[a] for a in element}
        if any(v < 0 for v in need.values()):
            continue
        if assign(bonds, need, extra):
            break
    else:
        return lines, "unpaired"
    out = list(lines)
    for k, (i, a, b) in enumerate(bonds):
        out[i] = out[i][0:6] + "%3d" % (1 + extra[k]) + out[i][9:]
    out = [l for k, l in enumerate(out) if k not in rad_lines]
    return out, "fixed"


def main():
    src, dst = sys.argv[1], sys.argv[2]
    text = open(src).read()
    records = text.split("$$$$\n")
    tail = records.pop() if not text.endswith("$$$$\n") else None
    if text.endswith("$$$$\n"):
        records.pop()  # the empty string after the last $$$$
    summary = {"records": 0, "fixed": 0, "unchanged": 0, "unpaired": 0}
    with open(dst, "w") as out:
        for rec in records:
            lines = rec.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            fixed, status = fix(lines)
            summary["records"] += 1
            summary[status] += 1
            if status == "unpaired":
                print("qm7_bond_orders: %s: unpaired electrons left as they are" % lines[0], file=sys.stderr)
            out.write("\n".join(fixed) + "\n$$$$\n")
        if tail:
            out.write(tail)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
