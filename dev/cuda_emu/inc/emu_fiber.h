/* emu_fiber.h — a block's threads as fibers of the launching OS thread
 * (cuda_runtime.h's emu_launch calls emu_block_run once a block).
 * Included by one object only, run.sh's emu.cpp.
 *
 * Each thread of a block runs on a stack of its own (256 KiB, a guard page
 * below it, mapped once and reused), switched to with swapcontext: thread 0
 * runs until it finishes or reaches __syncthreads (emu_barrier), then
 * thread 1, and so on; a round ends with every thread waiting at the
 * barrier or finished; the next round resumes those waiting, in the same
 * order, until every thread has finished. A lane may also wait for its
 * warp (emu_warp_wait, inc/emu_mma.h's tensor-core products): while any
 * thread does, a round resumes only those, and the barrier's waiters go on
 * once none is left inside a warp-wide step. A thread that has finished counts
 * as arrived at later barriers, as an exited thread does on a GPU (and as
 * the OpenMP team this replaces had it). A CUDA block's threads run
 * concurrently; here their order is fixed, and a read of shared memory
 * before the barrier that would make it safe finds the poison of
 * emu_shm_t, as before.
 *
 * With AddressSanitizer: ASan's swapcontext clears the shadow of the stack
 * it switches to, which would cost 32 KiB of memset a switch, so the
 * contexts are given no uc_stack after makecontext (glibc's swapcontext
 * does not read it); each switch is announced to ASan instead
 * (__sanitizer_start_switch_fiber / finish), and a fiber's stack is left
 * clean by its instrumented frames returning. */
#ifndef SE3_CUDA_EMU_FIBER_H
#define SE3_CUDA_EMU_FIBER_H
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_FIBER_ASAN 1
#else
#define EMU_FIBER_ASAN 0
#endif

namespace emu_fiber {
constexpr size_t kStack = 256 << 10;
enum { kReady, kWaiting, kWarp, kDone };
struct fiber {
  ucontext_t uc;
  char *stack; /* kStack usable bytes above a guard page */
  int state;
};
thread_local fiber *fibers = nullptr;
thread_local int capacity = 0, in_block = 0;
thread_local ucontext_t sched;
thread_local void (*body)(void *) = nullptr;
thread_local void *body_arg = nullptr;
#if EMU_FIBER_ASAN
thread_local const void *sched_bottom = nullptr;
thread_local size_t sched_size = 0;
#endif

inline void grow(int n) {
  if (n <= capacity) return;
  fiber *f = static_cast<fiber *>(realloc(fibers, sizeof(fiber) * (size_t)n));
  if (!f) {
    fprintf(stderr, "cuda emulator: out of memory for %d fibers\n", n);
    abort();
  }
  fibers = f;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  for (int i = capacity; i < n; i++) {
    void *m = mmap(nullptr, kStack + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0) {
      fprintf(stderr, "cuda emulator: cannot map a stack for thread %d of a block\n", i);
      abort();
    }
    fibers[i].stack = static_cast<char *>(m) + page;
  }
  capacity = n;
}

/* from the scheduler into fiber t, back when it waits or finishes */
inline void enter(int t) {
  fiber &f = fibers[t];
  emu_cur = (unsigned)t;
#if EMU_FIBER_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, kStack);
  swapcontext(&sched, &f.uc);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  swapcontext(&sched, &f.uc);
#endif
}

/* from the running fiber back to the scheduler; `dying`: it never resumes */
inline void leave(int dying) {
  fiber &f = fibers[emu_cur];
#if EMU_FIBER_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(dying ? nullptr : &fake, sched_bottom, sched_size);
  swapcontext(&f.uc, &sched);
  __sanitizer_finish_switch_fiber(fake, &sched_bottom, &sched_size);
#else
  (void)dying;
  swapcontext(&f.uc, &sched);
#endif
}

/* a fiber's first frame: no locals of its own (nothing for ASan to poison
 * that would outlive it on the reused stack) */
inline void entry() {
#if EMU_FIBER_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &sched_bottom, &sched_size);
#endif
  body(body_arg);
  fibers[emu_cur].state = kDone;
  leave(1);
  abort(); /* a finished fiber is never entered again */
}

/* the running fiber waits (state kWaiting or kWarp) until the scheduler resumes it */
inline void park(int state, const char *what) {
  if (!in_block) {
    fprintf(stderr, "cuda emulator: %s outside a kernel\n", what);
    abort();
  }
  fibers[emu_cur].state = state;
  leave(0);
}
} // namespace emu_fiber

void emu_barrier() { emu_fiber::park(emu_fiber::kWaiting, "__syncthreads"); }

/* A lane waiting for the rest of its warp (inc/emu_mma.h's warp-wide
 * products): the next round resumes only such lanes, so a warp-wide step
 * never lets a thread past a __syncthreads that others of its block have
 * not reached. */
void emu_warp_wait() { emu_fiber::park(emu_fiber::kWarp, "a warp-wide instruction"); }

void emu_block_run(int nt, void (*fn)(void *), void *arg) {
  using namespace emu_fiber;
  if (in_block) {
    fprintf(stderr, "cuda emulator: a kernel launched from inside a kernel\n");
    abort();
  }
  grow(nt);
  body = fn;
  body_arg = arg;
  for (int t = 0; t < nt; t++) {
    fiber &f = fibers[t];
    if (getcontext(&f.uc) != 0) abort();
    f.uc.uc_stack.ss_sp = f.stack;
    f.uc.uc_stack.ss_size = kStack;
    f.uc.uc_link = nullptr;
    makecontext(&f.uc, entry, 0);
    f.uc.uc_stack.ss_sp = nullptr; /* see the top: ASan's swapcontext would clear it */
    f.uc.uc_stack.ss_size = 0;
    f.state = kReady;
  }
  in_block = 1;
  /* rounds: every unfinished thread to its next barrier, warp-wide wait or
   * end; while some wait for their warps, a round resumes only those (the
   * barrier's waiters go on once no thread is inside a warp-wide step) */
  for (int left = nt, warp = 0; left > 0;) {
    int warps = 0;
    for (int t = 0; t < nt; t++) {
      if (fibers[t].state == kDone || (warp && fibers[t].state != kWarp)) continue;
      fibers[t].state = kReady;
      enter(t);
      if (fibers[t].state == kDone) left--;
      warps += fibers[t].state == kWarp;
    }
    warp = warps > 0;
  }
  in_block = 0;
  emu_cur = 0;
}
#endif
