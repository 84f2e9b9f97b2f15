/* selftest.cu — the emulator's own checks (dev/cuda_emu/run.sh builds it
 * through launch.py, as the backend): deliberately broken kernels that the
 * emulator must catch, and correct ones it must let through.
 *   selftest          every check below but the overflow: exit 0 when each
 *                     held, 1 when one did not (each line says which);
 *   selftest overflow writes one float past a cudaMalloc'd buffer: with
 *                     EMU_ASAN=1 ASan must stop it (run.sh checks its
 *                     report); without ASan it goes unnoticed, exit 0;
 *   selftest outside  launches on a stream outside an open capture: the
 *                     emulator must stop the process naming the launch
 *                     (launch_test.py checks it);
 *   selftest alloc    a cudaMalloc while a capture is open (what the
 *                     backend's first use of the bases' tables did inside a
 *                     recorded step): the emulator must stop the process
 *                     naming the call (launch_test.py checks it);
 *   selftest divergent  half a warp at a tensor-core product
 *                     (models/cuda/mma.h), the other half past it: the
 *                     emulator must stop the process naming the warp
 *                     (launch_test.py checks it).
 * Built with SE3_HAVE_NCCL (MPI's compiler flags; run.sh's selftest_mpi),
 * it has inc/nccl.h's collectives inside captures instead (launch_test.py
 * runs them under mpirun):
 *   selftest nccl        every rank captures the backend's pattern (a
 *                        bucket stream forked and joined, NCCL's calls on
 *                        both), replays it 3 times with new inputs and
 *                        checks the sums;
 *   selftest nccl-fault  one rank, EMU_NCCL_FAULT set by the caller: says
 *                        after each of 3 replays (2 collectives each)
 *                        whether its stream finished and NCCL's async error.
 * Not CUDA for nvcc: the 48 KiB + 4 static shared array below would not
 * build there (ptxas refuses it); the emulator refuses its launch. */
#include <cuda_runtime.h>
#ifdef SE3_HAVE_NCCL
#include <nccl.h>
#endif

#include "models/cuda/mma.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fails = 0;

static void expect(int ok, const char *what) {
  printf("%-80s %s\n", what, ok ? "ok" : "FAIL");
  fails += !ok;
}

#define T 64 /* threads a block */
#define B 4  /* blocks */

/* out[i] = x[i] + x[the next in its block]: the neighbour's value through
 * shared memory, stored before the barrier and read after it. */
__global__ void neighbour_sum(float *out, const float *x) {
  __shared__ float s[T];
  const int t = threadIdx.x, i = blockIdx.x * T + t;
  s[t] = x[i];
  __syncthreads();
  out[i] = x[i] + s[(t + 1) % T];
}

/* The same with the barrier on the wrong side: the neighbour's element is
 * read before anyone of this block stored it. The emulator orders it (the
 * barrier keeps the read before the store, where a GPU's race may go either
 * way), so what the read finds is what the block's shared memory held when
 * it began: the poison in every block. (A static that lives on would give
 * the first block zeros and every other one the last block's values: an
 * x[i] + a plausible number.) */
__global__ void neighbour_sum_early(float *out, const float *x) {
  __shared__ float s[T];
  const int t = threadIdx.x, i = blockIdx.x * T + t;
  const float next = s[(t + 1) % T]; /* BUG: not yet stored */
  __syncthreads();
  s[t] = x[i];
  __syncthreads();
  out[i] = x[i] + next;
}

/* The sum of v over the block (every thread's answer), through shared
 * memory: a device function holding a __shared__ array, which a block may
 * call more than once (its first barrier: the last call's reads are done). */
__device__ float block_total(float v) {
  __shared__ float s[T];
  __syncthreads();
  s[threadIdx.x] = v;
  __syncthreads();
  float r = 0;
  for (int k = 0; k < T; k++)
    r += s[k];
  return r;
}

/* out[b] = sum of x over block b, and out[B + b] = the sum of its squares:
 * the second call reuses the first's shared array, which the emulator must
 * not poison again (some threads may still be reading the first's sums
 * until the function's first barrier). */
__global__ void block_sums(float *out, const float *x) {
  const int t = threadIdx.x, i = blockIdx.x * T + t;
  const float a = block_total(x[i]);
  const float q = block_total(x[i] * x[i]);
  if (t == 0) {
    out[blockIdx.x] = a;
    out[B + blockIdx.x] = q;
  }
}

/* Marks that it ran (flag[0] = 1) and counts its blocks (flag[1]). */
__global__ void mark(int *flag) {
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    flag[0] = 1;
    atomicAdd(&flag[1], 1);
  }
}

/* 48 KiB of static shared memory, the most a launch has without opt-in. */
__global__ void shared_48k(int *flag) {
  __shared__ float s[12288];
  s[threadIdx.x] = 1;
  __syncthreads();
  if (threadIdx.x == 0) flag[0] = (int)s[0];
}

/* 4 bytes more. */
__global__ void shared_48k_4(int *flag) {
  __shared__ float s[12288];
  __shared__ int one;
  s[threadIdx.x] = 1;
  one = 1;
  __syncthreads();
  if (threadIdx.x == 0) flag[0] = (int)s[0] * one;
}

/* out[i] = i for i < n, and one float more when over (the bug). */
__global__ void fill(float *out, int n, int over) {
  for (int i = threadIdx.x; i < n + over; i += blockDim.x)
    out[i] = (float)i;
}

/* y = a x + b */
__global__ void axpb(float *y, const float *x, float a, float b, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    y[i] = a * x[i] + b;
}

/* y = u + v */
__global__ void add2(float *y, const float *u, const float *v, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    y[i] = u[i] + v[i];
}

/* One product D = A B + 1 a warp, two warps (warp w's A and B at a + 256 w,
 * b + 128 w), by models/cuda/mma.h in `shape` (1 bf16 and 2 fp16 m16n8k16,
 * 3 tf32 m16n8k8, 4 the same as mma_tf32x3 on fp32 split in tf32 halves): A (16 x K, row-major, a row 16 floats) and B (K x 8,
 * row-major) put in each lane's registers by PTX's fragment layouts, as
 * written in PTX's manual (independently of inc/emu_mma.h's gathering),
 * after a barrier; D back by the accumulator's layout, 8 floats a row. */
__global__ void mma_products(float *d, const float *a, const float *b, int shape) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const float *Am = a + w * 256, *Bm = b + w * 128;
  uint32_t ra[4], rb[2], la[4], lb[2];
  if (shape >= 3) {
    const float v[6] = {Am[g * 16 + t], Am[(g + 8) * 16 + t], Am[g * 16 + t + 4], Am[(g + 8) * 16 + t + 4],
                        Bm[t * 8 + g],  Bm[(t + 4) * 8 + g]};
    uint32_t hi[6], lo[6];
    for (int k = 0; k < 6; k++) {
      hi[k] = tf32_rna(v[k]);
      lo[k] = tf32_rna(v[k] - mma_u2f(hi[k]));
    }
    for (int k = 0; k < 4; k++) {
      ra[k] = hi[k];
      la[k] = lo[k];
    }
    rb[0] = hi[4], rb[1] = hi[5], lb[0] = lo[4], lb[1] = lo[5];
  } else {
    uint32_t e[12];
    const float v[12] = {Am[g * 16 + 2 * t],     Am[g * 16 + 2 * t + 1],     Am[(g + 8) * 16 + 2 * t],
                         Am[(g + 8) * 16 + 2 * t + 1], Am[g * 16 + 2 * t + 8], Am[g * 16 + 2 * t + 9],
                         Am[(g + 8) * 16 + 2 * t + 8], Am[(g + 8) * 16 + 2 * t + 9], Bm[2 * t * 8 + g],
                         Bm[(2 * t + 1) * 8 + g], Bm[(2 * t + 8) * 8 + g], Bm[(2 * t + 9) * 8 + g]};
    for (int k = 0; k < 12; k++)
      e[k] = shape == 1 ? mma_bf16_bits(v[k]) : mma_f16_bits(v[k]);
    for (int k = 0; k < 4; k++)
      ra[k] = e[2 * k] | e[2 * k + 1] << 16;
    rb[0] = e[8] | e[9] << 16;
    rb[1] = e[10] | e[11] << 16;
  }
  float c[4] = {1, 1, 1, 1};
  __syncthreads();
  if (shape == 1)
    mma_bf16(c, ra, rb);
  else if (shape == 2)
    mma_f16(c, ra, rb);
  else if (shape == 3)
    mma_tf32(c, ra, rb);
  else
    mma_tf32x3(c, ra, la, rb, lb);
  float *D = d + w * 128;
  D[g * 8 + 2 * t] = c[0];
  D[g * 8 + 2 * t + 1] = c[1];
  D[(g + 8) * 8 + 2 * t] = c[2];
  D[(g + 8) * 8 + 2 * t + 1] = c[3];
}

/* lanes 0-15 at a product, 16-31 past it: undefined on a GPU */
__global__ void mma_divergent(float *d) {
  const uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float c[4] = {0, 0, 0, 0};
  if (threadIdx.x % 32 < 16) mma_bf16(c, a, b);
  d[threadIdx.x] = c[0];
}

static cudaStream_t q;

static void sync_q(void) {
  if (cudaStreamSynchronize(q) != cudaSuccess) expect(0, "cudaStreamSynchronize");
}

/* A launch's cudaGetLastError, which must be cudaSuccess. */
static void launched(cudaError_t e) {
  if (e != cudaSuccess) expect(0, cudaGetErrorName(e));
}

/* The flag after a launch of `mark` with (g, b, shm), whose cudaGetLastError
 * must be `want`, and the one after it cudaSuccess (not sticky). */
static void launch_limit(const char *what, dim3 g, dim3 b, size_t shm, cudaError_t want, int *flag) {
  int h[2] = {-1, -1};
  cudaMemsetAsync(flag, 0, 2 * sizeof(int), q);
  mark<<<g, b, shm, q>>>(flag);
  cudaError_t e = cudaGetLastError(), again = cudaGetLastError();
  cudaMemcpyAsync(h, flag, sizeof h, cudaMemcpyDeviceToHost, q);
  sync_q();
  const unsigned long long blocks = (unsigned long long)g.x * g.y * g.z;
  char line[200];
  if (want == cudaSuccess) {
    snprintf(line, sizeof line, "%s: runs, %llu blocks", what, blocks);
    expect(e == cudaSuccess && again == cudaSuccess && h[0] == 1 && (unsigned long long)h[1] == blocks, line);
  } else {
    snprintf(line, sizeof line, "%s: %s, not run, then cudaSuccess", what, cudaGetErrorName(want));
    expect(e == want && again == cudaSuccess && h[0] == 0 && h[1] == 0, line);
  }
}

/* Work on a stream outside an open capture (the bug): the process stops. */
static int outside(void) {
  cudaStream_t other;
  int *flag;
  cudaGraph_t g;
  cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
  cudaMalloc((void **)&flag, 2 * sizeof(int));
  cudaStreamBeginCapture(q, cudaStreamCaptureModeThreadLocal);
  mark<<<1, 1, 0, q>>>(flag);
  launched(cudaGetLastError());
  mark<<<1, 1, 0, other>>>(flag); /* BUG: `other` never waited for an event of the capture */
  launched(cudaGetLastError());
  cudaStreamEndCapture(q, &g);
  printf("a launch on a stream outside the capture went unnoticed\n");
  return 0;
}

/* An allocation while a capture is open (a GPU refuses it and invalidates
 * the capture, so the backend would silently run the step eagerly): the
 * process stops. */
static int alloc_in_capture(void) {
  float *f;
  cudaStreamBeginCapture(q, cudaStreamCaptureModeThreadLocal);
  cudaMalloc((void **)&f, 1024);
  printf("a cudaMalloc while a capture is open went unnoticed\n");
  return 0;
}

/* Forks and joins in a capture (q the origin, q2 and q3 forked from it):
 * the graph made, or cudaStreamEndCapture's code. `pattern`: 0 q2 joined
 * back; 1 q2 never joined; 2 q2 joined, then more work on it; 3 q3 forked
 * from q2 and joined back through q2. */
static cudaError_t fork_join(int pattern, cudaStream_t q2, cudaStream_t q3, float *buf, cudaGraph_t *g) {
  cudaEvent_t ev[3];
  for (int i = 0; i < 3; i++)
    cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming);
  cudaStreamBeginCapture(q, cudaStreamCaptureModeThreadLocal);
  axpb<<<1, 32, 0, q>>>(buf, buf, 1, 1, 4);
  launched(cudaGetLastError());
  cudaEventRecord(ev[0], q);
  cudaStreamWaitEvent(q2, ev[0], 0);
  axpb<<<1, 32, 0, q2>>>(buf + 4, buf, 1, 1, 4);
  launched(cudaGetLastError());
  if (pattern == 3) {
    cudaEventRecord(ev[1], q2);
    cudaStreamWaitEvent(q3, ev[1], 0);
    axpb<<<1, 32, 0, q3>>>(buf + 8, buf + 4, 1, 1, 4);
    launched(cudaGetLastError());
    cudaEventRecord(ev[2], q3);
    cudaStreamWaitEvent(q2, ev[2], 0);
  }
  if (pattern != 1) {
    cudaEventRecord(ev[1], q2);
    cudaStreamWaitEvent(q, ev[1], 0);
  }
  if (pattern == 2) cudaMemsetAsync(buf + 4, 0, 4 * sizeof(float), q2); /* BUG: after its join */
  axpb<<<1, 32, 0, q>>>(buf + 12, buf, 1, 1, 4);
  launched(cudaGetLastError());
  cudaError_t e = cudaStreamEndCapture(q, g);
  for (int i = 0; i < 3; i++)
    cudaEventDestroy(ev[i]);
  return e;
}

#ifdef SE3_HAVE_NCCL
/* MPI started, this rank's GPU current, and a communicator of every rank. */
static ncclComm_t nccl_open(int *rank, int *size) {
  MPI_Init(NULL, NULL);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  int devices = 0;
  cudaGetDeviceCount(&devices);
  cudaSetDevice(devices > 0 ? *rank % devices : 0);
  ncclUniqueId id;
  if (*rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) MPI_Abort(MPI_COMM_WORLD, 2);
  MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t c = NULL;
  ncclResult_t r = ncclCommInitRank(&c, *size, id, *rank);
  if (r != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclCommInitRank: %s: %s\n", *rank, ncclGetErrorString(r), ncclGetLastError(NULL));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return c;
}

/* The backend's recorded data-parallel step, small: a bucket's all-reduce
 * on a stream forked from q and joined back, a kernel on q that reads its
 * sum, and on q an all-reduce of doubles, a reduce-scatter and an
 * all-gather; replayed 3 times with new inputs, each rank's sums checked
 * (a replay's collective that ran before its inputs were copied, twice, or
 * not at all, would show; so would doubles summed as floats: 1e10 + 1e-3). */
static int nccl_replays(void) {
  int rank, size;
  ncclComm_t c = nccl_open(&rank, &size);
  enum { NF = 6, ND = 2, NP = 2 };
  cudaStream_t bucket;
  cudaEvent_t ready, done;
  cudaStreamCreateWithFlags(&bucket, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  float *f, *g, *rs_in, *rs_out, *ag_in, *ag_out;
  double *d;
  cudaMalloc((void **)&f, NF * sizeof(float));
  cudaMalloc((void **)&g, NF * sizeof(float));
  cudaMalloc((void **)&d, ND * sizeof(double));
  cudaMalloc((void **)&rs_in, NP * size * sizeof(float));
  cudaMalloc((void **)&rs_out, NP * sizeof(float));
  cudaMalloc((void **)&ag_in, NP * sizeof(float));
  cudaMalloc((void **)&ag_out, NP * size * sizeof(float));
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec;
  ncclResult_t r[4];
  cudaStreamBeginCapture(q, cudaStreamCaptureModeThreadLocal);
  cudaEventRecord(ready, q);
  cudaStreamWaitEvent(bucket, ready, 0);
  r[0] = ncclAllReduce(f, f, NF, ncclFloat, ncclSum, c, bucket);
  cudaEventRecord(done, bucket);
  cudaStreamWaitEvent(q, done, 0);
  axpb<<<1, 32, 0, q>>>(g, f, 2, 0, NF); /* g = 2 (the bucket's sum) */
  launched(cudaGetLastError());
  r[1] = ncclAllReduce(d, d, ND, ncclDouble, ncclSum, c, q);
  r[2] = ncclReduceScatter(rs_in, rs_out, NP, ncclFloat, ncclSum, c, q);
  r[3] = ncclAllGather(ag_in, ag_out, NP, ncclFloat, c, q);
  cudaError_t ended = cudaStreamEndCapture(q, &graph);
  int ok =
      ended == cudaSuccess && r[0] == ncclSuccess && r[1] == ncclSuccess && r[2] == ncclSuccess && r[3] == ncclSuccess;
  if (ok) cudaGraphInstantiate(&exec, graph, 0);
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) expect(all, "NCCL's calls captured, on q and on a bucket stream forked and joined: a graph");
  if (!all) {
    MPI_Finalize();
    return 1;
  }
  const long ranks_sum = (long)size * (size + 1) / 2; /* 1 + 2 + ... + size */
  for (int rep = 0; rep < 3; rep++) {
    float hf[NF], hg[NF], hrs[NP * 64], hrso[NP], hag[NP], hago[NP * 64];
    double hd[ND];
    for (int i = 0; i < NF; i++)
      hf[i] = (float)((rank + 1) * (i + 1) + 100 * rep);
    for (int i = 0; i < ND; i++)
      hd[i] = 1e10 * (i + 1) + 1e-3 * (rank + 1) + rep;
    for (int i = 0; i < NP * size; i++)
      hrs[i] = (float)(i + 10 * rank + rep);
    for (int i = 0; i < NP; i++)
      hag[i] = (float)(1000 * rank + i + rep);
    cudaMemcpyAsync(f, hf, sizeof hf, cudaMemcpyHostToDevice, q);
    cudaMemcpyAsync(d, hd, sizeof hd, cudaMemcpyHostToDevice, q);
    cudaMemcpyAsync(rs_in, hrs, NP * size * sizeof(float), cudaMemcpyHostToDevice, q);
    cudaMemcpyAsync(ag_in, hag, sizeof hag, cudaMemcpyHostToDevice, q);
    cudaGraphLaunch(exec, q);
    cudaMemcpyAsync(hg, g, sizeof hg, cudaMemcpyDeviceToHost, q);
    cudaMemcpyAsync(hd, d, sizeof hd, cudaMemcpyDeviceToHost, q);
    cudaMemcpyAsync(hrso, rs_out, sizeof hrso, cudaMemcpyDeviceToHost, q);
    cudaMemcpyAsync(hago, ag_out, NP * size * sizeof(float), cudaMemcpyDeviceToHost, q);
    sync_q();
    int sums = 1, dsums = 1, rs = 1, ag = 1;
    for (int i = 0; i < NF; i++)
      sums &= hg[i] == (float)(2 * (ranks_sum * (i + 1) + 100L * size * rep));
    for (int i = 0; i < ND; i++)
      dsums &= fabs(hd[i] - (size * (1e10 * (i + 1) + rep) + 1e-3 * ranks_sum)) < 1e-4;
    for (int i = 0; i < NP; i++) /* piece `rank` of every rank's rs_in, summed */
      rs &= hrso[i] == (float)(size * (rank * NP + i + rep) + 10 * (ranks_sum - size));
    for (int k = 0; k < size; k++)
      for (int i = 0; i < NP; i++)
        ag &= hago[k * NP + i] == (float)(1000 * k + i + rep);
    int mine[4] = {sums, dsums, rs, ag}, every[4];
    MPI_Allreduce(mine, every, 4, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
      char line[160];
      snprintf(line, sizeof line, "replay %d on %d ranks: the bucket's float sums, read after the join", rep + 1, size);
      expect(every[0], line);
      snprintf(line, sizeof line, "replay %d: ncclDouble's sums (1e10 + 1e-3 kept)", rep + 1);
      expect(every[1], line);
      snprintf(line, sizeof line, "replay %d: reduce-scatter and all-gather", rep + 1);
      expect(every[2] && every[3], line);
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  ncclCommDestroy(c);
  int any = 0;
  MPI_Allreduce(&fails, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  if (rank == 0) printf("%s: %d failures\n", any ? "FAILED" : "ALL OK", any);
  return any ? 1 : 0;
}

/* One rank (EMU_NCCL_FAULT set by launch_test.py): a graph of 2 collectives
 * replayed 3 times; after each launch, whether q finished and NCCL's async
 * error. A fault at collective N hits replay N / 2 + 1 (collectives count as
 * each replay queues them, none at the capture); a hang stops the process
 * inside that replay's cudaGraphLaunch (the alarm ends it). */
static int nccl_fault(void) {
  int rank, size;
  ncclComm_t c = nccl_open(&rank, &size);
  float *f;
  double *d;
  cudaMalloc((void **)&f, 4 * sizeof(float));
  cudaMalloc((void **)&d, 4 * sizeof(double));
  cudaMemsetAsync(f, 0, 4 * sizeof(float), q);
  cudaMemsetAsync(d, 0, 4 * sizeof(double), q);
  sync_q();
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec;
  cudaStreamBeginCapture(q, cudaStreamCaptureModeThreadLocal);
  ncclAllReduce(f, f, 4, ncclFloat, ncclSum, c, q);
  ncclAllReduce(d, d, 4, ncclDouble, ncclSum, c, q);
  if (cudaStreamEndCapture(q, &graph) != cudaSuccess) return 2;
  cudaGraphInstantiate(&exec, graph, 0);
  alarm(5);
  for (int rep = 1; rep <= 3; rep++) {
    printf("launching replay %d\n", rep);
    cudaGraphLaunch(exec, q);
    printf("replay %d launched\n", rep);
    usleep(100000);
    cudaError_t e = cudaStreamQuery(q);
    ncclResult_t a = ncclSuccess;
    ncclCommGetAsyncError(c, &a);
    printf("replay %d: %s, %s\n", rep, e == cudaSuccess ? "finished" : cudaGetErrorName(e), ncclGetErrorString(a));
  }
  ncclCommAbort(c); /* (the faulty collective ends: q drains) */
  sync_q();
  printf("drained after ncclCommAbort\n");
  MPI_Finalize();
  return 0;
}
#endif

/* every shape's product against the host's sums (exact: small integers) */
static void mma_checks(void) {
  float ha[512], hb[256], hd[256], *a, *b, *d;
  for (int w = 0; w < 2; w++) {
    for (int i = 0; i < 256; i++)
      ha[w * 256 + i] = (float)((i / 16 * 3 + i % 16 * 5 + w) % 7 - 3) * (float)(w + 1);
    for (int i = 0; i < 128; i++)
      hb[w * 128 + i] = (float)((i / 8 * 2 + i % 8 * 3 + 2 * w) % 5 - 2);
  }
  cudaMalloc((void **)&a, sizeof ha);
  cudaMalloc((void **)&b, sizeof hb);
  cudaMalloc((void **)&d, sizeof hd);
  cudaMemcpyAsync(a, ha, sizeof ha, cudaMemcpyHostToDevice, q);
  cudaMemcpyAsync(b, hb, sizeof hb, cudaMemcpyHostToDevice, q);
  const char *names[] = {"", "bf16 m16n8k16", "fp16 m16n8k16", "tf32 m16n8k8"};
  for (int shape = 1; shape <= 3; shape++) {
    mma_products<<<1, 64, 0, q>>>(d, a, b, shape);
    cudaError_t e = cudaGetLastError();
    cudaMemcpyAsync(hd, d, sizeof hd, cudaMemcpyDeviceToHost, q);
    sync_q();
    const int K = shape == 3 ? 8 : 16;
    int exact = e == cudaSuccess;
    for (int w = 0; w < 2; w++)
      for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
          float s = 1;
          for (int k = 0; k < K; k++)
            s += ha[w * 256 + r * 16 + k] * hb[w * 128 + k * 8 + n];
          exact &= hd[w * 128 + r * 8 + n] == s;
        }
    char what[96];
    snprintf(what, sizeof what, "mma_products %s (PTX's fragment layouts, two warps): exact", names[shape]);
    expect(exact, what);
  }
  /* fp32 operands (23 bits): tf32 alone keeps 10 of them; three tf32 products
   * on the halves about fp32's accuracy */
  for (int i = 0; i < 512; i++)
    ha[i] = ha[i] + (float)(i % 13 + 1) * ldexpf(1, -17);
  for (int i = 0; i < 256; i++)
    hb[i] = hb[i] - (float)(i % 11 + 1) * ldexpf(1, -15);
  cudaMemcpyAsync(a, ha, sizeof ha, cudaMemcpyHostToDevice, q);
  cudaMemcpyAsync(b, hb, sizeof hb, cudaMemcpyHostToDevice, q);
  double worst[5] = {0};
  for (int shape = 3; shape <= 4; shape++) {
    mma_products<<<1, 64, 0, q>>>(d, a, b, shape);
    cudaError_t e = cudaGetLastError();
    cudaMemcpyAsync(hd, d, sizeof hd, cudaMemcpyDeviceToHost, q);
    sync_q();
    worst[shape] = e == cudaSuccess ? 0 : 1;
    for (int w = 0; w < 2; w++)
      for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
          double s = 1, mag = 1;
          for (int k = 0; k < 8; k++) {
            s += (double)ha[w * 256 + r * 16 + k] * hb[w * 128 + k * 8 + n];
            mag += fabs((double)ha[w * 256 + r * 16 + k] * hb[w * 128 + k * 8 + n]);
          }
          worst[shape] = fmax(worst[shape], fabs(hd[w * 128 + r * 8 + n] - s) / mag);
        }
  }
  char x3[160];
  snprintf(x3, sizeof x3, "mma_tf32x3 on fp32 operands: error %.1e of the terms (<= 1e-6), tf32 alone %.1e (> 1e-5)",
           worst[4], worst[3]);
  expect(worst[4] <= 1e-6 && worst[3] > 1e-5, x3);
  /* cvt.rna.tf32.f32: to nearest, ties away from zero */
  const float tie = 1.0f + ldexpf(1, -11), below = 1.0f + ldexpf(1, -12);
  expect(mma_u2f(tf32_rna(tie)) == 1.0f + ldexpf(1, -10) && mma_u2f(tf32_rna(-tie)) == -(1.0f + ldexpf(1, -10)) &&
             mma_u2f(tf32_rna(below)) == 1.0f,
         "tf32_rna: 1 + 2^-11 to 1 + 2^-10 (a tie, away from zero), 1 + 2^-12 to 1");
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
}

static int divergent(void) {
  float *d;
  if (cudaMalloc((void **)&d, 32 * sizeof(float)) != cudaSuccess) return 2;
  mma_divergent<<<1, 32, 0, q>>>(d);
  if (cudaGetLastError() != cudaSuccess) return 2;
  sync_q();
  printf("half a warp at a tensor-core product went unnoticed\n");
  return 0;
}

static int overflow(void) {
  float *d;
  const int n = 1000; /* 4000 bytes: a size rounded to 256 would hide the float past the end */
  if (cudaMalloc((void **)&d, n * sizeof(float)) != cudaSuccess) return 2;
  fill<<<1, T, 0, q>>>(d, n, 1);
  if (cudaGetLastError() != cudaSuccess) return 2;
  sync_q();
  printf("a float written past a cudaMalloc'd buffer went unnoticed (without ASan, as on a GPU)\n");
  cudaFree(d);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* in order with the emulator's words on stderr */
  if (cudaStreamCreateWithFlags(&q, cudaStreamNonBlocking) != cudaSuccess) return 2;
  if (argc > 1 && !strcmp(argv[1], "overflow")) return overflow();
  if (argc > 1 && !strcmp(argv[1], "outside")) return outside();
  if (argc > 1 && !strcmp(argv[1], "alloc")) return alloc_in_capture();
  if (argc > 1 && !strcmp(argv[1], "divergent")) return divergent();
#ifdef SE3_HAVE_NCCL
  if (argc > 1 && !strcmp(argv[1], "nccl")) return nccl_replays();
  if (argc > 1 && !strcmp(argv[1], "nccl-fault")) return nccl_fault();
#endif
  if (argc > 1) {
    fprintf(stderr, "usage: selftest [overflow|outside|alloc|divergent|nccl|nccl-fault]\n");
    return 2;
  }
  float hx[B * T], hout[B * T], *x, *out;
  int *flag;
  for (int i = 0; i < B * T; i++)
    hx[i] = (float)(i % 7) - 2.5f;
  cudaMalloc((void **)&x, sizeof hx);
  cudaMalloc((void **)&out, sizeof hout);
  cudaMalloc((void **)&flag, 2 * sizeof(int));
  cudaMemcpyAsync(x, hx, sizeof hx, cudaMemcpyHostToDevice, q);

  /* shared memory: fresh and poisoned in every block */
  neighbour_sum<<<B, T, 0, q>>>(out, x);
  expect(cudaGetLastError() == cudaSuccess, "neighbour_sum launches");
  cudaMemcpyAsync(hout, out, sizeof hout, cudaMemcpyDeviceToHost, q);
  sync_q();
  int exact = 1;
  for (int i = 0; i < B * T; i++)
    exact &= hout[i] == hx[i] + hx[i / T * T + (i % T + 1) % T];
  expect(exact, "neighbour_sum (barrier between store and load): exact, every block");

  neighbour_sum_early<<<B, T, 0, q>>>(out, x);
  expect(cudaGetLastError() == cudaSuccess, "neighbour_sum_early launches");
  cudaMemcpyAsync(hout, out, sizeof hout, cudaMemcpyDeviceToHost, q);
  sync_q();
  int nan_first = 1, nan_later = 1;
  for (int i = 0; i < B * T; i++)
    (i < T ? nan_first : nan_later) &= isnan(hout[i]) != 0;
  expect(nan_first, "neighbour_sum_early (load before store): NaN in block 0");
  expect(nan_later, "neighbour_sum_early: NaN in blocks 1-3 too (no stale values)");

  block_sums<<<B, T, 0, q>>>(out, x);
  expect(cudaGetLastError() == cudaSuccess, "block_sums launches");
  cudaMemcpyAsync(hout, out, 2 * B * sizeof(float), cudaMemcpyDeviceToHost, q);
  sync_q();
  exact = 1;
  for (int b = 0; b < B; b++) {
    float a = 0, s2 = 0;
    for (int k = 0; k < T; k++) {
      a += hx[b * T + k];
      s2 += hx[b * T + k] * hx[b * T + k];
    }
    exact &= hout[b] == a && hout[B + b] == s2;
  }
  expect(exact, "block_sums (a device function's shared array, called twice): exact");

  /* the warp's tensor-core products (models/cuda/mma.h) */
  mma_checks();

  /* launch limits: cudaGetLastError's code, once; the kernel not run */
  launch_limit("mark <<<3, 1024>>>", 3, 1024, 0, cudaSuccess, flag);
  launch_limit("mark <<<1, (32, 32, 1)>>>", 1, dim3(32, 32, 1), 0, cudaSuccess, flag);
  launch_limit("mark <<<1, (1, 1, 64)>>>", 1, dim3(1, 1, 64), 0, cudaSuccess, flag);
  launch_limit("mark <<<1, 1025>>> (threads a block)", 1, 1025, 0, cudaErrorInvalidConfiguration, flag);
  launch_limit("mark <<<1, (64, 32, 1)>>> (2048 threads)", 1, dim3(64, 32, 1), 0, cudaErrorInvalidConfiguration, flag);
  launch_limit("mark <<<1, (1, 1, 65)>>> (block z)", 1, dim3(1, 1, 65), 0, cudaErrorInvalidConfiguration, flag);
  launch_limit("mark <<<1, 0>>> (no thread)", 1, 0, 0, cudaErrorInvalidConfiguration, flag);
  launch_limit("mark <<<(1, 65535), 1>>>", dim3(1, 65535), 1, 0, cudaSuccess, flag);
  launch_limit("mark <<<(1, 65536), 1>>> (grid y)", dim3(1, 65536), 1, 0, cudaErrorInvalidConfiguration, flag);
  launch_limit("mark <<<(1, 1, 65536), 1>>> (grid z)", dim3(1, 1, 65536), 1, 0, cudaErrorInvalidConfiguration, flag);
  launch_limit("mark <<<2^31, 1>>> (grid x)", 0x80000000u, 1, 0, cudaErrorInvalidConfiguration, flag);
  launch_limit("mark <<<0, 32>>> (no block)", 0, 32, 0, cudaErrorInvalidConfiguration, flag);
  launch_limit("mark <<<(4, 0), 32>>> (no block)", dim3(4, 0), 32, 0, cudaErrorInvalidConfiguration, flag);
  launch_limit("mark <<<1, 32, 48 KiB>>> (dynamic shared)", 1, 32, 49152, cudaSuccess, flag);
  launch_limit("mark <<<1, 32, 48 KiB + 1>>> (dynamic shared)", 1, 32, 49153, cudaErrorInvalidValue, flag);

  int h = -1;
  cudaMemsetAsync(flag, 0, sizeof(int), q);
  shared_48k<<<1, 32, 0, q>>>(flag);
  cudaError_t e = cudaGetLastError();
  cudaMemcpyAsync(&h, flag, sizeof h, cudaMemcpyDeviceToHost, q);
  sync_q();
  expect(e == cudaSuccess && h == 1, "shared_48k (48 KiB static shared): runs");
  cudaMemsetAsync(flag, 0, sizeof(int), q);
  shared_48k_4<<<1, 32, 0, q>>>(flag);
  e = cudaGetLastError();
  cudaMemcpyAsync(&h, flag, sizeof h, cudaMemcpyDeviceToHost, q);
  sync_q();
  expect(e == cudaErrorInvalidValue && h == 0 && cudaGetLastError() == cudaSuccess,
         "shared_48k_4 (48 KiB + 4 static shared): cudaErrorInvalidValue, not run");
  shared_48k<<<1, 32, 4, q>>>(flag);
  expect(cudaGetLastError() == cudaErrorInvalidValue, "shared_48k with 4 bytes dynamic: cudaErrorInvalidValue");

  /* in a capture: refused at the launch, not at the replay, and not recorded */
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  int hf[2] = {-1, -1};
  cudaMemsetAsync(flag, 0, 2 * sizeof(int), q);
  sync_q();
  cudaStreamBeginCapture(q, cudaStreamCaptureModeThreadLocal);
  mark<<<1, 2048, 0, q>>>(flag);
  e = cudaGetLastError();
  mark<<<5, 32, 0, q>>>(flag);
  cudaError_t e2 = cudaGetLastError();
  cudaError_t ended = cudaStreamEndCapture(q, &graph);
  expect(e == cudaErrorInvalidConfiguration && e2 == cudaSuccess && ended == cudaSuccess,
         "in a capture, mark <<<1, 2048>>>: cudaErrorInvalidConfiguration at the launch");
  cudaMemcpyAsync(hf, flag, sizeof hf, cudaMemcpyDeviceToHost, q);
  sync_q();
  expect(hf[0] == 0 && hf[1] == 0, "nothing ran while capturing");
  if (ended == cudaSuccess) {
    cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphLaunch(exec, q);
    e = cudaGetLastError();
    cudaMemcpyAsync(hf, flag, sizeof hf, cudaMemcpyDeviceToHost, q);
    sync_q();
    expect(e == cudaSuccess && hf[0] == 1 && hf[1] == 5, "the replay runs the good launch alone (5 blocks)");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }

  /* fork and join in a capture: q2's work, ordered by events after q's
   * first launch and before q's last, replayed twice with new inputs; a
   * replay out of that order reads what the last replay (or nothing) left */
  cudaStream_t q2, q3;
  cudaEvent_t ready, done;
  cudaStreamCreateWithFlags(&q2, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&q3, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  float *y; /* y1 | y2 | y3, T each */
  cudaMalloc((void **)&y, 3 * T * sizeof(float));
  cudaMemsetAsync(out, 0, T * sizeof(float), q);
  sync_q();
  cudaStreamBeginCapture(q, cudaStreamCaptureModeThreadLocal);
  axpb<<<1, 32, 0, q>>>(y, x, 2, 0, T); /* y1 = 2 x */
  launched(cudaGetLastError());
  cudaEventRecord(ready, q);
  cudaStreamWaitEvent(q2, ready, 0);
  axpb<<<1, 32, 0, q2>>>(y + T, y, 1, 3, T); /* y2 = y1 + 3, on the fork */
  launched(cudaGetLastError());
  axpb<<<1, 32, 0, q>>>(y + 2 * T, x, -1, 0, T); /* y3 = -x, meanwhile */
  launched(cudaGetLastError());
  cudaEventRecord(done, q2);
  cudaStreamWaitEvent(q, done, 0);
  add2<<<1, 32, 0, q>>>(out, y + T, y + 2 * T, T); /* out = y2 + y3 = x + 3 */
  launched(cudaGetLastError());
  ended = cudaStreamEndCapture(q, &graph);
  cudaMemcpyAsync(hout, out, T * sizeof(float), cudaMemcpyDeviceToHost, q);
  sync_q();
  exact = ended == cudaSuccess;
  for (int i = 0; i < T; i++)
    exact &= hout[i] == 0;
  expect(exact, "a capture forking q2 and joining it back: a graph, nothing run while capturing");
  if (ended == cudaSuccess) {
    cudaGraphInstantiate(&exec, graph, 0);
    for (int r = 0; r < 2; r++) {
      float hin[T];
      for (int i = 0; i < T; i++)
        hin[i] = (float)(i * (r + 1)) - 7.0f;
      cudaMemcpyAsync(x, hin, sizeof hin, cudaMemcpyHostToDevice, q);
      cudaGraphLaunch(exec, q);
      cudaMemcpyAsync(hout, out, T * sizeof(float), cudaMemcpyDeviceToHost, q);
      sync_q();
      exact = cudaGetLastError() == cudaSuccess;
      for (int i = 0; i < T; i++)
        exact &= hout[i] == hin[i] + 3;
      char line[120];
      snprintf(line, sizeof line, "its replay %d (new inputs): q2's work after q's first launch, before q's last",
               r + 1);
      expect(exact, line);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  /* forks not joined back: CUDA's cudaErrorStreamCaptureUnjoined, no graph */
  ended = fork_join(1, q2, q3, y, &graph);
  expect(ended == cudaErrorStreamCaptureUnjoined && !graph,
         "a capture forking q2 and never joining it back: cudaErrorStreamCaptureUnjoined");
  ended = fork_join(2, q2, q3, y, &graph);
  expect(ended == cudaErrorStreamCaptureUnjoined && !graph,
         "q2 joined back, then a set on it: cudaErrorStreamCaptureUnjoined");
  ended = fork_join(3, q2, q3, y, &graph);
  expect(ended == cudaSuccess && graph, "q3 forked from q2, joined back through q2: a graph");
  if (graph) cudaGraphDestroy(graph);
  ended = fork_join(0, q2, q3, y, &graph);
  expect(ended == cudaSuccess && graph, "the same capture with q2 joined back: a graph");
  if (graph) cudaGraphDestroy(graph);
  expect(!strcmp(cudaGetErrorName(cudaErrorStreamCaptureUnjoined), "cudaErrorStreamCaptureUnjoined") &&
             !strcmp(cudaGetErrorString(cudaErrorStreamCaptureUnjoined), "capturing stream has unjoined work"),
         "cudaErrorStreamCaptureUnjoined (904): CUDA's words");
  /* the capture's streams leave it when it ends, joined or not: eager again */
  ended = fork_join(1, q2, q3, y, &graph);
  int hv = -1;
  cudaMemsetAsync(flag, 0, sizeof(int), q2);
  cudaMemcpyAsync(&hv, flag, sizeof hv, cudaMemcpyDeviceToHost, q2);
  cudaStreamSynchronize(q2);
  expect(ended == cudaErrorStreamCaptureUnjoined && hv == 0, "after an unjoined capture, q2's work runs eagerly");
  /* EMU_CAPTURE=lenient: work on a stream outside the capture runs at once,
   * as a GPU's thread-local mode runs it, and is not in the graph */
  setenv("EMU_CAPTURE", "lenient", 1);
  cudaMemsetAsync(flag, 0, 2 * sizeof(int), q);
  sync_q();
  cudaStreamBeginCapture(q, cudaStreamCaptureModeThreadLocal);
  mark<<<1, 1, 0, q>>>(flag);
  launched(cudaGetLastError());
  cudaMemsetAsync(flag + 1, 0x11, sizeof(int), q3);
  ended = cudaStreamEndCapture(q, &graph);
  unsetenv("EMU_CAPTURE");
  cudaMemcpyAsync(hf, flag, sizeof hf, cudaMemcpyDeviceToHost, q);
  sync_q();
  exact = ended == cudaSuccess && hf[0] == 0 && hf[1] == 0x11111111;
  if (ended == cudaSuccess) {
    cudaMemsetAsync(flag, 0, 2 * sizeof(int), q);
    cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphLaunch(exec, q);
    cudaMemcpyAsync(hf, flag, sizeof hf, cudaMemcpyDeviceToHost, q);
    sync_q();
    exact &= hf[0] == 1 && hf[1] == 1;
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  expect(exact, "EMU_CAPTURE=lenient: a set on a stream outside the capture runs at once, not replayed");
  cudaFree(y);
  cudaEventDestroy(ready);
  cudaEventDestroy(done);
  cudaStreamDestroy(q2);
  cudaStreamDestroy(q3);

  /* the words for the codes */
  expect(!strcmp(cudaGetErrorName(cudaErrorInvalidConfiguration), "cudaErrorInvalidConfiguration") &&
             !strcmp(cudaGetErrorString(cudaErrorInvalidConfiguration), "invalid configuration argument") &&
             !strcmp(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue") &&
             !strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") &&
             !strcmp(cudaGetErrorName(cudaSuccess), "cudaSuccess") &&
             !strcmp(cudaGetErrorName(12345), "unrecognized error code"),
         "cudaGetErrorName / cudaGetErrorString: CUDA's words");

  /* in bounds: the same fill as `selftest overflow`, without the float more */
  fill<<<1, T, 0, q>>>(out, B * T, 0);
  exact = cudaGetLastError() == cudaSuccess;
  cudaMemcpyAsync(hout, out, sizeof hout, cudaMemcpyDeviceToHost, q);
  sync_q();
  for (int i = 0; i < B * T; i++)
    exact &= hout[i] == (float)i;
  expect(exact, "fill, in bounds: exact");

  cudaFree(x);
  cudaFree(out);
  cudaFree(flag);
  cudaStreamDestroy(q);
  printf("%s: %d failures\n", fails ? "FAILED" : "ALL OK", fails);
  return fails ? 1 : 0;
}
