/* state.cu — what every operation of the CUDA backend asks of the device
 * (cuda.h): its stream, cuBLAS's handles and the GEMMs' workspace, the
 * table's precision, the record of failures, the scratch buffers and
 * whether work is being recorded. The state itself (state.h) is opened,
 * synced and closed by table.cu, which calls the operations: they call
 * this file, never table.cu, so calls run one way. */
#include <stdio.h>
#include <string.h>

#include "models/cuda/cuda.h"
#include "models/cuda/state.h"

struct cu_state cu_st;
static struct cu_state &st = cu_st; /* (as table.cu names it) */

cudaStream_t cu_stream(void) { return st.stream; }
cublasHandle_t cu_blas(void) { return st.blas; }
cublasLtHandle_t cu_blaslt(void) { return st.lt; }
void *cu_workspace(size_t *bytes) {
  *bytes = st.ws ? CU_WORKSPACE_BYTES : 0;
  return st.ws;
}
enum nn_precision cu_precision(void) { return st.precision; }

/* ---- failures ---- */

/* Only the file's name: the path is the build machine's. */
static const char *base_name(const char *file) {
  const char *s = strrchr(file, '/');
  return s ? s + 1 : file;
}

void cu_fail(const char *file, int line, const char *what) {
  if (st.recording) { /* nothing ran: the recording is dropped and the work runs eagerly, where it fails again */
    st.rec_spoiled = 1;
    return;
  }
  if (st.failed) return; /* the first failure is the one to report */
  st.failed = 1;
  snprintf(st.err, sizeof st.err, "%s (models/cuda/%s:%d)", what, base_name(file), line);
}

int cu_check(cudaError_t e, const char *file, int line, const char *what) {
  if (e == cudaSuccess) return 0;
  char msg[512];
  snprintf(msg, sizeof msg, "CUDA error in %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
  cu_fail(file, line, msg);
  return -1;
}

int cu_check_blas(cublasStatus_t s, const char *file, int line, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS) return 0;
  char msg[512];
  snprintf(msg, sizeof msg, "cuBLAS error in %s: %s (%s)", what, cublasGetStatusString(s), cublasGetStatusName(s));
  cu_fail(file, line, msg);
  return -1;
}

void *cu_scratch(enum cu_scratch_slot slot, size_t bytes) {
  if (bytes <= st.scratch_cap[slot] && st.scratch[slot]) return st.scratch[slot];
  if (st.recording) { /* no memory is allocated while recording: the work runs eagerly instead */
    st.rec_spoiled = 1;
    return NULL;
  }
  st.gen++; /* recordings that used the old buffer are stale */
  if (st.scratch[slot]) CU_CHECK(cudaFreeAsync(st.scratch[slot], st.stream));
  st.scratch[slot] = NULL;
  st.scratch_cap[slot] = 0;
  /* half as much again as asked, in whole MiB, so a batch a little larger
   * than the last does not reallocate */
  size_t cap = bytes + bytes / 2;
  cap = (cap + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
  void *p = NULL;
  if (cudaMallocAsync(&p, cap, st.stream) != cudaSuccess) {
    (void)cudaGetLastError();
    char msg[160];
    snprintf(msg, sizeof msg, "out of GPU memory for %zu bytes of scratch", cap);
    cu_fail(__FILE__, __LINE__, msg);
    return NULL;
  }
  st.scratch[slot] = p;
  st.scratch_cap[slot] = cap;
  return p;
}

int cu_recording(void) { return st.recording; }
