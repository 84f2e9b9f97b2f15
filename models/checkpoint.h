/* checkpoint.h — training checkpoints: named arrays in one file, written
 * atomically (models/atomic_file.h: a temporary file beside the target,
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
 * check out, naming the file and the problem.
 */
#ifndef SE3_CHECKPOINT_H
#define SE3_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "models/atomic_file.h"

enum se3_ck_type { SE3_CK_F32 = 0, SE3_CK_F64 = 1, SE3_CK_I64 = 2, SE3_CK_U8 = 3 };

struct se3_ckpt_writer {
  struct atomic_file af;
  uint64_t hash;
  int failed;
};

/* Opens PATH.tmp-<pid> for writing. 0, or -1 with a message in err. */
int se3_ckpt_begin(struct se3_ckpt_writer *w, const char *path, char *err, size_t errlen);
/* Appends one record (names up to 255 bytes, unique within a file). */
void se3_ckpt_put(struct se3_ckpt_writer *w, const char *name, enum se3_ck_type type, const void *data, uint64_t count);
/* Writes the trailer, fsyncs, renames over PATH and fsyncs the folder.
 * 0, or -1 with a message (the temporary file is removed, PATH untouched). */
int se3_ckpt_commit(struct se3_ckpt_writer *w, char *err, size_t errlen);
/* Gives up: removes the temporary file, PATH untouched. */
void se3_ckpt_abort(struct se3_ckpt_writer *w);

struct se3_ckpt_record {
  char name[256];
  enum se3_ck_type type;
  uint64_t count;
  const uint8_t *data; /* little-endian values inside the loaded file */
};

struct se3_ckpt {
  uint8_t *buf;
  size_t len;
  struct se3_ckpt_record *rec;
  int n_rec;
};

/* Reads and checks a whole checkpoint. 0, or -1 with a message in err. */
int se3_ckpt_load(struct se3_ckpt *c, const char *path, char *err, size_t errlen);
void se3_ckpt_free(struct se3_ckpt *c);
/* Copies record NAME into out (count values of `type`, converted from
 * little-endian). 0, or -1 when the record is missing or its type or count
 * differs. */
int se3_ckpt_get(const struct se3_ckpt *c, const char *name, enum se3_ck_type type, void *out, uint64_t count);
/* The record, or NULL. */
const struct se3_ckpt_record *se3_ckpt_find(const struct se3_ckpt *c, const char *name);

#endif
