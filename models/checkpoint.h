/* checkpoint.h — training checkpoints: named arrays in one file, written
 * atomically (common/atomic_file.h: a temporary file beside the target,
 * fsynced, then renamed over it, then the folder fsynced), so a kill at any moment leaves either the old
 * checkpoint or the new one, never a torn file.
 *
 * File layout (version 1, little-endian):
 *   char[4] "SE3C", u16 version (1), u16 flags (0)
 *   records, each: u16 name length, the name (no NUL), u8 type, u8 0,
 *                  u64 count, then count values of the type's size
 *   char[4] "END!", u64 FNV-1a 64 of every byte before "END!"
 * Types: SE3_CK_F32 (4 bytes), SE3_CK_F64 (8), SE3_CK_I64 (8), SE3_CK_U8 (1).
 * A reader rejects a file whose magic, version, record bounds or hash do not
 * check out, naming the file and the problem, before it reads more than the
 * records' headers and the small records (se3_ckpt_open).
 */
#ifndef SE3_CHECKPOINT_H
#define SE3_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/atomic_file.h"
#include "common/error.h"

enum se3_ck_type { SE3_CK_F32 = 0, SE3_CK_F64 = 1, SE3_CK_I64 = 2, SE3_CK_U8 = 3 };

struct se3_ckpt_writer {
  struct atomic_file af;
  uint64_t hash;
  int failed;
};

/* Opens PATH.tmp-<pid> for writing. 0, or -1 with a message in err. */
int se3_ckpt_begin(struct se3_ckpt_writer *w, const char *path, struct se3_error *err);
/* Appends one record (names up to 255 bytes, unique within a file). */
void se3_ckpt_put(struct se3_ckpt_writer *w, const char *name, enum se3_ck_type type, const void *data, uint64_t count);
/* Writes the trailer, fsyncs, renames over PATH and fsyncs the folder.
 * 0, or -1 with a message (the temporary file is removed, PATH untouched). */
int se3_ckpt_commit(struct se3_ckpt_writer *w, struct se3_error *err);
/* Gives up: removes the temporary file, PATH untouched. */
void se3_ckpt_abort(struct se3_ckpt_writer *w);

/* The reader's limits. A checkpoint is untrusted input (a file from a
 * colleague or a paper, whose checksum anyone can recompute): every length
 * and count is checked against these and against the file before it is used.
 * A record name is 1..255 bytes of printable ASCII without spaces, unique in
 * its file; a file holds at most SE3_CKPT_MAX_RECORDS records and, unless the
 * caller asks for less, SE3_CKPT_MAX_BYTES bytes. */
#define SE3_CKPT_MAX_RECORDS 1024
#define SE3_CKPT_MAX_BYTES ((uint64_t)2 << 30)
/* se3_ckpt_open reads the values of records up to this many bytes (the
 * architecture, the card, the target: what decides whether the rest is worth
 * reading), SE3_CKPT_SMALL_TOTAL bytes of them in all. */
#define SE3_CKPT_SMALL ((uint64_t)1 << 16)
#define SE3_CKPT_SMALL_TOTAL ((uint64_t)1 << 20)

struct se3_ckpt_record {
  char name[256];
  enum se3_ck_type type;
  uint64_t count;
  uint64_t offset;     /* of its values in the file */
  const uint8_t *data; /* its little-endian values in memory; NULL while only opened and not small */
};

struct se3_ckpt {
  uint8_t *buf; /* the whole file, after se3_ckpt_read */
  size_t len;   /* the file's size */
  struct se3_ckpt_record *rec;
  int n_rec;
  int fd, has_fd; /* the file, open between se3_ckpt_open and se3_ckpt_read */
  uint8_t *small; /* the small records' values read by se3_ckpt_open */
  char path[4096]; /* for messages */
};

/* Opens a checkpoint without reading its bulk: the file must be a regular
 * file (a FIFO or a device is refused before anything is read) of at most
 * max_bytes (0: SE3_CKPT_MAX_BYTES); its magic, version and end marker are
 * checked, then every record's header, in place (name, type, count within
 * the file), and the values of the small records are read. The big records'
 * data stay NULL until se3_ckpt_read, so a caller can check the counts
 * against what it expects before the file is read whole. 0, or -1 with err
 * set, its file the checkpoint's path: SE3_ERR_MODEL for a file refused
 * (the record or field in the message), SE3_ERR_IO when it cannot be read
 * (or changes meanwhile), SE3_ERR_INPUT for one not a regular file,
 * SE3_ERR_MEMORY. err may be NULL. */
int se3_ckpt_open(struct se3_ckpt *c, const char *path, uint64_t max_bytes, struct se3_error *err);
/* Reads the whole opened file through the same descriptor, checks its
 * checksum and that it is the file se3_ckpt_open checked (a file changed
 * meanwhile is refused), and points every record's data into it. On a
 * failure c is freed. 0, or -1 with a message. */
int se3_ckpt_read(struct se3_ckpt *c, struct se3_error *err);
/* se3_ckpt_open then se3_ckpt_read. */
int se3_ckpt_load(struct se3_ckpt *c, const char *path, struct se3_error *err);
/* The same with a bound on the file's size (0: SE3_CKPT_MAX_BYTES). */
int se3_ckpt_load_max(struct se3_ckpt *c, const char *path, uint64_t max_bytes, struct se3_error *err);
void se3_ckpt_free(struct se3_ckpt *c);
/* The bytes one value of the type takes (0 for an unknown type). */
size_t se3_ckpt_type_size(enum se3_ck_type type);
/* Copies record NAME into out (count values of `type`, converted from
 * little-endian). 0, or -1 when the record is missing or its type or count
 * differs. */
int se3_ckpt_get(const struct se3_ckpt *c, const char *name, enum se3_ck_type type, void *out, uint64_t count);
/* The record, or NULL. */
const struct se3_ckpt_record *se3_ckpt_find(const struct se3_ckpt *c, const char *name);

#endif
