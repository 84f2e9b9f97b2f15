# launch.py's refusals: sources it must stop on (each with the message it
# must give), and one it must rewrite; run by dev/cuda_emu/run.sh.
#   usage: launch_test.py
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launch import rewrite  # noqa: E402

REFUSED = [
    ('a __shared__ in a branch',
     '__global__ void k(float *o) {\n  if (threadIdx.x) {\n    __shared__ float s[4];\n    o[0] = s[0];\n  }\n}\n',
     'is not at the top level of k'),
    ('dynamic shared memory',
     '__global__ void k(float *o) {\n  extern __shared__ float s[];\n  o[0] = s[0];\n}\n',
     'extern __shared__'),
    ('a launch never checked',
     '__global__ void k(float *o) { o[0] = 1; }\nvoid h(float *o, cudaStream_t q) {\n  k<<<1, 1, 0, q>>>(o);\n}\n',
     'never checked'),
    ('a launch checked too late',
     '__global__ void k(float *o) { o[0] = 1; }\n'
     'void h(float *o, cudaStream_t q) {\n  k<<<1, 1, 0, q>>>(o);\n  o = 0;\n  CU_LAUNCHED("k");\n}\n',
     'not checked at once'),
    ('a launch whose error is discarded',
     '__global__ void k(float *o) { o[0] = 1; }\n'
     'void h(float *o, cudaStream_t q) {\n  k<<<1, 1, 0, q>>>(o);\n  (void)cudaGetLastError();\n}\n',
     'not checked at once'),
    ('a launch of a kernel from elsewhere',
     'void h(float *o, cudaStream_t q) {\n  k<<<1, 1, 0, q>>>(o);\n  CU_LAUNCHED("k");\n}\n',
     'not defined in this file'),
]

GOOD = ('__device__ float f(float v) {\n  __shared__ double d[3];\n  d[0] = v;\n  return d[0];\n}\n'
        'template <int N>\n__global__ void k(float *o) {\n  __shared__ float s[N];\n  __shared__ int t;\n'
        '  s[0] = 1;\n  for (int i = 0; i < 2; i++)\n    o[i] = f(s[0]) + f(t);\n}\n'
        '__global__ void z(float *o) { o[0] = 0; }\n'
        'void h(float *o, cudaStream_t q, int l) {\n  switch (l) {\n  case 0:\n    k<1><<<1, 32, 0, q>>>(o);\n'
        '    break;\n  default:\n    k<3><<<1, 32, 0, q>>>(o);\n    break;\n  }\n  CU_LAUNCHED("k");\n'
        '  z<<<1, 1, 0, q>>>(o);\n  CU_LAUNCHED("z");\n}\n')
WANT = [  # what the rewrite must hold
    'static double emu_sh_f_d[3]; __device__ float f(float v) {',
    'auto &d = emu_sh_f_d;',
    'template <int N> static float emu_sh_k_s[N]; template <int N> static int emu_sh_k_t; template <int N>',
    'auto &s = emu_sh_k_s<N>;',
    'auto &t = emu_sh_k_t<N>;',
    'return sizeof emu_sh_k_s<N> + sizeof emu_sh_k_t<N> + sizeof emu_sh_f_d; }',  # f's array once
    'memset(&emu_sh_f_d, 0xff, sizeof emu_sh_f_d);',
    'EMU_LAUNCH((1, 32, 0, q), k<1>, emu_shm_k<1>, (o))',
    'EMU_LAUNCH((1, 1, 0, q), z, emu_shm_none, (o))',
]

fails = 0
for what, src, msg in REFUSED:
    try:
        rewrite('t.cu', src)
        got = 'rewritten'
    except SystemExit as e:
        got = str(e)
    ok = msg in got
    fails += not ok
    print('launch.py refuses %-56s %s' % (what + ':', 'ok' if ok else 'FAIL (%s)' % got))
t = rewrite('t.cu', GOOD)
missing = [w for w in WANT if w not in t]
ok = t.count('\n') == GOOD.count('\n') and not missing
fails += not ok
print('launch.py rewrites %-55s %s' % ('kernels with shared memory, launched in a switch:',
                                      'ok' if ok else 'FAIL: %s not in\n%s' % (missing, t)))
sys.exit(1 if fails else 0)
