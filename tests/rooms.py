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
  and pipeline/runner.c: 900); no function in stages/, pipeline/, chem/ or
  models/ over 150 lines (C++'s too, in a namespace or extern "C" block).
- No file circle: over chem/, models/, stages/, pipeline/ and common/, no
  file uses a function or global of another that uses one of its own,
  directly or round a longer ring.
- No bare-name include into dev/: a header only dev/ holds is named by its
  path from the project root, and only models/cuda/ names one, the CUDA
  emulator's (dev/cuda_emu/inc/), where nvcc does not compile.
- The runner's tables (stage_state, stage_chunks, stage_runs) are named
  only by pipeline/ledger.c and pipeline/store_schema.c; a result database
  is opened read-only only through ledger_open_ro (query.c, with the user's
  own --timeout, aside); runner.c's and runner_chunks.c's functions are
  under 80 lines.
- An error is a value: no function takes its error as text (a char *err
  with its size_t length) anywhere below the command; it takes a struct
  se3_error * (common/error.h) with the kind and place set where it arose.
- struct stage has at most 20 members, and pipeline/slurm.c names no stage
  in any quotes ("ingest", 'ingest' in SQL).

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


def no_directives(code):
    """code_only's text with preprocessor lines (and their continuations) blanked."""
    out, cont = [], False
    for line in code.split('\n'):
        directive = cont or line.lstrip().startswith('#')
        cont = directive and line.rstrip().endswith('\\')
        out.append('' if directive else line)
    return '\n'.join(out)


def top_level(text):
    """What stands at file scope, as (kind, name, first line, lines, static):
    kind 'function' (a body) or 'global' (a variable defined). The blocks of
    namespace { }, namespace x { } and extern "C" { } are no scope of their
    own: what they hold is at file scope (in an anonymous namespace, static)."""
    code = no_directives(code_only(text))
    opens = []       # a stack: 'ns' (namespace, extern "C"), 'anon', 'fn', 'block'
    head = ''
    depth = 0        # inside a function or another block (struct, initialiser)
    fn = None
    line = 1
    for i, ch in enumerate(code):
        if ch == '\n':
            line += 1
        if depth:
            if ch == '{':
                depth += 1
            elif ch == '}':
                depth -= 1
                if depth == 0:
                    kind = opens.pop()
                    if kind == 'fn':
                        yield 'function', fn[0], fn[1], line - fn[1] + 1, fn[2]
                        head = ''
                    else:               # a struct or an initialiser: its statement goes on to ';'
                        head += '{}'
            continue
        if ch == '{':
            h = head.strip()
            if re.match(r'(inline\s+)?namespace\b[^()]*$|extern\s*""$', h):
                opens.append('anon' if re.match(r'namespace\s*$', h) else 'ns')
            else:
                f = function_head(h)
                if f:
                    name, at = f
                    static = bool(re.search(r'\bstatic\b', h[:at])) or 'anon' in opens
                    at += len(head) - len(head.lstrip())
                    fn = (name, line - head[at:].count('\n'), static)
                    opens.append('fn')
                else:
                    opens.append('block')
                depth = 1
                continue
            head = ''
        elif ch == '}':
            if opens:
                opens.pop()
            head = ''
        elif ch == ';':
            g = global_head(head.strip())
            if g:
                yield ('global', g, line, 1, bool(re.match(r'(static|extern|constexpr)\b', head.strip()))
                       or 'anon' in opens)
            head = ''
        else:
            head += ch


def paren_free(h):
    """h with what stands inside parentheses blanked (lengths kept)."""
    out, d = [], 0
    for ch in h:
        if ch == ')':
            d = max(d - 1, 0)
        out.append(ch if d == 0 else ' ')
        if ch == '(':
            d += 1
    return ''.join(out)


NOT_NAMES = {'__attribute__', '__declspec', 'alignas', '__asm__', 'asm', 'decltype', 'sizeof', 'if', 'for',
             'while', 'switch', 'return', 'operator'}


def function_head(h):
    """(name, offset of it in h) when h heads a function body, else None."""
    if not h or re.match(r'(typedef|using|template\s*<[^>]*>\s*(struct|class|union))\b', h):
        return None
    flat = paren_free(h)
    first = flat.find('(') if '(' in h else -1
    if first < 0 or '=' in flat[:first] or '[' in flat[:first]:
        return None
    if not re.search(r'\)\s*((const|noexcept|override|final|volatile|&|&&)\s*)*$|->\s*[\w:<>*&\s]+$'
                     r'|\)\s*:\s*[\s\S]*\)$', h):
        return None
    for m in re.finditer(r'([A-Za-z_~][\w:~]*)\s*\(', h):
        if flat[m.end() - 1] != '(' or m.group(1).split('::')[-1] in NOT_NAMES:
            continue
        return m.group(1), m.start(1)
    return None


def global_head(h):
    """The name a file-scope statement defines as a variable, else None."""
    if not h or re.match(r'(typedef|using|template|namespace|struct|union|enum|class)\b[^={]*$', h) \
            or re.match(r'(typedef|using|namespace|friend)\b', h) or re.search(r'\bextern\b', h):
        return None
    flat = paren_free(h)
    eq = flat.find('=')
    decl = flat[:eq] if eq >= 0 else flat
    if '(' in h[:eq if eq >= 0 else len(h)] and not re.search(r'\(\s*\*', h):
        return None         # a prototype (or a macro call)
    decl = re.sub(r'\[[^\]]*\]', '', decl)
    m = re.search(r'([A-Za-z_]\w*)\s*$', decl)
    if not m or not re.search(r'[\w*&>}]\s+\**\s*' + m.group(1) + r'\s*$', decl):
        return None
    return m.group(1)


def comments_blanked(text):
    """The text with comments blanked, string literals kept (line numbers kept)."""
    text = re.sub(r'/\*.*?\*/', lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def functions(text):
    """(name, first line, lines) of each function body at file scope."""
    for kind, name, line, n, _ in top_level(text):
        if kind == 'function':
            yield name, line, n


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
            if m and '/' in inc and not inc.startswith(ok + ('dev/',)):
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
# functions: C's and C++'s (in a namespace or extern "C" block too), CUDA's
for layer in ('stages', 'pipeline', 'chem', 'models'):
    for path in sources(layer, ('.c', '.cc', '.cu')):
        for name, line, n in functions(open(path, encoding='utf-8', errors='replace').read()):
            if n > 150:
                fail(path, line, '%s() is %d lines, more than 150: name its steps' % (name, n))
# the runner reads as a line of named steps (issue 71): run_stage and a
# stage's chunks (choosing the next, the processes' agreement, the summary)
# in functions under 80 lines
for rel in ('pipeline/runner.c', 'pipeline/runner_chunks.c'):
    path = os.path.join(root, rel)
    for name, line, n in functions(open(path, encoding='utf-8', errors='replace').read()):
        if n >= 80:
            fail(path, line, '%s() is %d lines, 80 or more: the runner names its steps' % (name, n))

# -- no file circles
# Calls between files run one way: file X uses file Y when X names a
# function or global that Y defines for other files (not static, not in an
# anonymous namespace); a circle of such uses (X uses Y, Y uses X, or a
# longer ring) is one room in two files: split it so that what both need
# stands in a file of its own. Textual: a name counts wherever X's code
# (not its comments or strings) holds it, but not as a member (.name,
# ->name); C++ members (Class::name) tie nothing here.
def file_uses(layers):
    """{file: {file it uses: {names}}} over the layers' sources."""
    defined, own, words = {}, {}, {}
    for layer in layers:
        for path in sources(layer, ('.c', '.cc', '.cu')):
            text = open(path, encoding='utf-8', errors='replace').read()
            rel = os.path.relpath(path, root)
            own[rel] = set()
            for kind, name, line, n, static in top_level(text):
                if '::' in name:
                    continue
                own[rel].add(name)
                if not static and name != 'main':
                    defined.setdefault(name, set()).add(rel)
            words[rel] = set(re.findall(r'(?<![\w.])(?<!->)(?<!::)[A-Za-z_]\w*', code_only(text)))
    uses = {}
    for rel, ws in words.items():
        for w in ws - own[rel]:
            for other in defined.get(w, ()):
                uses.setdefault(rel, {}).setdefault(other, set()).add(w)
    return uses


def circles(uses):
    """The strongly connected sets of files of more than one (Tarjan's)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(uses.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            ring = []
            while True:
                w = stack.pop()
                on.discard(w)
                ring.append(w)
                if w == v:
                    break
            if len(ring) > 1:
                out.append(sorted(ring))

    sys.setrecursionlimit(10000)
    for v in sorted(uses):
        if v not in index:
            visit(v)
    return out


uses = file_uses(('chem', 'models', 'stages', 'pipeline', 'common'))
for ring in sorted(circles(uses)):
    ties = ['%s uses %s' % (x, '; '.join('%s\'s %s' % (y, ', '.join(sorted(uses[x][y])))
                                        for y in sorted(uses[x]) if y in ring)) for x in ring]
    fail(os.path.join(root, ring[0]), 1, 'a file circle (%s): %s' % (' <-> '.join(ring), ' | '.join(ties)))

# -- bare-name includes into dev/
# A header under dev/ is a development tool's, not the build's: included by
# a bare name that nothing beside the file nor the project root holds, it
# compiles only where the tool's -I finds it, and no rule here sees it.
# models/cuda/ alone may include the CUDA emulator's headers, by their path
# from the project root (dev/cuda_emu/inc/...), where nvcc does not compile
# (#ifndef __CUDACC__, or #ifdef __CUDACC__'s #else): dev/cuda_emu/run.sh
# compiles models/cuda/ with -I dev/cuda_emu/inc -I the project root.
def not_nvcc(lines):
    """The numbers of the lines nvcc does not compile (__CUDACC__ undefined)."""
    out, stack = set(), []
    for n, line in enumerate(lines, 1):
        m = re.match(r'\s*#\s*(ifdef|ifndef|if|elif|else|endif)\b(.*)', line)
        if not m:
            if any(cuda and neg for cuda, neg in stack):
                out.add(n)
        elif m.group(1) in ('ifdef', 'ifndef', 'if'):
            cond = m.group(2)
            stack.append(('__CUDACC__' in cond,
                          m.group(1) == 'ifndef' or bool(re.search(r'!\s*defined\s*\(?\s*__CUDACC__', cond))))
        elif m.group(1) in ('elif', 'else') and stack:
            cuda, neg = stack[-1]
            stack[-1] = (cuda and m.group(1) == 'else', not neg)
        elif m.group(1) == 'endif' and stack:
            stack.pop()
    return out


dev_files = [os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(os.path.join(root, 'dev'))
             for f in files]
for layer in ('chem', 'models', 'stages', 'pipeline', 'common'):
    for path in sources(layer):
        lines = open(path, encoding='utf-8', errors='replace').read().split('\n')
        emu = None
        for n, line in enumerate(lines, 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            inc = os.path.normpath(m.group(1))
            if inc.startswith('dev/'):
                emu = not_nvcc(lines) if emu is None else emu
                if not (os.path.relpath(path, root).startswith('models/cuda/')
                        and inc.startswith('dev/cuda_emu/inc/') and n in emu):
                    fail(path, n, 'includes "%s" from dev/: only models/cuda/ includes the CUDA emulator\'s headers '
                         '(dev/cuda_emu/inc/), where nvcc does not compile' % m.group(1))
            elif not os.path.exists(os.path.join(os.path.dirname(path), inc)) \
                    and not os.path.exists(os.path.join(root, inc)):
                there = [d for d in dev_files if d.endswith('/' + inc)]
                if there:
                    fail(path, n, 'includes "%s" by a bare name that only dev/ holds (%s): name it by its path from '
                         'the project root' % (m.group(1), ', '.join(sorted(there))))

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

# -- slurm.c names no stage, in any quotes: not "ingest", not 'ingest' in
# SQL (it asked for stage = 'ingest' once), not \"ingest\"; what it must
# know of a stage, the stage declares (struct stage's flags)
names = ['ingest', 'acquire', 'dock', 'graph', 'basis', 'train', 'score', 'rank', 'report']
quoted = re.compile(r'(\\?["\'`])(%s)\1' % '|'.join(names))
for path in [os.path.join(root, 'pipeline', 'slurm.c')]:
    text = comments_blanked(open(path, encoding='utf-8', errors='replace').read())
    for m in quoted.finditer(text):
        fail(path, text.count('\n', 0, m.start()) + 1,
             'names the stage %s: what slurm must know of a stage, the stage declares' % m.group(0))

# -- the runner's tables in the ledger alone (issue 71): stage_state,
# stage_chunks and stage_runs are named in code only by pipeline/ledger.c
# (the runner's bookkeeping) and pipeline/store_schema.c (their definition);
# a stage asks through struct stage_ledger (stages/stage.h)
ledger_ok = {os.path.join('pipeline', 'ledger.c'), os.path.join('pipeline', 'store_schema.c')}
tables = re.compile(r'\b(stage_state|stage_chunks|stage_runs)\b')
for layer in ('pipeline', 'stages', 'chem', 'models', 'common'):
    for path in sources(layer):
        if os.path.relpath(path, root) in ledger_ok:
            continue
        text = comments_blanked(open(path, encoding='utf-8', errors='replace').read())
        for m in re.finditer(r'"(\\.|[^"\\\n])*"', text):
            t = tables.search(m.group(0))
            # the report's page may say the tables' names to its reader, in <code>
            if t and '<code>' + t.group(1) not in m.group(0):
                fail(path, text.count('\n', 0, m.start()) + 1,
                     "names the runner's table %s: ask pipeline/ledger.h" % t.group(1))

# -- one read-only opener of a result database: ledger_open_ro (ledger.c),
# over store.c's STORE_READONLY; query.c alone opens with the user's own
# --timeout rather than the schema's
opener_ok = {os.path.join('pipeline', f) for f in ('ledger.c', 'store.c', 'query.c')}
for layer in ('pipeline', 'stages', 'chem', 'models', 'common'):
    for path in sources(layer, ('.c', '.cc')):
        if os.path.relpath(path, root) in opener_ok:
            continue
        text = code_only(open(path, encoding='utf-8', errors='replace').read())
        for m in re.finditer(r'\b(STORE_READONLY|SQLITE_OPEN_READONLY)\b', text):
            fail(path, text.count('\n', 0, m.start()) + 1,
                 'opens a database read-only itself (%s): ledger_open_ro (pipeline/ledger.h) is the one way' % m.group(1))

# -- an error is a value (issue 71, common/error.h): below the command, no
# function takes its error as text (char *err, size_t errlen); it takes a
# struct se3_error *, set where the error arises with its kind and place.
# Text stays for what is not an error: a reject's reason (why), an output.
text_err = re.compile(r'\bchar\s*\*\s*(\w*err\w*)\s*,\s*size_t\s+\w+')
for layer in ('pipeline', 'stages', 'chem', 'models', 'common'):
    for path in sources(layer):
        text = code_only(open(path, encoding='utf-8', errors='replace').read())
        for m in text_err.finditer(text):
            fail(path, text.count('\n', 0, m.start()) + 1,
                 'takes its error as text (char *%s, size_t ...): struct se3_error * (common/error.h)' % m.group(1))

for f in failures:
    print(f)
print('rooms: %d failure%s' % (len(failures), '' if len(failures) == 1 else 's'))
sys.exit(min(len(failures), 100))
