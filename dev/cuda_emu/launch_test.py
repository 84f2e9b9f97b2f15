# launch.py's refusals: sources it must stop on (each with the message it
# must give), and one it must rewrite; run by dev/cuda_emu/run.sh.
# With SELFTEST_DIR (run.sh's, once selftest is built there): instead, the
# self-test's runs that must stop the process, each with the emulator's
# message, and, where selftest_mpi was built beside (MPI in the build), the
# emulated NCCL inside CUDA graphs under mpirun.
#   usage: launch_test.py [SELFTEST_DIR]
import os
import signal
import subprocess
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



def run(cmd, env=None, timeout=120):
    """(exit status, stdout, stderr) of cmd; status None when it ran past
    timeout (then it and what it started are ended: SIGTERM, which mpirun
    passes on, then SIGKILL to its process group)."""
    e = dict(os.environ, OMP_WAIT_POLICY='passive', OMP_DYNAMIC='false', OMPI_ALLOW_RUN_AS_ROOT='1',
             OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1', **(env or {}))
    p = subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        return None, out, err


def report(what, ok, rc, out, err):
    print('%-74s %s' % (what + ':', 'ok' if ok else 'FAIL (exit %s)\n%s%s' % (rc, out[-1500:], err[-1500:])))
    return not ok


def selftest_runs(d):
    fails = 0
    # work on a stream outside an open capture (a GPU would run it, not record it)
    rc, out, err = run([os.path.join(d, 'selftest'), 'outside'])
    ok = rc is not None and rc < 0 and 'went unnoticed' not in out and \
        'cuda_emu: launch of mark on a stream outside the open stream capture' in err
    fails += report('selftest outside: a launch outside the capture stops the process', ok, rc, out, err)
    # an allocation while a capture is open (a GPU refuses it, the backend's step would run eagerly)
    rc, out, err = run([os.path.join(d, 'selftest'), 'alloc'])
    ok = rc is not None and rc < 0 and 'went unnoticed' not in out and \
        'cuda_emu: cudaMalloc while a stream capture is open' in err
    fails += report('selftest alloc: a cudaMalloc inside a capture stops the process', ok, rc, out, err)
    # half a warp at a tensor-core product (mma.sync: undefined on a GPU)
    rc, out, err = run([os.path.join(d, 'selftest'), 'divergent'])
    ok = rc is not None and rc < 0 and 'went unnoticed' not in out and \
        'warp 0: lane 0 reached its product 1, lane 16 did not (a divergent warp)' in err
    fails += report('selftest divergent: half a warp at an mma.sync stops the process', ok, rc, out, err)
    mpi = os.path.join(d, 'selftest_mpi')
    if not os.path.exists(mpi):
        print('(NCCL inside CUDA graphs: checked where the build has MPI)')
        return fails
    # 2 ranks: NCCL's calls captured, replayed 3 times, the sums right
    rc, out, err = run(['mpirun', '--oversubscribe', '-np', '2', mpi, 'nccl'], {'EMU_DEVICES': '2'})
    sys.stdout.write(out)
    fails += report('selftest_mpi nccl (mpirun -np 2): captured collectives replayed, summed', rc == 0, rc, '', err)
    # EMU_NCCL_FAULT counts the collectives each replay queues (2 a replay), none at the capture
    one = ['mpirun', '--oversubscribe', '-np', '1', mpi, 'nccl-fault']
    rc, out, err = run(one, {'EMU_NCCL_FAULT': 'error:0:4'})
    ok = rc == 0 and 'replay 1: finished, no error' in out and 'replay 2: finished, no error' in out and \
        'replay 3: cudaErrorNotReady, remote process exited' in out and 'drained after ncclCommAbort' in out
    fails += report('EMU_NCCL_FAULT=error:0:4: the third replay fails, the first two finish', ok, rc, out, err)
    rc, out, err = run(one, {'EMU_NCCL_FAULT': 'hang:0:2'}, timeout=60)
    ok = rc != 0 and 'launching replay 2' in out and 'replay 2 launched' not in out and \
        "rank 0 stops for good at its collective 2 (ncclAllReduce, queued by a graph's replay)" in err
    fails += report('EMU_NCCL_FAULT=hang:0:2: the second replay stops in its cudaGraphLaunch', ok, rc, out, err)
    return fails


if len(sys.argv) > 1:
    sys.exit(1 if selftest_runs(sys.argv[1]) else 0)
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
