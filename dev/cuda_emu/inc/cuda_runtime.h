/* A host emulation of the CUDA runtime subset models/cuda/ uses, for checking
 * the kernels' logic on a machine without a GPU: a block's threads are
 * fibers of one OS thread (inc/emu_fiber.h; barrier = __syncthreads),
 * blocks run one after another,
 * __shared__ arrays are statics, device memory is host memory. Work runs
 * when it is queued, unless its stream waits for an emulated NCCL
 * collective (inc/nccl.h) that other processes have not joined yet: then it
 * waits in the stream's queue, and events, queries and synchronisations
 * behave as a GPU's do.
 *
 * As strict as CUDA, where a GPU would only sometimes show a bug:
 * - shared memory: launch.py turns each `__shared__` array into a static
 *   and gives each launch the kernel's emu_shm_t, so every block starts with
 *   its shared arrays poisoned (0xff bytes: NaN floats, -1 integers); a read
 *   of an element no thread of this block has written yet (a barrier
 *   missing or misplaced) gives NaN in every block, not a stale value left
 *   by the last block (or the zeros of a fresh static). `__shared__` left
 *   unrewritten does not compile;
 * - launch limits (emu_launch_check): more than 1024 threads a block, or
 *   none, a block over (1024, 1024, 64), a grid with a dimension 0, x over
 *   2^31 - 1 or y, z over 65535 (cudaErrorInvalidConfiguration), static plus
 *   dynamic shared memory over 48 KiB (cudaErrorInvalidValue): the kernel
 *   does not run, not even recorded in a capture, and the next
 *   cudaGetLastError returns the code, once (CUDA's non-sticky errors);
 * - device memory is poisoned (0xff) when allocated and allocated at its
 *   exact size (256-byte aligned), so in the AddressSanitizer build
 *   (dev/cuda_emu/run.sh with EMU_ASAN=1) a kernel's access past the end of
 *   a cudaMalloc'd or cudaHostAlloc'd buffer stops the run with ASan's
 *   report (without ASan it goes unnoticed, as on a GPU).
 *
 * Stricter than CUDA where the backend would fail silently on a GPU:
 * - the legacy default stream: every launch, copy, set and event names a
 *   stream made by cudaStreamCreateWithFlags(..., cudaStreamNonBlocking),
 *   else the process stops naming the call; cudaMemcpy, cudaMemset,
 *   cudaStreamCreate (a blocking stream) and cudaDeviceSynchronize are
 *   deprecated here, which dev/cuda_emu/run.sh compiles as an error;
 * - a call a stream capture refuses stops the process (emu_refused), and
 *   so does work queued, while a capture is open, on a stream outside it
 *   (emu_captured: a GPU would run it at once, not in the graph);
 * - EMU_DEVICES=N (default 1): the GPUs this process sees, as
 *   CUDA_VISIBLE_DEVICES or Slurm's --gpus-per-task would leave it. */
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
#include <memory>
#include <algorithm>
#include <deque>
#include <tuple>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
/* launch.py rewrites every __shared__ declaration (see the top); one it
 * missed is a compile error here, not a shared array left unpoisoned. */
#define __shared__ __shared___not_rewritten_by_launch_py

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
extern dim3 emu_grid, emu_block, emu_bidx;
#define gridDim emu_grid
#define blockDim emu_block
#define blockIdx emu_bidx
/* A block's threads are fibers of the launching OS thread (emu_launch
 * below): emu_cur is the running one's index in its block. */
inline thread_local unsigned emu_cur = 0;
inline dim3 emu_tid() {
  unsigned t = emu_cur;
  return dim3(t % emu_block.x, t / emu_block.x % emu_block.y, t / (emu_block.x * emu_block.y));
}
#define threadIdx emu_tid()
void emu_barrier();
inline void __syncthreads() { emu_barrier(); }
/* a lane waits for the rest of its warp (inc/emu_mma.h) */
void emu_warp_wait();
/* blocks run so far by this OS thread: a block's number (emu_mma.h tells
 * one block's warp-wide steps from an earlier block's by it) */
inline thread_local unsigned long long emu_block_no = 0;
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }

/* A kernel's static shared memory (launch.py writes one a kernel, from its
 * __shared__ arrays, which it makes statics, and those of the device
 * functions it calls): its bytes; poison: each array filled with 0xff
 * bytes (NaN floats, -1 integers) first. */
typedef size_t (*emu_shm_t)(int poison);
inline size_t emu_shm_none(int) { return 0; }

/* The blocks one after another, each run by emu_block_run (run.sh's
 * emu.o): its threads are fibers (ucontext) of the calling thread, each on
 * a stack of its own, run in turn: thread 0 until it finishes or reaches
 * __syncthreads, then thread 1, ...; a round ends when every thread waits at
 * the barrier (all go on) or has finished (the block is done); some waiting
 * while others finished stops the process, naming the kernel's block (a
 * barrier not every thread reaches: undefined on a GPU). Shared memory is
 * poisoned before each block starts: fresh in every block. One OS thread a
 * launch, so a block costs a function call a thread and a context switch a
 * barrier, not a team of OS threads woken and put to sleep at every barrier
 * (on 2 cores most of the time an OpenMP team of 256 spent in the kernel). */
void emu_block_run(int nt, void (*body)(void *), void *arg);
template <class F> void emu_launch(dim3 g, dim3 b, emu_shm_t shm, F f) {
  emu_grid = g;
  emu_block = b;
  const int nt = (int)(b.x * b.y * b.z);
  for (unsigned z = 0; z < g.z; z++)
    for (unsigned y = 0; y < g.y; y++)
      for (unsigned x = 0; x < g.x; x++) {
        emu_bidx = dim3(x, y, z);
        emu_block_no++;
        shm(1);
        emu_block_run(nt, [](void *a) { (*static_cast<F *>(a))(); }, &f);
      }
}

/* Streams: a stream made here holds its flags and a queue of work. Work
 * runs at once, in the call that queues it, while its stream's queue is
 * empty (nearly always); it waits in the queue behind an unfinished
 * collective of the emulated NCCL (inc/nccl.h, whose peers are other
 * processes) or a wait for an event of another stream that has one, as on
 * a GPU, and runs when a query, synchronisation or later call finds what
 * it waited for done. NULL is the legacy default stream, which models/cuda/
 * must not use (see the top). */
typedef struct emu_stream *cudaStream_t;
enum { cudaStreamDefault = 0, cudaStreamNonBlocking = 1 };
struct emu_stream {
  unsigned flags;
  /* unfinished work, oldest first: each item returns 1 once done (`block`:
   * it may wait for peers; else it only looks) */
  std::deque<std::function<int(int block)>> q;
  unsigned long long queued, done; /* items ever queued, ever finished */
  /* in a stream capture: the number of the capture it is part of (see
   * emu_capture_state), and the captured ops its next one depends on */
  unsigned long long cap = 0;
  std::vector<int> tail = {};
};
/* (the emulator's lists live until the process ends: the backend frees
 * its buffers and streams from an exit handler, after static destructors
 * may have run) */
inline std::vector<emu_stream *> &emu_streams() {
  static std::vector<emu_stream *> *all = new std::vector<emu_stream *>;
  return *all;
}
/* Runs s's queue in order while its items finish (all of them when `block`,
 * else as far as none waits), up to item `upto` (of queued); 1 when that far is done. */
inline int emu_progress(emu_stream *s, int block, unsigned long long upto = ~0ull) {
  while (!s->q.empty() && s->done < upto) {
    if (!s->q.front()(block)) return 0;
    s->q.pop_front();
    s->done++;
  }
  return 1;
}
/* Every stream's queue run to its end (what cudaFree's implicit
 * synchronisation of the device waits for). */
inline void emu_drain_all() {
  for (emu_stream *s : emu_streams())
    emu_progress(s, 1);
}
/* Queues an item that may wait (a collective, a wait for an event): run
 * now as far as it goes. */
inline void emu_enqueue(emu_stream *s, std::function<int(int)> item) {
  s->q.push_back(std::move(item));
  s->queued++;
  emu_progress(s, 0);
}
/* Stops the process when `what` goes to the legacy default stream or to a
 * blocking stream (which synchronises with it). */
inline void emu_stream_check(cudaStream_t s, const char *what) {
  if (!s) {
    fprintf(stderr, "cuda_emu: %s on the legacy default stream (stream 0): queue it on the backend's stream\n", what);
    abort();
  }
  if (!(s->flags & cudaStreamNonBlocking)) {
    fprintf(stderr, "cuda_emu: %s on a blocking stream (it synchronises with the legacy default stream)\n", what);
    abort();
  }
}
/* A launch's configuration <<<grid, block[, shared[, stream]]>>>: without a
 * stream it is the legacy default stream's. */
struct emu_cfg_t {
  dim3 grid, block;
  cudaStream_t stream;
  size_t dyn_shared; /* the dynamic shared memory asked for (bytes) */
};
template <class G, class B> emu_cfg_t emu_cfg(G g, B b) { return {dim3(g), dim3(b), nullptr, 0}; }
template <class G, class B, class M> emu_cfg_t emu_cfg(G g, B b, M m) { return {dim3(g), dim3(b), nullptr, (size_t)m}; }
template <class G, class B, class M> emu_cfg_t emu_cfg(G g, B b, M m, cudaStream_t s) {
  return {dim3(g), dim3(b), s, (size_t)m};
}

/* Errors: CUDA's codes, names and words for those the emulator returns. */
typedef int cudaError_t;
enum {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInsufficientDriver = 35,
  cudaErrorInvalidDevice = 101,
  cudaErrorNotReady = 600,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureUnjoined = 904
};
struct emu_error_word {
  cudaError_t code;
  const char *name, *words;
};
inline const emu_error_word *emu_error(cudaError_t e) {
  static const emu_error_word w[] = {
      {cudaSuccess, "cudaSuccess", "no error"},
      {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
      {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
      {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
      {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
       "CUDA driver version is insufficient for CUDA runtime version"},
      {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
      {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
      {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
       "operation not permitted when stream is capturing"},
      {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
       "operation failed due to a previous error during capture"},
      {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
  };
  for (const emu_error_word &x : w)
    if (x.code == e) return &x;
  return nullptr;
}
inline const char *cudaGetErrorString(cudaError_t e) {
  return emu_error(e) ? emu_error(e)->words : "unrecognized error code";
}
inline const char *cudaGetErrorName(cudaError_t e) {
  return emu_error(e) ? emu_error(e)->name : "unrecognized error code";
}
/* The last error of this host thread: set by a failed launch or allocation,
 * returned and reset to cudaSuccess by cudaGetLastError (a GPU's non-sticky
 * errors; the emulator has no sticky ones). */
inline cudaError_t &emu_last_error() {
  static thread_local cudaError_t e = cudaSuccess;
  return e;
}
inline cudaError_t emu_error_set(cudaError_t e) {
  if (e != cudaSuccess) emu_last_error() = e;
  return e;
}
inline cudaError_t cudaGetLastError() {
  cudaError_t e = emu_last_error();
  emu_last_error() = cudaSuccess;
  return e;
}

/* A launch's configuration and its kernel's static shared bytes against
 * CUDA's limits (compute capability 9.0, no opt-in to more shared memory):
 * cudaSuccess, or the code the launch fails with, said on stderr. */
#define EMU_SHARED_MAX 49152
inline cudaError_t emu_launch_check(dim3 g, dim3 b, size_t static_shared, size_t dyn_shared, const char *kernel) {
  char why[160] = "";
  cudaError_t e = cudaErrorInvalidConfiguration;
  const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
  if (threads == 0 || threads > 1024)
    snprintf(why, sizeof why, "a block of %llu threads (%u x %u x %u; 1 to 1024)", threads, b.x, b.y, b.z);
  else if (b.x > 1024 || b.y > 1024 || b.z > 64)
    snprintf(why, sizeof why, "a block of %u x %u x %u (at most 1024 x 1024 x 64)", b.x, b.y, b.z);
  else if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
    snprintf(why, sizeof why, "a grid of %u x %u x %u (1 to 2147483647 x 65535 x 65535)", g.x, g.y, g.z);
  else if (static_shared + dyn_shared > EMU_SHARED_MAX) {
    snprintf(why, sizeof why, "%zu bytes of shared memory (%zu static, %zu dynamic; at most %d without opt-in)",
             static_shared + dyn_shared, static_shared, dyn_shared, EMU_SHARED_MAX);
    e = cudaErrorInvalidValue;
  } else
    return cudaSuccess;
  fprintf(stderr, "cuda_emu: launch of %s refused: %s: %s\n", kernel, why, cudaGetErrorName(e));
  return emu_error_set(e);
}

/* Stream capture (CUDA graphs): while a capture is under way, the launches,
 * copies, sets, GEMMs and collectives queued on its streams are recorded
 * instead of run, each as a maker of a fresh queue item over its arguments'
 * values (a kernel's arguments are copied at launch, as on a GPU); a
 * graph's launch makes and queues one item an op, in capture order, on the
 * launch stream, where they run as eager work does (a replayed collective
 * that waits for its peers holds the rest of the replay behind it while the
 * host goes on). What a capture in thread-local mode refuses (cudaMalloc, a
 * synchronous copy, a wait, a query) stops the process here (emu_refused);
 * on a GPU it invalidates the capture.
 * The streams of a capture are CUDA's: the origin (cudaStreamBeginCapture's)
 * and each stream that waits for an event recorded on one of them (a fork);
 * work queued on any other stream while capturing would run at once on a
 * GPU, outside the graph, which the backend never means: the process stops
 * naming the call (emu_captured; EMU_CAPTURE=lenient runs it eagerly). Each
 * op records the ops it depends on (its stream's last, and what the waits
 * joined in), so cudaStreamEndCapture can tell a fork not joined back into
 * the origin (cudaErrorStreamCaptureUnjoined, as CUDA). The replay keeps
 * the capture's order (the program's), one valid order of that graph. */
typedef std::function<std::function<int(int)>()> emu_maker;
struct emu_capture_state {
  int on, invalid;
  unsigned long long seq; /* the number of the last capture begun (a stream's or event's cap) */
  emu_stream *origin;
  std::vector<emu_maker> ops;
  std::vector<std::vector<int>> deps; /* the ops each op depends on (earlier ones) */
};
inline emu_capture_state &emu_cap() {
  static emu_capture_state *c = new emu_capture_state(); /* (see emu_streams) */
  return *c;
}
/* 1 when s is one of the open capture's streams. */
inline int emu_in_capture(const emu_stream *s) { return emu_cap().on && s && s->cap == emu_cap().seq; }
/* Whether `what`, queued on s, is recorded (1) or runs now (0): no capture
 * open, or s in it, as a GPU; s outside an open capture stops the process
 * (EMU_CAPTURE=lenient: 0, eager, as a GPU in thread-local mode does). */
inline int emu_captured(emu_stream *s, const char *what) {
  if (!emu_cap().on) return 0;
  if (emu_in_capture(s)) return 1;
  const char *mode = getenv("EMU_CAPTURE");
  if (!mode || strcmp(mode, "lenient")) {
    fprintf(stderr, "cuda_emu: %s on a stream outside the open stream capture (a GPU runs it at once, not in the "
                    "graph: fork the stream into the capture with an event recorded on a captured stream and "
                    "waited for; EMU_CAPTURE=lenient lets it)\n", what);
    abort();
  }
  return 0;
}
/* Records op `make` on s, a stream of the open capture: after s's last op. */
inline void emu_capture_op(emu_stream *s, emu_maker make) {
  emu_capture_state &c = emu_cap();
  const int node = (int)c.ops.size();
  c.ops.push_back(std::move(make));
  c.deps.push_back(std::move(s->tail));
  s->tail.assign(1, node);
}
/* Runs f now (queued behind the stream's unfinished work, if any), or
 * records it while s is capturing. what: the call, for emu_captured (the
 * cuBLAS headers name none). */
template <class F> void emu_do(cudaStream_t s, F f, const char *what = "a cuBLAS or cuBLASLt call") {
  if (emu_captured(s, what)) {
    auto fn = std::make_shared<F>(std::move(f)); /* (one copy, shared by the replays' items) */
    emu_capture_op(s, [fn]() {
      return std::function<int(int)>([fn](int) {
        (*fn)();
        return 1;
      });
    });
  } else if (s->q.empty()) {
    f();
    s->queued++;
    s->done++;
  } else {
    emu_enqueue(s, [f](int) {
      f();
      return 1;
    });
  }
}
/* The stream cublasSetStream gave the (one) cuBLAS handle. */
inline cudaStream_t &emu_blas_stream() {
  static cudaStream_t s;
  return s;
}
template <class F> void emu_do(F f) { emu_do(emu_blas_stream(), f); }
/* A call a capture refuses (`what`: its name): 0 when no capture is open.
 * While one is, a GPU returns an error and invalidates the capture; the
 * backend then drops the recording and runs the step eagerly, silently, so
 * here the process stops with the call's name instead (a test sees it).
 * EMU_CAPTURE=lenient: the GPU's behaviour (1, and the capture invalid). */
inline int emu_refused(const char *what) {
  if (!emu_cap().on) return 0;
  const char *mode = getenv("EMU_CAPTURE");
  if (!mode || strcmp(mode, "lenient")) {
    fprintf(stderr, "cuda_emu: %s while a stream capture is open (a GPU refuses it and invalidates the capture; "
                    "EMU_CAPTURE=lenient lets it)\n", what);
    abort();
  }
  emu_cap().invalid = 1;
  return 1;
}
/* The arguments are evaluated once, at the launch, into a tuple of values
 * (as a GPU copies them at the launch); each thread of a block calls the
 * kernel with them. shm: the kernel's shared memory (emu_shm_t). The limits
 * are checked here, at the call, inside a capture too: a refused launch is
 * neither run nor recorded. */
#define EMU_LAUNCH(cfg, kernel, shm, args)                                                                             \
  do {                                                                                                                 \
    emu_cfg_t c_ = emu_cfg cfg;                                                                                        \
    emu_stream_check(c_.stream, "launch of " #kernel);                                                                 \
    auto t_ = std::make_tuple args;                                                                                    \
    emu_shm_t s_ = shm;                                                                                                \
    if (emu_launch_check(c_.grid, c_.block, s_(0), c_.dyn_shared, #kernel) == cudaSuccess)                             \
      emu_do(                                                                                                          \
          c_.stream,                                                                                                   \
          [c_, t_, s_]() {                                                                                             \
            emu_launch(c_.grid, c_.block, s_, [&]() { std::apply([](auto... a_) { kernel(a_...); }, t_); });           \
          },                                                                                                           \
          "launch of " #kernel);                                                                                       \
  } while (0)

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
/* the device cudaSetDevice made current (inc/nccl.h: two ranks on one GPU) */
inline int &emu_current_device() {
  static int d;
  return d;
}
inline cudaError_t cudaSetDevice(int i) {
  if (i < 0 || i >= emu_devices()) return cudaErrorInvalidDevice;
  emu_current_device() = i;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int *i) {
  *i = emu_current_device();
  return cudaSuccess;
}
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
#define EMU_DEFAULT_STREAM(why)                                                                                        \
  [[deprecated(why ": models/cuda/ queues its work on its own non-blocking stream (dev/cuda_emu)")]]
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
  *s = new emu_stream{flags, {}, 0, 0};
  emu_streams().push_back(*s);
  return cudaSuccess;
}
EMU_DEFAULT_STREAM("a blocking stream, which synchronises with the legacy default stream")
inline cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
/* (its unfinished work still runs, as on a GPU) */
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  emu_progress(s, 1);
  auto &all = emu_streams();
  for (size_t i = 0; i < all.size(); i++)
    if (all[i] == s) all.erase(all.begin() + (long)i--);
  delete s;
  return cudaSuccess;
}
/* (waits for a peer's collective as long as a GPU would: for ever if it never comes) */
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  emu_stream_check(s, "cudaStreamSynchronize");
  if (emu_refused("cudaStreamSynchronize")) return cudaErrorStreamCaptureUnsupported;
  emu_progress(s, 1);
  return cudaSuccess;
}
inline cudaError_t cudaStreamQuery(cudaStream_t s) {
  emu_stream_check(s, "cudaStreamQuery");
  if (emu_refused("cudaStreamQuery")) return cudaErrorStreamCaptureUnsupported;
  return emu_progress(s, 0) ? cudaSuccess : cudaErrorNotReady;
}
EMU_DEFAULT_STREAM("waits for every stream")
inline cudaError_t cudaDeviceSynchronize() {
  if (emu_refused("cudaDeviceSynchronize")) return cudaErrorStreamCaptureUnsupported;
  emu_drain_all();
  return cudaSuccess;
}
/* Exactly n bytes (no rounding: under ASan the byte after the last is out
 * of bounds), 256-byte aligned as a GPU's. */
inline cudaError_t cudaMalloc(void **p, size_t n) {
  if (emu_refused("cudaMalloc")) return cudaErrorStreamCaptureUnsupported;
  if (posix_memalign(p, 256, n)) {
    *p = nullptr;
    return emu_error_set(cudaErrorMemoryAllocation);
  }
  memset(*p, 0xff, n); /* poison (NaN floats): the kernels must write everything they read */
  return cudaSuccess;
}
inline cudaError_t cudaFree(void *p) {
  if (emu_refused("cudaFree")) return cudaErrorStreamCaptureUnsupported;
  emu_drain_all(); /* (cudaFree synchronises the device) */
  free(p);
  return cudaSuccess;
}
/* (the models' code never allocates or frees while capturing: refused here,
 * though a GPU would record an allocation node for the Async ones) */
inline cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) {
  emu_stream_check(s, "cudaMallocAsync");
  if (emu_refused("cudaMallocAsync")) return cudaErrorStreamCaptureUnsupported;
  return cudaMalloc(p, n);
}
inline cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
  emu_stream_check(s, "cudaFreeAsync");
  if (emu_refused("cudaFreeAsync")) return cudaErrorStreamCaptureUnsupported;
  emu_do(s, [p]() { free(p); }, "cudaFreeAsync");
  return cudaSuccess;
}
EMU_DEFAULT_STREAM("a copy on the legacy default stream")
inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) {
  if (emu_refused("cudaMemcpy")) return cudaErrorStreamCaptureUnsupported;
  memcpy(d, s, n);
  return cudaSuccess;
}
/* Pinned host memory (cudaHostAlloc): [start, end) of each block. */
inline std::vector<std::pair<const char *, const char *>> &emu_pinned() {
  static auto *all = new std::vector<std::pair<const char *, const char *>>;
  return *all;
}
inline int emu_is_pinned(const void *p) {
  for (auto &r : emu_pinned())
    if ((const char *)p >= r.first && (const char *)p < r.second) return 1;
  return 0;
}
/* As CUDA does with pageable host memory: a copy from it takes the source
 * before the call returns, a copy to it returns once written (after the
 * stream's earlier work); pinned memory is read or written when the
 * stream gets there, so a host that reuses it must wait for an event. */
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t q) {
  emu_stream_check(q, "cudaMemcpyAsync");
  const int captured = emu_captured(q, "cudaMemcpyAsync");
  if (k == cudaMemcpyHostToDevice && !emu_is_pinned(s) && !q->q.empty() && !captured) {
    auto copy = std::make_shared<std::vector<char>>((const char *)s, (const char *)s + n);
    emu_do(q, [=]() { memcpy(d, copy->data(), n); }, "cudaMemcpyAsync");
    return cudaSuccess;
  }
  emu_do(q, [=]() { memcpy(d, s, n); }, "cudaMemcpyAsync");
  if (k == cudaMemcpyDeviceToHost && !emu_is_pinned(d) && !captured) emu_progress(q, 1);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t q) {
  emu_stream_check(q, "cudaMemsetAsync");
  emu_do(q, [=]() { memset(d, v, n); }, "cudaMemsetAsync");
  return cudaSuccess;
}
EMU_DEFAULT_STREAM("a set on the legacy default stream")
inline cudaError_t cudaMemset(void *d, int v, size_t n) {
  if (emu_refused("cudaMemset")) return cudaErrorStreamCaptureUnsupported;
  memset(d, v, n);
  return cudaSuccess;
}
enum { cudaEventDisableTiming = 2, cudaHostAllocDefault = 0 };
/* Exactly n bytes (as cudaMalloc), page-aligned as a GPU's pinned memory. */
inline cudaError_t cudaHostAlloc(void **p, size_t n, unsigned) {
  if (posix_memalign(p, 4096, n ? n : 1)) {
    *p = nullptr;
    return emu_error_set(cudaErrorMemoryAllocation);
  }
  emu_pinned().push_back({(const char *)*p, (const char *)*p + n});
  return cudaSuccess;
}
inline cudaError_t cudaFreeHost(void *p) {
  emu_drain_all(); /* (it synchronises the device, as cudaFree does) */
  auto &all = emu_pinned();
  for (size_t i = 0; i < all.size(); i++)
    if (all[i].first == (const char *)p) all.erase(all.begin() + (long)i--);
  free(p);
  return cudaSuccess;
}
/* An event: the stream it was last recorded on and how many of its items
 * were queued then (it has happened once that many have finished); never
 * recorded: it has happened. Recorded on a stream of an open capture, it
 * is a captured event of that capture (cap: its number) standing for the
 * ops captured on the stream so far (tail), and keeps its eager state. */
struct emu_event {
  emu_stream *s;
  unsigned long long at;
  unsigned long long cap;
  std::vector<int> tail;
};
typedef emu_event *cudaEvent_t;
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
  *e = new emu_event{nullptr, 0, 0, {}};
  return cudaSuccess;
}
/* 1 when e was last recorded in the open capture. */
inline int emu_event_captured(const emu_event *e) { return emu_cap().on && e->cap == emu_cap().seq; }
/* (on a stream outside the open capture: an eager record, as on a GPU) */
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  emu_stream_check(s, "cudaEventRecord");
  if (emu_in_capture(s)) {
    e->cap = emu_cap().seq;
    e->tail = s->tail;
    return cudaSuccess;
  }
  e->s = s;
  e->at = s->queued;
  e->cap = 0;
  e->tail.clear();
  return cudaSuccess;
}
/* 1 when e has happened (running its stream as far as `block` allows). */
inline int emu_event_done(emu_event *e, int block) { return !e->s || emu_progress(e->s, block, e->at); }
inline cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (emu_refused("cudaEventQuery")) return cudaErrorStreamCaptureUnsupported;
  return emu_event_done(e, 0) ? cudaSuccess : cudaErrorNotReady;
}
/* s's later work waits until e has happened (a copy of e as it is now:
 * recording e again later does not move the wait). An event of the open
 * capture brings s into the capture (a fork, or a join back when s is
 * already in it): s's next op depends on the ops e stands for. An event
 * from outside, waited for by a capturing stream, adds nothing. */
inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  emu_stream_check(s, "cudaStreamWaitEvent");
  if (emu_event_captured(e)) {
    if (!emu_in_capture(s)) {
      s->cap = emu_cap().seq;
      s->tail.clear();
    }
    for (int n : e->tail)
      if (std::find(s->tail.begin(), s->tail.end(), n) == s->tail.end()) s->tail.push_back(n);
    return cudaSuccess;
  }
  if (emu_in_capture(s) || emu_event_done(e, 0)) return cudaSuccess;
  emu_event then{e->s, e->at, 0, {}};
  emu_enqueue(s, [then](int block) mutable { return emu_event_done(&then, block); });
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (emu_refused("cudaEventSynchronize")) return cudaErrorStreamCaptureUnsupported;
  emu_event_done(e, 1);
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}

/* graphs: the captured ops' makers, replayed in order */
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal,
  cudaStreamCaptureModeThreadLocal,
  cudaStreamCaptureModeRelaxed
};
struct emu_graph {
  std::vector<emu_maker> ops;
};
typedef emu_graph *cudaGraph_t;
typedef emu_graph *cudaGraphExec_t;
inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  emu_stream_check(s, "cudaStreamBeginCapture");
  emu_capture_state &c = emu_cap();
  if (c.on) return cudaErrorStreamCaptureUnsupported;
  c.on = 1;
  c.invalid = 0;
  c.seq++;
  c.origin = s;
  c.ops.clear();
  c.deps.clear();
  s->cap = c.seq;
  s->tail.clear();
  return cudaSuccess;
}
/* 1 when every stream of the capture was joined back into the origin: each
 * one's last ops are the origin's, or ops the origin's last depend on. */
inline int emu_capture_joined() {
  emu_capture_state &c = emu_cap();
  std::vector<char> before(c.ops.size(), 0); /* the origin's last ops and what they depend on */
  for (int n : c.origin->tail)
    before[(size_t)n] = 1;
  for (size_t i = c.ops.size(); i-- > 0;) /* (an op depends on earlier ones only) */
    if (before[i])
      for (int d : c.deps[i])
        before[(size_t)d] = 1;
  for (emu_stream *s : emu_streams())
    if (s->cap == c.seq)
      for (int n : s->tail)
        if (!before[(size_t)n]) return 0;
  return 1;
}
/* The capture's streams leave it, joined or not (a GPU's do, graph or error). */
inline cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *g) {
  emu_capture_state &c = emu_cap();
  *g = NULL;
  const int joined = c.on && !c.invalid ? emu_capture_joined() : 1;
  c.on = 0;
  std::vector<emu_maker> ops = std::move(c.ops);
  c.ops.clear();
  c.deps.clear();
  if (c.invalid) return cudaErrorStreamCaptureInvalidated;
  if (!joined) return cudaErrorStreamCaptureUnjoined;
  *g = new emu_graph{std::move(ops)};
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long) {
  *e = new emu_graph{g->ops};
  return cudaSuccess;
}
/* Each op's item made and queued in turn, as the same calls made eagerly
 * would be (a collective counts for EMU_NCCL_FAULT here, and a `hang`
 * stops the process here, at the launch). */
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
  emu_stream_check(s, "cudaGraphLaunch");
  if (emu_refused("cudaGraphLaunch")) return cudaErrorStreamCaptureUnsupported; /* (a graph inside a capture: not used) */
  for (const emu_maker &make : e->ops)
    emu_enqueue(s, make());
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
