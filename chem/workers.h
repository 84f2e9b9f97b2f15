/* workers.h — parse records in isolated worker processes.
 *
 * Open Babel crashes or hangs on some inputs and is not thread-safe. A pool
 * of forked, single-threaded workers parses one record at a time; the
 * supervisor gives each record a time limit. A crash or a timeout costs that
 * record (rejected with the reason) and a restart of that worker, never the run.
 */
#ifndef SE3_WORKERS_H
#define SE3_WORKERS_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>
#include "chem/mol.h"
#include "chem/obbridge.h"

struct se3_error;

struct wjob {
  const char *text;     /* record text (in) */
  size_t len;
  const char *format;   /* Open Babel format id (in) */
  int status;           /* out: 0 parsed and passed the checks, 1 rejected */
  struct mol_why why;   /* out: why it was rejected: ob_parse_why's, mol_check_why's or the input shape's
                           (wpool_input_shape) reason, atom and detail;
                           "timed out", "Open Babel crashed", "parser process exited" or "internal error"
                           with the specifics in detail */
  struct mol mol;       /* out: the molecule when status == 0; when 1, its name alone where the record had one
                           (the reject's name; NULL otherwise). The caller frees it either way (mol_free) */
};

struct wpool;

/* A molecule that keeps its file's 3D coordinates is held against
 * chem/shape.h's bounds at the input tolerances (SHAPE_TOL_INPUT,
 * SHAPE_PLANAR_TOL_INPUT) after the checks of mol_check_why: out of bounds,
 * it is rejected ("input shape: bond out of bounds", "input shape: angle
 * out of bounds", "input shape: aromatic ring not planar", the detail
 * naming the atoms and the distance), or, with WPOOL_INPUT_SHAPE_REGENERATE
 * (stages.ingest.input_shape: regenerate), parsed again with a generated
 * shape (gen3d always) and checked again, its shape MOL_SHAPE_REGENERATED;
 * one whose generated shape fails too is rejected for its file's shape, the
 * generation's reason in the detail. */
enum wpool_input_shape { WPOOL_INPUT_SHAPE_REJECT = 0, WPOOL_INPUT_SHAPE_REGENERATE };

/* Start n workers (forked now; each calls ob_init). NULL with err on
 * failure (SE3_ERR_MEMORY, or SE3_ERR_RUN: a process or its pipes could not
 * be made). err may be NULL. */
struct wpool *wpool_start(int n, const struct ob_parse_opts *parse, const struct mol_check_opts *check,
                          enum wpool_input_shape input_shape, struct se3_error *err);
/* Parse jobs[0..n) on the pool, at most timeout_s seconds each: a record's
 * time runs from when a ready worker has it first in line until its answer
 * is read whole, whatever it is waiting for (its request to be taken, Open
 * Babel, its answer to come through). A record out of time is rejected
 * ("timed out", detail "after N s ...") and its worker killed and restarted. Records
 * of any size pass: requests and answers larger than a pipe's buffer never
 * block the supervisor. Calls advance(arg, 1) as each job finishes. Returns 0
 * when all are done, 1 when *stop was set first (jobs are then incomplete),
 * -1 on a system error (in err: SE3_ERR_MEMORY or SE3_ERR_RUN; err may be
 * NULL). */
int wpool_run(struct wpool *p, struct wjob *jobs, int n, double timeout_s, volatile sig_atomic_t *stop,
              void (*advance)(void *arg, int64_t n), void *arg, struct se3_error *err);
/* Kill the workers and free the pool. */
void wpool_stop(struct wpool *p);
/* Counters since start: workers restarted after a crash or timeout. */
int wpool_restarts(const struct wpool *p);
/* Process id of worker k (0 <= k < n), -1 when it has none: for tests and
 * diagnostics. */
pid_t wpool_worker_pid(const struct wpool *p, int k);

#endif
