/* error.h — one way to say what went wrong, and one table of result codes.
 *
 * An error is a value (struct se3_error), in the manner of libyaml's parser
 * error: what kind of failure, the message, and where — a file with its
 * line:col, or a record of an input file — kept apart so that the caller
 * who knows more can add it (a stage adds the file a reader did not know)
 * and the last one formats it once ("file:line:col: message").
 *
 * Every function that fails returns a result code of the one table below
 * (se3_rc): its value is the exit status the se3screen command ends with,
 * so a stage's STOPPED, the trainer's STOPPED and the command's 75 are one
 * number. docs/commands.md lists the table (test_error checks it against
 * se3_rc_table). */
#ifndef SE3_ERROR_H
#define SE3_ERROR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The result codes: a function's return and the command's exit status. */
enum se3_rc {
  SE3_RC_OK = 0,      /* done */
  SE3_RC_FAILED = 1,  /* failed: the message says why (bad data, I/O, the database, memory) */
  SE3_RC_USAGE = 2,   /* refused before any work: the command line or the configuration */
  SE3_RC_STOPPED = 75 /* stopped by a signal (SIGINT, SIGTERM, SIGUSR1): the same command again resumes */
};

/* What failed: each kind has one result code (se3_error_rc). */
enum se3_err_kind {
  SE3_ERR_NONE = 0, /* no error */
  SE3_ERR_USAGE,    /* the command line or the workflow's configuration */
  SE3_ERR_RUN,      /* a stage could not go on: the message says why */
  SE3_ERR_INPUT,    /* an input file or one of its records */
  SE3_ERR_IO,       /* the file system: open, read, write, rename */
  SE3_ERR_DB,       /* SQLite: a statement, a lock held too long, a damaged file */
  SE3_ERR_MEMORY,   /* an allocation */
  SE3_ERR_LIMIT,    /* a bound the configuration or the schema sets */
  SE3_ERR_MODEL,    /* the model: a checkpoint, the device, a loss that is not finite */
  SE3_ERR_STOPPED,  /* a stop signal was seen */
  SE3_ERR_N_KINDS
};

/* One row of the table: a kind, its name, the result code it ends in and
 * what a user reads of it. se3_rc_table[kind] for every kind. */
struct se3_rc_row {
  enum se3_err_kind kind;
  const char *name;
  enum se3_rc rc;
  const char *meaning;
};
extern const struct se3_rc_row se3_rc_table[SE3_ERR_N_KINDS];

#define SE3_ERROR_MESSAGE 2048
#define SE3_ERROR_FILE 512

struct se3_error {
  enum se3_err_kind kind;          /* SE3_ERR_NONE: no error */
  char file[SE3_ERROR_FILE];       /* where: a file ("" not known) ... */
  int line, col;                   /* ... its 1-based line:col (0: not known) ... */
  int64_t record;                  /* ... or its record, 1-based (0: not a record) */
  char message[SE3_ERROR_MESSAGE]; /* what went wrong, without the place */
};

/* Sets e (kind and message; the place cleared) and returns the kind's
 * result code. e may be NULL (the code is still returned). */
int se3_error_set(struct se3_error *e, enum se3_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* se3_error_set with its arguments as a va_list, for a function of the
 * caller's own that takes a format. */
int se3_error_vset(struct se3_error *e, enum se3_err_kind kind, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* No error: kind SE3_ERR_NONE, message and place empty. e may be NULL. */
void se3_error_clear(struct se3_error *e);
/* The place of an error already set: file (NULL: unchanged), line:col. */
void se3_error_at(struct se3_error *e, const char *file, int line, int col);
/* ... or a record of file. */
void se3_error_record(struct se3_error *e, const char *file, int64_t record);
/* Puts "what: " before the message (a caller's context), keeping the kind
 * and the place. */
void se3_error_context(struct se3_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The kind's result code (SE3_RC_OK for SE3_ERR_NONE). */
enum se3_rc se3_error_rc(const struct se3_error *e);
/* "file:line:col: message", "file: record N: message", "file: message" or
 * the message alone, into buf (truncated to n, always terminated). */
const char *se3_error_format(const struct se3_error *e, char *buf, size_t n);
/* se3_error_format into a buffer returned by value, for an argument list:
 * printf("%s", se3_error_str(&e).s) (the buffer lives to the end of the
 * full expression). */
struct se3_error_text {
  char s[SE3_ERROR_MESSAGE + SE3_ERROR_FILE + 64];
};
struct se3_error_text se3_error_str(const struct se3_error *e);
/* The row of a result code's name ("stopped") or NULL. */
const char *se3_rc_name(int rc);

#ifdef __cplusplus
}
#endif

#endif
