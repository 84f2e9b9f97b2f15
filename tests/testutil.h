/* testutil.h — helpers shared by the test programs. */
#ifndef SE3_TESTUTIL_H
#define SE3_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* A fresh empty folder under the build tree's testtmp/ (removed first if it exists). */
char *tu_tmpdir(const char *name);
/* Write a file; returns its path (malloc'd) = dir/name. */
char *tu_write(const char *dir, const char *name, const char *text);
/* Read a whole file (malloc'd, NUL-terminated), NULL if missing. */
char *tu_read(const char *path, size_t *len);
/* Run a shell command, capturing stdout+stderr into *out (malloc'd) when out
 * is non-NULL. Returns the exit status (128+signal when killed). */
int tu_sh(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 when ../shared/data exists (the larger data sets). */
int tu_have_shared(void);
/* Path under the source tree or shared/ (static buffer rotation of 8). */
const char *tu_src(const char *rel);
const char *tu_shared(const char *rel);

/* Rows of a query on a SQLite file as text: columns separated by '|', rows by
 * '\n', blobs as hex, NULL as "NULL". Opens the file read-only, directly
 * through SQLite (not through se3screen). NULL on error (message in *err). */
/* SQL: a molecules row's place in the workflow's order (its input's place,
 * then its record), for ORDER BY; `m` the table's alias with its dot, or
 * "". Ids go by the input's key (its set and path), not its place. */
#define TU_IN_ORDER(m) "(SELECT position FROM ingest_files f WHERE f.input = " m "id / 1000000000), " m "record_no"
/* SQL: whether a molecules row came from the workflow's input at place k */
#define TU_FROM_INPUT(m, k) "(" m "id / 1000000000 = (SELECT input FROM ingest_files WHERE position = " #k "))"
char *tu_query(const char *db, const char *sql);
/* The same, waiting at most busy_ms for a writer's lock (tu_query: 10 s);
 * with 0, the caller may hold the writer frozen: a locked database or a
 * schema not yet there gives NULL at once, with no message. */
char *tu_query_wait(const char *db, const char *sql, int busy_ms);
/* First column of the first row as an integer, -1 on error or no row. */
long long tu_query_int(const char *db, const char *sql);
/* Monotonic clock in seconds, and a sleep of s seconds. */
double tu_now(void);
void tu_sleep(double s);
/* Run `se3screen ARGS` (printf-style), capturing output; returns exit status. */
int tu_se3(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Start `se3screen argv[1..]` in the background (stderr appended to log,
 * stdout discarded); returns its pid. tu_wait gives its exit status, or
 * 128 + the signal that killed it. */
int tu_spawn_se3(const char *log, char *const argv[]);
int tu_wait(int pid);
/* Runs se3screen argv again and again, each time killed with SIGKILL after a
 * random delay in [lo, hi] s, until it has been killed mid-way `kills` times,
 * or a run ends by itself (which must be with status 0), or after
 * max_attempts runs. Returns the number of runs killed mid-way. */
int tu_kill_randomly(const char *log, char *const argv[], double lo, double hi, int kills, int max_attempts);
/* The same, for runs whose starting state the shell command `reset` restores:
 * when a run ends by itself before `kills` kills (the machine was faster than
 * the uninterrupted run that sized [lo, hi] suggested), `reset` is run and the
 * kills begin again with the window's width halved, up to 4 times. Returns
 * the kills of the last sequence. */
int tu_kill_randomly_reset(const char *log, char *const argv[], double lo, double hi, int kills, int max_attempts,
                           const char *reset);
/* Kill -9 in states seen, not at moments guessed: runs argv `kills` times,
 * each time freezing the run once `db`'s ledger shows it has committed a
 * chunk of `stage` of its own and `min_left` or more of the stage's chunks
 * are left (stage_state.n_chunks), then SIGKILL. The kill lands at whatever
 * point the run had reached when frozen (mid-chunk as a rule). Returns the
 * kills made: fewer when too few chunks were left for the next one. */
int tu_kill_in_progress(const char *log, char *const argv[], const char *db, const char *stage, int kills,
                        int min_left);
/* Random kills (tu_kill_randomly_reset) topped up to `need` runs killed
 * mid-way by tu_kill_in_progress; when the random ones left too little of
 * `stage` for that, `reset` restores the start and every kill is in a state
 * seen. The count then depends on the machine's speed nowhere. Returns the
 * kills of the sequence that counts. */
int tu_kills_mid_way(const char *log, char *const argv[], double lo, double hi, int need, const char *reset,
                     const char *db, const char *stage);
/* Asserts that training in workdir `wd` ended where the reference workdir
 * `ref` did: the checkpoint files models/train-0/<files[i]> byte-equal and the
 * metrics tables equal. */
void tu_assert_same_training(const char *ref, const char *wd, const char *const files[], int n);

/* Reads the SD file `path` through se3screen's record reader and Open Babel
 * (no 3D generation), asserting that every record parses and has 3D
 * coordinates, and calls each(i, m, ctx) for record i (0-based; m is freed
 * after). Returns the number of records. */
struct mol;
int tu_sdf_each(const char *path, void (*each)(int i, const struct mol *m, void *ctx), void *ctx);

/* Deterministic uniform numbers in [0, 1) for test data (one stream per process). */
void tu_seed(uint64_t seed);
double tu_rnd(void);
/* Append an atom (atomic number z, coordinates in Å) or a bond (0-based atoms,
 * stored with a < b) to a molecule built by hand. */
struct mol;
void tu_add_atom(struct mol *m, int z, double x, double y, double zz);
void tu_add_bond(struct mol *m, int a, int b, int order);
/* m (initialised, empty) made a chain of n atoms: a random walk of steps
 * about 1.4 Å (tu_rnd), elements H, C, N, O in turn from (5a + variant) mod
 * 4, bond orders alternating 2 and 1; dim 3. The molecules of the model
 * tests. */
void tu_chain_mol(struct mol *m, int n, int variant);
/* m's radius+bond graph (cutoff 2.6 Å; node features H C N O, other,
 * charge: 6 wide) into g (graph_init'd by the caller); asserts that it
 * builds. The graphs of the model tests. */
struct graph;
void tu_graph_build(const struct mol *m, struct graph *g);
/* tu_graph_build's graph of m appended to bb; asserts that it fits. The
 * batches of the model tests. */
struct se3_batch_buf;
void tu_batch_add_mol(struct se3_batch_buf *bb, const struct mol *m);

/* ---- Waiting for a state, not for a time (issue 30) -------------------------
 * A test that sleeps and then assumes where a process is fails when the
 * machine is faster or slower than its author's. These wait for something
 * the test can see, with a deadline that only ends a hang. */

/* Waits up to `limit` s for the file `path` to exist and contain `text`
 * ("" for any content). 0 when it does, -1 at the deadline. */
int tu_wait_for_text(const char *path, const char *text, double limit);
/* Stops process pid with SIGSTOP (any process of this user, not only a
 * child) and waits until every one of its threads is stopped: nothing it
 * does changes while frozen. 0 when frozen, -1 when it had ended (gone or a
 * zombie not yet waited for). tu_thaw continues it (SIGCONT); a signal sent
 * while it is frozen is delivered before it runs another instruction. */
int tu_freeze(int pid);
void tu_thaw(int pid);
/* Freezes the n processes pids[] in a state: every 20 ms, up to `limit` s,
 * they are frozen and state(ctx) is asked; when it returns > 0 they are
 * left frozen (the caller thaws them), otherwise thawed. state returns 0
 * for "not yet" and < 0 for "passed: cannot come any more"; it must not
 * wait for the frozen processes (tu_query_wait with 0 for a database they
 * write). Returns 1 when frozen in the state, 0 when one of the processes
 * ended before the state was seen, -1 when state() said it had passed, -2
 * at the deadline. */
int tu_freeze_in_state(const int pids[], int n, double limit, int (*state)(void *ctx), void *ctx);
/* Sends `sig` to process `target` (one of pids[], or not) in a state seen
 * by tu_freeze_in_state, before the processes are thawed: the signal
 * lands in exactly the state seen, however fast or slow the machine.
 * Returns what tu_freeze_in_state returned (1: sent). */
int tu_signal_in_state(const int pids[], int n, int target, int sig, double limit, int (*state)(void *ctx), void *ctx);
/* 1 when signal `sig` waits to be delivered to process pid (its thread's
 * or its process's pending set): a signal sent to a frozen process, or
 * forwarded to it by a frozen one's parent (a Slurm script's trap), has
 * arrived and will land when it is thawed. */
int tu_signal_pending(int pid, int sig);

/* Waits up to `limit` s for a child of process `parent` whose name (the
 * comm of /proc/PID/stat) is `name`, e.g. the se3screen a Slurm script
 * started. Its pid, or -1 at the deadline or when parent has ended. */
int tu_child_named(int parent, const char *name, double limit);

/* Counts that a loaded machine cannot change, for "not quadratic, not
 * hanging" checks (issue 30): the CPU time of this process in seconds
 * (other processes competing for the cores do not add to it, unlike the
 * wall clock), and the bytes this process has read through read(2) and
 * its kin since it started (/proc/self/io rchar; -1 where the kernel does
 * not keep it). */
double tu_cpu_now(void);
long long tu_bytes_read(void);

/* Appends to the checkpoint at path one more u8 record whose name is
 * name_len bytes long (past the writer's 255 if asked), its checksum
 * recomputed: what a stranger can make of a model in minutes (issue 51). */
void tu_ckpt_append_record(const char *path, size_t name_len);

#endif
