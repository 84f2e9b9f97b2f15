#!/usr/bin/env python3
"""test_rooms: the house's rules for where code lives, checked on the source.

- Includes flow one way: pipeline -> stages -> {chem, models} -> common.
  stages/ includes nothing of pipeline/; chem/ and models/ nothing of
  stages/ or pipeline/; common/ only common/.
- Stages never call each other's functions: a stage's file (and the
  ingest folder) defines no function outside itself but its struct stage
  (ingest's shared helpers are declared in stages/ingest/internal.h, which
  nothing outside the folder includes).
- No SQL under models/: the result database is pipeline/'s and stages/'.
- No busy timeout written as a number in pipeline/ or stages/: the schema's
  store.busy_timeout_ms is its one source (cfg_busy_timeout_ms).
- No file in stages/, pipeline/ or chem/ over 1,000 lines (stages/train.c
  and pipeline/runner.c: 900); no function in stages/ or pipeline/ over
  150 lines.
- struct stage has at most 20 members, and pipeline/slurm.c names no stage.

Each failure is printed as FILE:LINE: what; the exit status is the count
of failures (0: all kept).
    rooms.py SOURCE_DIR
"""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else '.'
failures = []


def fail(path, line, what):
    failures.append('%s:%d: %s' % (os.path.relpath(path, root), line, what))


def sources(folder, exts=('.c', '.h', '.cc', '.cu')):
    top = os.path.join(root, folder)
    for d, _, files in os.walk(top):
        for f in sorted(files):
            if f.endswith(exts):
                yield os.path.join(d, f)


def code_only(text):
    """The text with comments and string/char literals blanked (line numbers kept)."""
    text = re.sub(r'/\*.*?\*/', lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text, flags=re.S)
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


def functions(text):
    """(name, first line, lines) of each function body at file scope."""
    lines = code_only(text).split('\n')
    depth, start = 0, None
    for i, line in enumerate(lines):
        if line.lstrip().startswith('#'):
            continue
        for ch in line:
            if ch == '{':
                if depth == 0:
                    j = i
                    while j > 0 and not (line_starts(lines[j]) and '(' in lines[j]):
                        j -= 1
                    head = lines[j].split('(')[0]
                    m = re.search(r'([A-Za-z_][A-Za-z_0-9]*)\s*$', head)
                    start = (m.group(1) if m and '=' not in head else None, j)
                depth += 1
            elif ch == '}':
                depth -= 1
                if depth == 0 and start:
                    if start[0]:
                        yield start[0], start[1] + 1, i - start[1] + 1
                    start = None


def line_starts(s):
    return bool(s) and not s[0].isspace()


# -- includes flow one way
allowed = {'pipeline': None, 'stages': ('stages/', 'chem/', 'models/', 'common/'),
           'chem': ('chem/', 'models/', 'common/'), 'models': ('models/', 'common/'), 'common': ('common/',)}
for layer, ok in allowed.items():
    if ok is None:
        continue
    for path in sources(layer):
        for n, line in enumerate(open(path, encoding='utf-8', errors='replace'), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            inc = m.group(1) if m else ''
            # a path relative to the file ("../stage.h" in stages/ingest/)
            # is judged by where it leads
            near = os.path.normpath(os.path.join(os.path.dirname(path), inc))
            if inc.startswith('.') and os.path.exists(near):
                inc = os.path.relpath(near, root)
            if m and '/' in inc and not inc.startswith(ok):
                fail(path, n, '%s/ includes "%s" (includes flow pipeline -> stages -> {chem, models} -> common)'
                     % (layer, m.group(1)))

# -- a stage exports its struct stage alone
stage_files = ['acquire', 'dock', 'graph', 'basis', 'train', 'score', 'rank', 'report']
for name in stage_files:
    path = os.path.join(root, 'stages', name + '.c')
    text = code_only(open(path, encoding='utf-8').read())
    for m in re.finditer(r'^(?!static\b)(?!const struct stage\b)[A-Za-z_][^;{}()=]*\b([A-Za-z_][A-Za-z_0-9]*)\s*\([^;]*?\)\s*\{',
                         text, re.M):
        fail(path, text.count('\n', 0, m.start()) + 1,
             'stage %s defines %s() for other files: stages talk through the database and pipeline/' % (name, m.group(1)))
for layer in ('stages', 'pipeline', 'chem', 'models', 'common', 'tests'):
    for path in sources(layer):
        if os.path.dirname(path) == os.path.join(root, 'stages', 'ingest'):
            continue
        for n, line in enumerate(open(path, encoding='utf-8', errors='replace'), 1):
            if re.match(r'\s*#\s*include\s+"(stages/)?ingest/internal\.h"', line):
                fail(path, n, 'includes ingest\'s private header (stages/ingest/internal.h)')

# -- the busy timeout from the schema (store.busy_timeout_ms, cfg_busy_timeout_ms), never a literal
for layer in ('pipeline', 'stages'):
    for path in sources(layer, ('.c',)):
        text = code_only(open(path, encoding='utf-8', errors='replace').read())
        for m in re.finditer(r'\bsqlite3_busy_timeout\s*\([^;]*?,\s*\d+\s*\)|\bstore_open\s*\([^;{]*?,\s*\d+\s*,\s*[\w.>-]*err\b', text):
            fail(path, text.count('\n', 0, m.start()) + 1,
                 'a busy timeout written as a number: take cfg_busy_timeout_ms (store.busy_timeout_ms)')

# -- no SQL under models/
for path in sources('models'):
    text = code_only(open(path, encoding='utf-8', errors='replace').read())
    for m in re.finditer(r'\bsqlite3_\w+', text):
        fail(path, text.count('\n', 0, m.start()) + 1, 'models/ uses SQLite (%s): the database is not its room' % m.group(0))
        break

# -- sizes
for layer in ('stages', 'pipeline', 'chem'):
    for path in sources(layer):
        n = sum(1 for _ in open(path, encoding='utf-8', errors='replace'))
        if n > 1000:
            fail(path, n, '%d lines, more than 1,000: one job to a file' % n)
# the two files every change passes through, held under 900 (issue 34's
# line; issue 71 brought them back under it)
for rel in ('stages/train.c', 'pipeline/runner.c'):
    path = os.path.join(root, rel)
    n = sum(1 for _ in open(path, encoding='utf-8', errors='replace'))
    if n > 900:
        fail(path, n, '%d lines, more than 900: the stage and the runner name their steps in rooms of their own' % n)
for layer in ('stages', 'pipeline'):
    for path in sources(layer, ('.c',)):
        for name, line, n in functions(open(path, encoding='utf-8', errors='replace').read()):
            if n > 150:
                fail(path, line, '%s() is %d lines, more than 150: name its steps' % (name, n))

# -- the stage contract
stage_h = os.path.join(root, 'stages', 'stage.h')
text = code_only(open(stage_h, encoding='utf-8').read())
m = re.search(r'^struct stage \{(.*?)^\};', text, re.S | re.M)
if not m:
    fail(stage_h, 1, 'no struct stage')
else:
    body = m.group(1)
    members = sum(len(decl.split(',')) if '(' not in decl else 1
                  for decl in (d.strip() for d in body.split(';')) if decl)
    if members > 20:
        fail(stage_h, text.count('\n', 0, m.start()) + 1, 'struct stage has %d members, more than 20' % members)
    print('rooms: struct stage has %d members' % members)

# -- slurm.c names no stage
names = ['ingest', 'acquire', 'dock', 'graph', 'basis', 'train', 'score', 'rank', 'report']
path = os.path.join(root, 'pipeline', 'slurm.c')
for n, line in enumerate(open(path, encoding='utf-8'), 1):
    for s in names:
        if '"%s"' % s in line:
            fail(path, n, 'names the stage "%s": what slurm must know of a stage, the stage declares' % s)

for f in failures:
    print(f)
print('rooms: %d failure%s' % (len(failures), '' if len(failures) == 1 else 's'))
sys.exit(min(len(failures), 100))
