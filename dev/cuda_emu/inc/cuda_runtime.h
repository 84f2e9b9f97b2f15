/* A host emulation of the CUDA runtime subset models/cuda/ uses, for checking
 * the kernels' logic on a machine without a GPU: a block's threads are an
 * OpenMP team (barrier = __syncthreads), blocks run one after another,
 * __shared__ arrays are statics, device memory is host memory. */
#ifndef SE3_CUDA_EMU_RUNTIME_H
#define SE3_CUDA_EMU_RUNTIME_H
#include <omp.h>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
extern dim3 emu_grid, emu_block, emu_bidx;
#define gridDim emu_grid
#define blockDim emu_block
#define blockIdx emu_bidx
inline dim3 emu_tid() {
  unsigned t = (unsigned)omp_get_thread_num();
  return dim3(t % emu_block.x, t / emu_block.x % emu_block.y, t / (emu_block.x * emu_block.y));
}
#define threadIdx emu_tid()
inline void __syncthreads() {
#pragma omp barrier
}
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }

template <class F> void emu_launch(dim3 g, dim3 b, F f) {
  emu_grid = g;
  emu_block = b;
  const int nt = (int)(b.x * b.y * b.z);
  for (unsigned z = 0; z < g.z; z++)
    for (unsigned y = 0; y < g.y; y++)
      for (unsigned x = 0; x < g.x; x++) {
        emu_bidx = dim3(x, y, z);
#pragma omp parallel num_threads(nt)
        {
          if (omp_get_num_threads() != nt) abort();
          f();
        }
      }
}
template <class G, class B, class... R> std::pair<dim3, dim3> emu_cfg(G g, B b, R...) { return {dim3(g), dim3(b)}; }

/* Stream capture (CUDA graphs): while a capture is under way, launches,
 * copies, sets and GEMMs are recorded as closures over their arguments'
 * values (a kernel's arguments are copied at launch, as on a GPU) instead of
 * run; a graph replays them in order. What a capture in thread-local mode
 * refuses (cudaMalloc, a synchronous copy, a wait) invalidates it. */
struct emu_capture_state {
  int on, invalid;
  std::vector<std::function<void()>> ops;
};
inline emu_capture_state &emu_cap() {
  static emu_capture_state c;
  return c;
}
/* Runs f now, or records it while capturing. */
template <class F> void emu_do(F f) {
  if (emu_cap().on)
    emu_cap().ops.push_back(std::function<void()>(f));
  else
    f();
}
/* A call a capture refuses: 1 (and the capture invalid) while capturing. */
inline int emu_refused() {
  if (!emu_cap().on) return 0;
  emu_cap().invalid = 1;
  return 1;
}
/* The arguments are evaluated once, at the launch, into a tuple of values
 * (as a GPU copies them at the launch); each thread of a block calls the
 * kernel with them. */
#define EMU_LAUNCH(cfg, kernel, args)                                                                                  \
  do {                                                                                                                 \
    auto c_ = emu_cfg cfg;                                                                                             \
    auto t_ = std::make_tuple args;                                                                                    \
    emu_do([c_, t_]() {                                                                                                \
      emu_launch(c_.first, c_.second, [&]() { std::apply([](auto... a_) { kernel(a_...); }, t_); });                   \
    });                                                                                                                \
  } while (0)

typedef int cudaError_t;
enum {
  cudaSuccess = 0,
  cudaErrorInsufficientDriver = 35,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidDevice = 101,
  cudaErrorNotReady = 600,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901
};
typedef void *cudaStream_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
struct cudaDeviceProp {
  char name[256];
  int major, minor;
};
/* EMU_DEVICES (default 1): how many GPUs this process sees. */
inline int emu_devices() {
  const char *v = getenv("EMU_DEVICES");
  if (!v || !*v) return 1;
  char *end;
  long n = strtol(v, &end, 10);
  if (*end || n < 0 || n > 64) {
    fprintf(stderr, "cuda_emu: EMU_DEVICES='%s' is not a count of GPUs from 0 to 64\n", v);
    abort();
  }
  return (int)n;
}
inline cudaError_t cudaGetDeviceCount(int *n) {
  *n = emu_devices();
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int i) { return i >= 0 && i < emu_devices() ? cudaSuccess : cudaErrorInvalidDevice; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
  snprintf(p->name, sizeof p->name, "emulated GPU");
  p->major = 9;
  p->minor = 0;
  return cudaSuccess;
}
inline cudaError_t cudaRuntimeGetVersion(int *v) {
  *v = 13000;
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t *s) {
  *s = (void *)1;
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) {
  return emu_refused() ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char *cudaGetErrorString(cudaError_t) { return "emulated error"; }
inline const char *cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
inline cudaError_t cudaMalloc(void **p, size_t n) {
  if (emu_refused()) return cudaErrorStreamCaptureUnsupported;
  *p = aligned_alloc(256, (n + 255) / 256 * 256);
  if (!*p) return cudaErrorMemoryAllocation;
  memset(*p, 0xff, n); /* poison (NaN floats): the kernels must write everything they read */
  return cudaSuccess;
}
inline cudaError_t cudaFree(void *p) {
  if (emu_refused()) return cudaErrorStreamCaptureUnsupported;
  free(p);
  return cudaSuccess;
}
/* (the models' code never allocates or frees while capturing: refused here,
 * though a GPU would record an allocation node) */
inline cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
inline cudaError_t cudaFreeAsync(void *p, cudaStream_t) {
  if (emu_refused()) return cudaErrorStreamCaptureUnsupported;
  free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) {
  if (emu_refused()) return cudaErrorStreamCaptureUnsupported;
  memcpy(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) {
  emu_do([=]() { memcpy(d, s, n); });
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t) {
  emu_do([=]() { memset(d, v, n); });
  return cudaSuccess;
}
typedef int cudaEvent_t;
enum { cudaEventDisableTiming = 2, cudaHostAllocDefault = 0 };
inline cudaError_t cudaHostAlloc(void **p, size_t n, unsigned) {
  *p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFreeHost(void *p) {
  free(p);
  return cudaSuccess;
}
/* Everything has run by the time a call returns: events are always past. */
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
  *e = 1;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) {
  return emu_refused() ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }

/* graphs: a captured list of closures, replayed in order */
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal,
  cudaStreamCaptureModeThreadLocal,
  cudaStreamCaptureModeRelaxed
};
struct emu_graph {
  std::vector<std::function<void()>> ops;
};
typedef emu_graph *cudaGraph_t;
typedef emu_graph *cudaGraphExec_t;
inline cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  if (emu_cap().on) return cudaErrorStreamCaptureUnsupported;
  emu_cap().on = 1;
  emu_cap().invalid = 0;
  emu_cap().ops.clear();
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *g) {
  emu_capture_state &c = emu_cap();
  c.on = 0;
  *g = NULL;
  if (c.invalid) {
    c.ops.clear();
    return cudaErrorStreamCaptureInvalidated;
  }
  *g = new emu_graph{std::move(c.ops)};
  c.ops.clear();
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long) {
  *e = new emu_graph{g->ops};
  return cudaSuccess;
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t) {
  if (emu_refused()) return cudaErrorStreamCaptureUnsupported; /* (a graph inside a capture: not used) */
  for (auto &f : e->ops)
    f();
  return cudaSuccess;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete g;
  return cudaSuccess;
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
  delete e;
  return cudaSuccess;
}

#endif
