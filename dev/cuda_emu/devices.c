/* devices.c — which GPU a process opens, by node-local rank or by index,
 * when it sees EMU_DEVICES emulated GPUs (run.sh builds it beside check,
 * against the same emulated objects). Each case in a child process of its
 * own, since a process opens one device once. Prints a line a case; exits
 * 1 when one got another GPU or message than expected.
 *   usage: devices */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "models/backend.h"
#include "models/cuda/table.h"

/* In a child that sees `devices` GPUs: opens by_rank ? the GPU of local rank
 * `index` : cuda:`index` (twice, then the other way: `again_*`, -1 for
 * none), and writes what it got ("cuda:K" or "refused: ...", a line each)
 * into out. */
static void open_in_child(int devices, int index, int by_rank, int again_index, int again_by_rank, char *out,
                          size_t len) {
  int fd[2];
  out[0] = 0;
  if (pipe(fd)) {
    snprintf(out, len, "pipe failed");
    return;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    char v[16], line[640];
    struct se3_error err;
    snprintf(v, sizeof v, "%d", devices);
    setenv("EMU_DEVICES", v, 1);
    for (int k = 0; k < 2; k++) {
      int i = k ? again_index : index, r = k ? again_by_rank : by_rank;
      if (i < 0) break;
      const struct nn_backend *be = nn_backend_cuda_open(i, r, NN_PREC_FP32, &err);
      if (be)
        snprintf(line, sizeof line, "%s\n", be->name);
      else
        snprintf(line, sizeof line, "refused: %s\n", se3_error_str(&err).s);
      size_t n = strlen(line);
      if (write(fd[1], line, n) != (ssize_t)n) _exit(2);
    }
    _exit(0);
  }
  close(fd[1]);
  size_t got = 0;
  ssize_t r;
  while (got + 1 < len && (r = read(fd[0], out + got, len - 1 - got)) > 0)
    got += (size_t)r;
  out[got] = 0;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status)) snprintf(out + got, len - got, "(the child failed)");
}

static int device_case(const char *what, int devices, int index, int by_rank, int again_index, int again_by_rank,
                       const char *want1, const char *want2) {
  char out[2048];
  open_in_child(devices, index, by_rank, again_index, again_by_rank, out, sizeof out);
  char *nl = strchr(out, '\n'), *second = nl ? nl + 1 : out + strlen(out);
  int ok = nl && !strncmp(out, want1, strlen(want1)) && (!want2 || !strncmp(second, want2, strlen(want2)));
  for (char *p = out; (p = strchr(p, '\n')) != NULL;)
    *p = ' ';
  printf("%-58s %s %s\n", what, out, ok ? "ok" : "FAIL");
  if (!ok) printf("   FAIL: expected '%s...'%s%s\n", want1, want2 ? ", then '" : "", want2 ? want2 : "");
  return !ok;
}

int main(void) {
  int bad = 0;
  bad += device_case("1 GPU seen, local rank 1 (--gpus-per-task=1)", 1, 1, 1, -1, 0, "cuda:0", NULL);
  bad += device_case("1 GPU seen, local rank 3", 1, 3, 1, -1, 0, "cuda:0", NULL);
  bad += device_case("1 GPU seen, cuda:1 asked for", 1, 1, 0, -1, 0,
                     "refused: GPU 1 asked for, 1 found (cuda:0); set device: cuda:0, or set device: cpu", NULL);
  bad += device_case("2 GPUs seen, local rank 3", 2, 3, 1, -1, 0, "cuda:1", NULL);
  bad += device_case("4 GPUs seen, local rank 2 (the node's GPUs, all seen)", 4, 2, 1, -1, 0, "cuda:2", NULL);
  bad += device_case("2 GPUs seen, cuda:1 asked for", 2, 1, 0, -1, 0, "cuda:1", NULL);
  bad += device_case("2 GPUs seen, cuda:2 asked for", 2, 2, 0, -1, 0,
                     "refused: GPU 2 asked for, 2 found (cuda:0 .. cuda:1)", NULL);
  bad += device_case("no GPU seen, local rank 0", 0, 0, 1, -1, 0, "refused: no GPU: the CUDA driver found none", NULL);
  bad += device_case("1 GPU seen, rank 1 opens it, then rank 1 again", 1, 1, 1, 1, 1, "cuda:0", "cuda:0");
  bad += device_case("1 GPU seen, rank 1 opens it, then cuda:1", 1, 1, 1, 1, 0, "cuda:0",
                     "refused: this process already drives GPU 0");
  printf("%s: %d failures\n", bad ? "FAILED" : "ALL OK", bad);
  return bad != 0;
}
