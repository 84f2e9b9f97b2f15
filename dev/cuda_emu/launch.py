# Rewrites the kernel launches of models/cuda/*.cu into calls of the
# emulator (inc/cuda_runtime.h): NAME<<<CFG>>>(ARGS) -> EMU_LAUNCH((CFG), NAME, (ARGS)).
#   usage: launch.py SRC_DIR OUT_DIR   (writes OUT_DIR/*.cpp)
import re, sys, os
src_dir, out_dir = sys.argv[1], sys.argv[2]
for fn in os.listdir(src_dir):
    if not fn.endswith('.cu'): continue
    s = open(os.path.join(src_dir, fn)).read()
    out = []
    i = 0
    while True:
        j = s.find('<<<', i)
        if j < 0: out.append(s[i:]); break
        # name: back to the start of the identifier (with template args)
        k = j
        m = re.search(r'([A-Za-z_][A-Za-z0-9_]*(<[0-9]+>)?)$', s[:j])
        k = m.start()
        e = s.find('>>>', j)
        cfg = s[j+3:e]
        p = e + 3
        assert s[p] == '(', s[p:p+40]
        depth = 0; q = p
        while True:
            if s[q] == '(': depth += 1
            elif s[q] == ')':
                depth -= 1
                if depth == 0: break
            q += 1
        args = s[p:q+1]
        out.append(s[i:k])
        out.append('EMU_LAUNCH((%s), %s, %s)' % (cfg, m.group(1), args))
        i = q + 1
    t = ''.join(out)
    if os.environ.get('EMU_BUDGET'):
        t = re.sub(r'#define BWD_BUDGET .*', '#define BWD_BUDGET ((size_t)' + os.environ['EMU_BUDGET'] + ')', t)
    open(os.path.join(out_dir, fn[:-3] + '.cpp'), 'w').write(t)
