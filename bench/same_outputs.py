#!/usr/bin/python3
"""same_outputs.py OLD NEW: the outputs of two runs of bench/same_outputs.sh,
compared. Files: *.ckpt and other files under a models/ folder byte for byte;
*.csv and *.sdf as text with Open Babel's time-stamp line (the second line of
each SDF record) masked; screen.db (and every other *.db) table by table, row
by row, with the columns that hold when, where and by what command a thing
ran masked (MASK below). Prints one JSON line, the differences listed."""
import hashlib, json, os, re, sqlite3, sys

MASK = re.compile(r'(^|_)(time|started|finished|updated|created|at|seconds|host|pid|path|paths|'
                  r'command|command_line|cwd|workdir|elapsed|wall|date|when|heartbeat|ms|s)$|'
                  r'^(value)$')
# meta's `value` is masked only for keys that hold times, paths or hosts
# a value that is a time stamp, whatever its column's name
ISO = re.compile(r'^\d{4}-\d\d-\d\d[T ]\d\d:\d\d')
META_KEYS = re.compile(r'time|started|finished|path|host|pid|workdir|command|created|updated|version')


def files(top):
    for d, _, fs in os.walk(top):
        for f in fs:
            p = os.path.join(d, f)
            yield os.path.relpath(p, top)


def text_masked(p):
    lines = open(p, 'rb').read().split(b'\n')
    if p.endswith('.sdf'):
        start = True
        for i, l in enumerate(lines):
            if start and i + 1 < len(lines):
                lines[i + 1] = b'<header line masked>'
            start = l.startswith(b'$$$$')
    return b'\n'.join(lines)


def table_rows(db, t):
    cols = [r[1] for r in db.execute('PRAGMA table_info("%s")' % t)]
    rows = []
    for r in db.execute('SELECT * FROM "%s"' % t):
        row = list(r)
        for i, c in enumerate(cols):
            if t == 'meta' and c == 'value':
                if META_KEYS.search(str(row[0])):
                    row[i] = '*'
            elif MASK.search(c) and c != 'value':
                row[i] = '*'
            elif isinstance(row[i], str) and ISO.match(row[i]):
                row[i] = '*'
            elif isinstance(row[i], bytes):
                row[i] = hashlib.sha256(row[i]).hexdigest()[:16]
        rows.append(tuple('' if v is None else str(v) for v in row))
    return cols, sorted(rows)


def compare_db(a, b, rel, diffs):
    da, db = sqlite3.connect(a), sqlite3.connect(b)
    ta = {r[0] for r in da.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    tb = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if ta != tb:
        diffs.append('%s: tables differ: %s' % (rel, sorted(ta ^ tb)))
    n = 0
    for t in sorted(ta & tb):
        ca, ra = table_rows(da, t)
        cb, rb = table_rows(db, t)
        n += len(ra)
        if ca != cb:
            diffs.append('%s: %s: columns differ' % (rel, t))
        elif ra != rb:
            only_a = [r for r in ra if r not in set(rb)][:2]
            diffs.append('%s: %s: %d vs %d rows, e.g. old %s' % (rel, t, len(ra), len(rb), only_a))
    return n


def main(old, new):
    diffs, counts = [], {'checkpoints': 0, 'texts': 0, 'databases': 0, 'rows': 0}
    fo, fn = set(files(old)), set(files(new))
    keep = lambda f: ('/models/' in '/' + f or f.endswith(('.ckpt', '.csv', '.sdf', '.db')))
    skip = lambda f: f.endswith(('-wal', '-shm', '-journal', '.log', '.lock', '.html', '.png', '.svg'))
    for f in sorted(f for f in fo | fn if keep(f) and not skip(f)):
        if f not in fo or f not in fn:
            diffs.append('%s: only in %s' % (f, 'old' if f in fo else 'new'))
            continue
        a, b = os.path.join(old, f), os.path.join(new, f)
        if f.endswith('.db'):
            counts['databases'] += 1
            counts['rows'] += compare_db(a, b, f, diffs)
        elif f.endswith(('.csv', '.sdf')):
            counts['texts'] += 1
            if text_masked(a) != text_masked(b):
                diffs.append('%s: text differs' % f)
        else:
            counts['checkpoints'] += 1
            if open(a, 'rb').read() != open(b, 'rb').read():
                diffs.append('%s: bytes differ' % f)
    print(json.dumps(dict(counts, differences=len(diffs), listed=diffs[:40])))
    return 1 if diffs else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1], sys.argv[2]))
