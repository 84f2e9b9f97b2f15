# Rewrites CUDA sources (models/cuda/*.cu, dev/cuda_emu/selftest.cu) for the
# emulator (inc/cuda_runtime.h), keeping every line where it was (the
# compiler's messages name the .cu's lines):
#  - a launch NAME<<<CFG>>>(ARGS) becomes EMU_LAUNCH((CFG), NAME, SHM, (ARGS)),
#    (NAME and SHM in parentheses when NAME's template arguments hold a
#    comma), SHM emu_shm_NAME: the kernel's static shared memory (its __shared__
#    arrays and those of the device functions it calls), whose bytes the
#    launch checks against 48 KiB and which the emulator poisons (0xff
#    bytes: NaN floats, -1 integers) before every block, so a read of shared
#    memory that no thread of the block has written shows in every block;
#  - `__shared__ T name[N];` becomes `auto &name = emu_sh_FUNCTION_name;`, a
#    static at file scope declared just before the function (a variable
#    template in a template function). A __shared__ must be at its
#    function's top level (else this script stops, naming it);
#  - every launch must be checked at once: the statement after it (past the
#    other arms of a switch) holds CU_LAUNCHED(...) or cudaGetLastError(),
#    not discarded by (void), else this script stops (a refused launch would
#    go unnoticed on a GPU).
# Dynamic shared memory (extern __shared__) is not emulated: stops too.
#   usage: launch.py SRC OUT_DIR   (SRC: a folder of .cu files, or one .cu;
#                                   writes OUT_DIR/NAME.cpp for each)
import os
import re
import sys

IDENT = r'[A-Za-z_][A-Za-z0-9_]*'


def fail(fn, code, pos, msg):
    line = code.count('\n', 0, pos) + 1
    sys.exit('launch.py: %s:%d: %s' % (fn, line, msg))


def mask(s):
    """s with comments, string and character literals and preprocessor lines
    blanked (newlines kept), so braces and names are counted in code only."""
    out = list(s)
    i, n = 0, len(s)
    bol = True  # at the start of a line (only blanks so far)
    while i < n:
        c = s[i]
        if c == '\n':
            bol = True
            i += 1
            continue
        if bol and c == '#':  # a directive, with its continuation lines
            j = i
            while j < n and not (s[j] == '\n' and s[j - 1] != '\\'):
                if s[j] == '/' and s[j + 1:j + 2] == '*':  # a comment inside: to its end
                    e = s.find('*/', j + 2)
                    j = n if e < 0 else e + 2
                    continue
                j += 1
            for k in range(i, j):
                if out[k] != '\n': out[k] = ' '
            i = j
            continue
        if not c.isspace(): bol = False
        if s.startswith('//', i):
            j = s.find('\n', i)
            j = n if j < 0 else j
        elif s.startswith('/*', i):
            j = s.find('*/', i + 2)
            j = n if j < 0 else j + 2
        elif c in '"\'':
            j = i + 1
            while j < n and s[j] != c:
                j += 2 if s[j] == '\\' else 1
            j += 1
        else:
            i += 1
            continue
        for k in range(i, min(j, n)):
            if out[k] != '\n': out[k] = ' '
        i = j
    return ''.join(out)


def matching(code, i, open_, close):
    """The index of the bracket closing the one at i."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == open_: depth += 1
        elif code[j] == close:
            depth -= 1
            if depth == 0: return j
    return -1


class Func:
    pass


def functions(fn, code):
    """The function definitions at file scope: name, template header, the
    span of the body (its braces) and the start of its declaration."""
    funcs, depth, start = [], 0, 0
    for i, c in enumerate(code):
        if c == '{':
            if depth == 0:
                head = code[start:i].rstrip()
                if head.endswith(')'):
                    p = len(head) - 1
                    depth_p = 0
                    while p >= 0:  # back to the '(' of the parameter list
                        if head[p] == ')': depth_p += 1
                        elif head[p] == '(':
                            depth_p -= 1
                            if depth_p == 0: break
                        p -= 1
                    m = re.search(r'(%s)\s*$' % IDENT, head[:p])
                    if m:
                        f = Func()
                        f.name, f.start, f.open = m.group(1), start, i
                        f.close = matching(code, i, '{', '}')
                        if f.close < 0: fail(fn, code, i, 'unbalanced braces')
                        t = re.match(r'\s*template\s*(<[^{]*?>)\s*(?=\S)', code[start:i])
                        f.template = t.group(1) if t else None
                        f.is_kernel = re.search(r'\b__global__\b', head) is not None
                        f.shared = []
                        funcs.append(f)
            depth += 1
        elif c == '}':
            depth -= 1
            if depth == 0: start = i + 1
        elif c == ';' and depth == 0:
            start = i + 1
    return funcs


def top_level(code, f, pos):
    """Whether pos is at f's top level (brace depth 1, and not inside
    parentheses, e.g. a for's header)."""
    body = code[f.open:pos]
    return (body.count('{') - body.count('}') == 1 and body.count('(') == body.count(')'))


def template_args(header):
    """`<int NI, typename T = x>` -> `<NI, T>`."""
    params, depth, cur = [], 0, ''
    for c in header[1:-1]:
        if c in '<([': depth += 1
        elif c in '>)]': depth -= 1
        if c == ',' and depth == 0:
            params.append(cur)
            cur = ''
        else:
            cur += c
    params.append(cur)
    return '<%s>' % ', '.join(re.findall(IDENT, p.split('=')[0])[-1] for p in params)


SHARED = re.compile(r'\b__shared__\b')
DECL = re.compile(r'__shared__\s+(?P<type>(?:%s[\s*]*?)+?)\s*\b(?P<name>%s)\s*(?P<dims>(?:\[[^\[\];]*\]\s*)*);'
                  % (r'(?:const\s+|volatile\s+|unsigned\s+|signed\s+|long\s+|short\s+)*' + IDENT, IDENT))


def rewrite(fn, s):
    code = mask(s)
    funcs = functions(fn, code)
    edits = []  # (start, end, text) on s

    def owner(pos):
        for f in funcs:
            if f.open < pos < f.close: return f
        return None

    # the __shared__ declarations: each array becomes a static at file scope
    # (emu_sh_FUNCTION_NAME, a variable template in a template), declared
    # just before its function, and the declaration a reference to it
    for m in SHARED.finditer(code):
        f = owner(m.start())
        if f is None: fail(fn, code, m.start(), '__shared__ outside a function (not emulated)')
        if re.search(r'\bextern\s*$', code[:m.start()]):
            fail(fn, code, m.start(), 'extern __shared__ (dynamic shared memory) is not emulated')
        d = DECL.match(code, m.start())
        if not d:
            fail(fn, code, m.start(), 'a __shared__ declaration launch.py cannot read (one array or scalar, '
                 '`__shared__ TYPE NAME[N]...;`, no initialiser)')
        if not top_level(code, f, m.start()):
            fail(fn, code, m.start(), '__shared__ %s is not at the top level of %s: launch.py declares a block\'s '
                 'shared arrays once, before their function' % (d.group('name'), f.name))
        typ, name, dims = s[d.start('type'):d.end('type')], d.group('name'), s[d.start('dims'):d.end('dims')].rstrip()
        var = 'emu_sh_%s_%s' % (f.name, name)
        if f.template:
            var_t = var + template_args(f.template)
            decl = 'template %s static %s %s%s;' % (f.template, typ, var, dims)
        else:
            var_t = var
            decl = 'static %s %s%s;' % (typ, var, dims)
        first = f.start + len(code[f.start:]) - len(code[f.start:].lstrip())  # after any directive before it
        edits.append((first, first, decl + ' '))
        edits.append((m.start(), d.end(), 'auto &%s = %s;' % (name, var_t)))
        f.shared.append(var_t)

    # device functions holding shared arrays, and those calling one: a
    # kernel's shared memory is its own arrays and theirs, once each
    def calls(f, name):
        return re.search(r'\b%s\s*\(' % name, code[f.open:f.close]) is not None

    holders = {f.name: f for f in funcs if f.shared and not f.is_kernel}
    grew = True
    while grew:
        grew = False
        for f in funcs:
            if not f.is_kernel and f.name not in holders and any(calls(f, h) for h in holders):
                holders[f.name] = f
                grew = True
    for h in holders.values():
        if h.template:
            fail(fn, code, h.open, 'a template device function holding __shared__ arrays (%s): not emulated' % h.name)
    reach = {}  # a function's arrays and those of every holder it calls, directly or not
    for f in funcs:  # (a callee is defined before its caller)
        r = list(f.shared)
        for name in holders:
            if name != f.name and calls(f, name):
                r += [v for v in reach.get(name, []) if v not in r]
        reach[f.name] = r
    # after each kernel: emu_shm_KERNEL(poison), its static shared bytes,
    # each array poisoned (0xff bytes: NaN floats, -1 integers) when asked
    for f in funcs:
        if f.is_kernel and reach[f.name]:
            fun = '%sstatic size_t emu_shm_%s(int poison) { if (poison) { %s } return %s; }' % (
                'template %s ' % f.template if f.template else '', f.name,
                ' '.join('memset(%s, 0xff, sizeof %s);' % ('&' + v, v) for v in reach[f.name]),
                ' + '.join('sizeof %s' % v for v in reach[f.name]))
            edits.append((f.close + 1, f.close + 1, ' ' + fun))
    totals = {f.name for f in funcs if f.is_kernel and reach[f.name]}
    defined = {f.name for f in funcs}

    # the launches
    launches = []
    i = 0
    while True:
        j = code.find('<<<', i)
        if j < 0: break
        m = re.search(r'(%s)\s*(<[^<>;]*>)?\s*$' % IDENT, code[:j])
        if not m: fail(fn, code, j, 'a launch whose kernel launch.py cannot name')
        e = code.find('>>>', j)
        p = e + 3
        while code[p].isspace(): p += 1
        if code[p] != '(': fail(fn, code, j, 'a launch without arguments')
        q = matching(code, p, '(', ')')
        kernel, targs = m.group(1), m.group(2) or ''
        if kernel not in defined:
            fail(fn, code, j, 'launch of %s, not defined in this file: its shared memory cannot be totalled' % kernel)
        shm = 'emu_shm_%s%s' % (kernel, targs) if kernel in totals else 'emu_shm_none'
        name = kernel + targs
        if ',' in targs:  # k<1, P>: in parentheses, one argument of the macro
            name, shm = '(%s)' % name, '(%s)' % shm
        launches.append((m.start(), j, e, p, q, kernel))
        edits.append((m.start(), q + 1, 'EMU_LAUNCH((%s), %s, %s, %s)'
                      % (s[j + 3:e], name, shm, s[p:q + 1])))
        i = q + 1

    # every launch checked at once
    for k, (a, j, e, p, q, kernel) in enumerate(launches):
        f = owner(a)
        if f is None: fail(fn, code, a, 'a launch outside a function')
        rest = code[q + 1:f.close]
        c = re.search(r'\bCU_LAUNCHED\s*\(|\bcudaGetLastError\s*\(', rest)
        if not c:
            fail(fn, code, a, 'launch of %s never checked (CU_LAUNCHED or cudaGetLastError after it)' % kernel)
        gap = list(code[q + 1:q + 1 + c.start()])
        for (a2, _, _, _, q2, _) in launches[k + 1:]:  # the other arms of a switch
            if a2 >= q + 1 + c.start(): break
            for t in range(a2 - (q + 1), q2 + 1 - (q + 1)):
                gap[t] = ' '
        g = ''.join(gap)
        g = re.sub(r'\b(break|case\s+[^:;]+|default)\s*[;:]', ' ', g)
        *before, head = re.sub(r'[{}]', ' ', g).split(';')  # head: the checking statement's start
        if ''.join(before).strip() or re.search(r'\(\s*void\s*\)\s*$', head):
            fail(fn, code, a, 'launch of %s not checked at once: `%s` before its CU_LAUNCHED / cudaGetLastError'
                 % (kernel, ' '.join(g.split())[:60]))

    edits.sort(key=lambda x: (x[0], x[1]))
    out, at = [], 0
    for (a, b, t) in edits:
        if a < at: fail(fn, code, a, 'overlapping rewrites (launch.py)')
        out.append(s[at:a])
        out.append(t)
        at = b
    out.append(s[at:])
    t = ''.join(out)
    assert t.count('\n') == s.count('\n'), fn
    return t


def main():
    src, out_dir = sys.argv[1], sys.argv[2]
    files = [src] if src.endswith('.cu') else [os.path.join(src, f) for f in sorted(os.listdir(src))
                                               if f.endswith('.cu')]
    for path in files:
        s = open(path).read()
        t = rewrite(path, s)
        if os.environ.get('EMU_BUDGET'):
            t = re.sub(r'#define BWD_BUDGET .*', '#define BWD_BUDGET ((size_t)' + os.environ['EMU_BUDGET'] + ')', t)
        open(os.path.join(out_dir, os.path.basename(path)[:-3] + '.cpp'), 'w').write(t)


if __name__ == '__main__':
    main()
