/* selftest.cu — the emulator's own checks (dev/cuda_emu/run.sh builds it
 * through launch.py, as the backend): deliberately broken kernels that the
 * emulator must catch, and correct ones it must let through.
 *   selftest          every check below but the overflow: exit 0 when each
 *                     held, 1 when one did not (each line says which);
 *   selftest overflow writes one float past a cudaMalloc'd buffer: with
 *                     EMU_ASAN=1 ASan must stop it (run.sh checks its
 *                     report); without ASan it goes unnoticed, exit 0.
 * Not CUDA for nvcc: the 48 KiB + 4 static shared array below would not
 * build there (ptxas refuses it); the emulator refuses its launch. */
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

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

static cudaStream_t q;

static void sync_q(void) {
  if (cudaStreamSynchronize(q) != cudaSuccess) expect(0, "cudaStreamSynchronize");
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
  if (argc > 1) {
    fprintf(stderr, "usage: selftest [overflow]\n");
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
