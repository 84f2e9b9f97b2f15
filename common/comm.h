/* comm.h — the processes of one data-parallel run, over MPI.
 *
 * One process per device. A process started by a launcher (mpirun/mpiexec,
 * or Slurm's srun --mpi=pmix) joins its launcher's MPI job; one started
 * without a launcher is the whole run, and every function here then does
 * nothing: comm_open gives NULL, and NULL means "one process". With
 * SE3_COMM=mpi in the environment a process joins MPI even alone (a job of
 * one), so that a run of one process takes the paths of several: the
 * tests compare the two.
 *
 * Sums run in a fixed order. A sum over processes adds the processes'
 * values in rank order, 0 first, in double, on every element the same way
 * whatever MPI's own algorithms would choose (comm_sum_f32: the array is cut
 * into one slice per process; each process receives every process's copy of
 * its slice, adds them in rank order and hands its slice of the result to
 * all). The result is the same on every process, bit for bit, and the same
 * from run to run.
 *
 * Waiting does not spin: a process waiting for the others (rank 0 building
 * graphs while the others wait for the training, a slow step) polls MPI
 * with growing sleeps, so on a node whose cores are all in use a waiting
 * process takes none of them.
 *
 * Every function returns 0, or -1 when MPI reported an error (its message
 * in err where there is one). A process that dies makes the launcher end
 * the others (mpirun's and srun's default); see DESIGN and docs/cluster.md. */
#ifndef SE3_COMM_H
#define SE3_COMM_H

#include <stddef.h>

#include "common/error.h"

struct se3_comm;

/* Joins the launcher's job. *out = NULL for a process started without a
 * launcher (or by one that started it alone). -1 with a message when the
 * launcher started several processes but this build has no MPI, or MPI
 * failed to start. Call once, before any other thread exists. */
int comm_open(struct se3_comm **out, struct se3_error *err);
/* Leaves the job (MPI_Finalize); NULL is allowed. */
void comm_close(struct se3_comm *c);
/* Ends every process of the job with exit status code. */
void comm_abort(const struct se3_comm *c, int code);

int comm_rank(const struct se3_comm *c);       /* 0 for NULL */
int comm_size(const struct se3_comm *c);       /* 1 for NULL */
int comm_local_rank(const struct se3_comm *c); /* among the processes of this node; 0 for NULL */
int comm_local_size(const struct se3_comm *c); /* 1 for NULL */
/* "MPI (Open MPI v4.1.4 ...)" or "none": for --version and logs. */
const char *comm_library(void);

/* bytes of buf from rank 0 to every process. */
int comm_bcast(const struct se3_comm *c, void *buf, size_t bytes);
/* x[0..n) summed over the processes, in rank order, in place on each. */
int comm_sum_f64(const struct se3_comm *c, double *x, size_t n);
int comm_sum_f32(const struct se3_comm *c, float *x, size_t n);
/* comm_sum_f64 that gives up after timeout_s seconds: -2 then (a peer that
 * stopped without dying, which MPI would wait for for ever; the caller
 * ends the job: the sum is left unfinished). */
int comm_sum_f64_within(const struct se3_comm *c, double *x, size_t n, double timeout_s);
/* x[0..n) the largest over the processes, in place on each. */
int comm_max_int(const struct se3_comm *c, int *x, int n);
/* Sharded state (ZeRO stage 1): n elements cut into one contiguous slice a
 * process, in rank order, each ceil(n / size) long (the last shorter, or
 * empty): this process's is [*lo, *hi). The slices comm_sum_f32 sums on. */
void comm_slice(const struct se3_comm *c, size_t n, size_t *lo, size_t *hi);
/* x[0..n) (float: esz 4, double: esz 8) summed over the processes, but only
 * this process's slice is written: the first half of comm_sum_f32, its
 * sums the same to the bit. The rest of x is left as it was. */
int comm_reduce_scatter(const struct se3_comm *c, void *x, size_t n, int esz);
/* Every process's slice of x (elements of esz bytes) to every process. */
int comm_allgather(const struct se3_comm *c, void *x, size_t n, int esz);
/* Sums in the background, while the caller computes (a gradient's
 * buckets summed while the backward pass produces the rest):
 * comm_sum_start queues x[lo..hi) of an array of n elements (esz 4 or 8)
 * and returns at once; a thread of comm's sums it over the processes as
 * comm_sum_f32 would sum the whole array (the same bits, element by
 * element), or with scatter only this process's part of its comm_slice
 * slice, as comm_reduce_scatter. Sums run in the order queued, and every
 * process must queue the same ranges in the same order. comm_sum_wait waits
 * until all queued sums are done: 0, or -1 when one failed; *busy (may be
 * NULL): the seconds the thread spent summing since the last wait. Between
 * the first comm_sum_start and comm_sum_wait the caller makes no other comm
 * call and leaves the ranges alone. Where MPI allows no second thread
 * (MPI_THREAD_SERIALIZED) the sum runs in comm_sum_start. */
int comm_sum_start(const struct se3_comm *c, void *x, size_t n, size_t lo, size_t hi, int esz, int scatter);
int comm_sum_wait(const struct se3_comm *c, double *busy);
/* Every process's slice (mine: its hi - lo elements) into all[0..n) on
 * rank 0, whose own slice must already be in place there. */
int comm_gather_slices(const struct se3_comm *c, const void *mine, void *all, size_t n, int esz);
/* The reverse: rank 0's all[0..n) cut into the slices, each process's into
 * its mine (rank 0 keeps its own in place). */
int comm_scatter_slices(const struct se3_comm *c, const void *all, void *mine, size_t n, int esz);
/* Every process's `mine` (counts[rank] values) end to end, in rank order,
 * into all (sum of counts) on every process. */
int comm_gather_f64(const struct se3_comm *c, const double *mine, const int *counts, double *all);

#endif
