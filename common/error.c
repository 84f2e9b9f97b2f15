/* error.c — the error value and the table of result codes (error.h). */
#include "common/error.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const struct se3_rc_row se3_rc_table[SE3_ERR_N_KINDS] = {
    [SE3_ERR_NONE] = {SE3_ERR_NONE, "none", SE3_RC_OK, "done"},
    [SE3_ERR_USAGE] = {SE3_ERR_USAGE, "usage", SE3_RC_USAGE,
                       "the command line or the workflow is refused before any work (file:line:col given)"},
    [SE3_ERR_RUN] = {SE3_ERR_RUN, "run", SE3_RC_FAILED, "a stage could not go on: the message says why"},
    [SE3_ERR_INPUT] = {SE3_ERR_INPUT, "input", SE3_RC_FAILED,
                       "an input file cannot be read at all (a bad record is a reject, not an error)"},
    [SE3_ERR_IO] = {SE3_ERR_IO, "io", SE3_RC_FAILED, "the file system: open, read, write or rename failed"},
    [SE3_ERR_DB] = {SE3_ERR_DB, "database", SE3_RC_FAILED,
                    "SQLite: a statement failed, the lock was held too long, or the file is damaged"},
    [SE3_ERR_MEMORY] = {SE3_ERR_MEMORY, "memory", SE3_RC_FAILED, "an allocation failed"},
    [SE3_ERR_LIMIT] = {SE3_ERR_LIMIT, "limit", SE3_RC_FAILED, "a bound of the configuration or the schema was passed"},
    [SE3_ERR_MODEL] = {SE3_ERR_MODEL, "model", SE3_RC_FAILED,
                       "the model: a checkpoint refused, the device failed, a loss not finite"},
    [SE3_ERR_STOPPED] = {SE3_ERR_STOPPED, "stopped", SE3_RC_STOPPED,
                         "a stop signal (SIGINT, SIGTERM, SIGUSR1) was seen: the same command again resumes"},
};

static void vput(struct se3_error *e, const char *fmt, va_list ap) {
  int n = vsnprintf(e->message, sizeof e->message, fmt, ap);
  if (n < 0) snprintf(e->message, sizeof e->message, "(an error whose message could not be formatted)");
}

int se3_error_vset(struct se3_error *e, enum se3_err_kind kind, const char *fmt, va_list ap) {
  if ((unsigned)kind >= SE3_ERR_N_KINDS) kind = SE3_ERR_IO;
  if (e) {
    e->kind = kind;
    e->file[0] = 0;
    e->line = e->col = 0;
    e->record = 0;
    vput(e, fmt, ap);
  }
  return (int)se3_rc_table[kind].rc;
}

int se3_error_set(struct se3_error *e, enum se3_err_kind kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = se3_error_vset(e, kind, fmt, ap);
  va_end(ap);
  return rc;
}

void se3_error_clear(struct se3_error *e) {
  if (!e) return;
  e->kind = SE3_ERR_NONE;
  e->file[0] = e->message[0] = 0;
  e->line = e->col = 0;
  e->record = 0;
}

void se3_error_at(struct se3_error *e, const char *file, int line, int col) {
  if (!e) return;
  if (file) snprintf(e->file, sizeof e->file, "%s", file);
  e->line = line > 0 ? line : 0;
  e->col = col > 0 ? col : 0;
}

void se3_error_record(struct se3_error *e, const char *file, int64_t record) {
  if (!e) return;
  if (file) snprintf(e->file, sizeof e->file, "%s", file);
  e->record = record > 0 ? record : 0;
}

void se3_error_context(struct se3_error *e, const char *fmt, ...) {
  if (!e) return;
  char old[SE3_ERROR_MESSAGE];
  memcpy(old, e->message, sizeof old);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  size_t at = n < 0 ? 0 : (size_t)n < sizeof e->message ? (size_t)n : sizeof e->message - 1;
  if (at + 2 < sizeof e->message) {
    memcpy(e->message + at, ": ", 2);
    at += 2;
    size_t room = sizeof e->message - 1 - at, len = strnlen(old, sizeof old);
    memcpy(e->message + at, old, len < room ? len : room);
    e->message[at + (len < room ? len : room)] = 0;
  }
}

enum se3_rc se3_error_rc(const struct se3_error *e) {
  if (!e || (unsigned)e->kind >= SE3_ERR_N_KINDS) return e ? SE3_RC_FAILED : SE3_RC_OK;
  return se3_rc_table[e->kind].rc;
}

const char *se3_error_format(const struct se3_error *e, char *buf, size_t n) {
  if (!n) return buf;
  if (!e || (e->kind == SE3_ERR_NONE && !e->message[0])) {
    snprintf(buf, n, "no error");
  } else if (e->file[0] && e->line > 0 && e->col > 0) {
    snprintf(buf, n, "%s:%d:%d: %s", e->file, e->line, e->col, e->message);
  } else if (e->file[0] && e->line > 0) {
    snprintf(buf, n, "%s:%d: %s", e->file, e->line, e->message);
  } else if (e->file[0] && e->record > 0) {
    snprintf(buf, n, "%s: record %" PRId64 ": %s", e->file, e->record, e->message);
  } else if (e->file[0]) {
    snprintf(buf, n, "%s: %s", e->file, e->message);
  } else {
    snprintf(buf, n, "%s", e->message);
  }
  return buf;
}

struct se3_error_text se3_error_str(const struct se3_error *e) {
  struct se3_error_text t;
  se3_error_format(e, t.s, sizeof t.s);
  return t;
}

const char *se3_rc_name(int rc) {
  switch (rc) {
  case SE3_RC_OK:
    return "ok";
  case SE3_RC_FAILED:
    return "failed";
  case SE3_RC_USAGE:
    return "usage";
  case SE3_RC_STOPPED:
    return "stopped";
  default:
    return NULL;
  }
}
