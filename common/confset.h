/* confset.h — one stored value holding a blob per conformer ("SE3K"): the
 * graphs row and the bases row of a molecule of several conformers
 * (stages.ingest.conformers; chem/graph.h, models/basis.h).
 *
 * Layout (version 1, little-endian):
 *   offset 0  char[4]  magic "SE3K"
 *          4  u16      version (1)
 *          6  u16      reserved 0
 *          8  u32      n, the conformers (2..CONFSET_MAX)
 *         12  n x u32  each conformer's blob length
 *             the n blobs, conformer 0 first, each as it would be stored alone
 *             u32      CRC-32C (common/crc32c.h) of every byte before it
 * A molecule of one conformer stores its one blob as it is, without this
 * wrapping: a workdir of one conformer a molecule is byte for byte as before.
 *
 * Header-only, shared by chem/ and models/ as crc32c.h is. */
#ifndef SE3_CONFSET_H
#define SE3_CONFSET_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/le.h"

#define CONFSET_MAGIC "SE3K"
#define CONFSET_MAX 64

static inline int confset_is(const void *blob, size_t len) {
  return blob && len >= 4 && memcmp(blob, CONFSET_MAGIC, 4) == 0;
}

/* Conformer k's blob in *p, *n (pointing into blob): a value that is not a
 * set is conformer 0 itself (k must be 0). The set's header, lengths and
 * checksum are checked. 0, or -1 with err set (SE3_ERR_RUN: a damaged value;
 * err may be NULL). */
static inline int confset_get(const void *blob_v, size_t len, int k, const uint8_t **p, size_t *n,
                              struct se3_error *err) {
  const uint8_t *blob = (const uint8_t *)blob_v;
  if (!confset_is(blob, len)) {
    if (k != 0) {
      se3_error_set(err, SE3_ERR_RUN, "conformer %d asked of a value of one conformer", k);
      return -1;
    }
    *p = blob;
    *n = len;
    return 0;
  }
  if (len < 12 + 4) {
    se3_error_set(err, SE3_ERR_RUN, "conformer set too short (%zu bytes)", len);
    return -1;
  }
  uint32_t nc = le_get_u32(blob + 8);
  if (le_get_u16(blob + 4) != 1 || nc < 2 || nc > CONFSET_MAX || len < 12 + 4 * (size_t)nc + 4) {
    se3_error_set(err, SE3_ERR_RUN, "conformer set: bad header (version %u, %u conformers)",
                  (unsigned)le_get_u16(blob + 4), (unsigned)nc);
    return -1;
  }
  uint64_t total = 12 + 4 * (uint64_t)nc + 4, at = 12 + 4 * (uint64_t)nc;
  for (uint32_t i = 0; i < nc; i++)
    total += le_get_u32(blob + 12 + 4 * i);
  uint32_t stored, computed;
  if (total != len) {
    se3_error_set(err, SE3_ERR_RUN, "conformer set size mismatch: %zu bytes, its lengths say %llu", len,
                  (unsigned long long)total);
    return -1;
  }
  if (crc32c_verify(blob, len, &stored, &computed)) {
    se3_error_set(err, SE3_ERR_RUN, "conformer set checksum mismatch (stored 0x%08x, computed 0x%08x)",
                  (unsigned)stored, (unsigned)computed);
    return -1;
  }
  if (k < 0 || (uint32_t)k >= nc) {
    se3_error_set(err, SE3_ERR_RUN, "conformer %d asked of a set of %u", k, (unsigned)nc);
    return -1;
  }
  for (int i = 0; i < k; i++)
    at += le_get_u32(blob + 12 + 4 * (size_t)i);
  *p = blob + at;
  *n = le_get_u32(blob + 12 + 4 * (size_t)k);
  return 0;
}

/* Conformers in a value: its set's count, 1 for a value that is not a set
 * (not checked further: confset_get checks). */
static inline int confset_count(const void *blob, size_t len) {
  if (!confset_is(blob, len) || len < 12) return 1;
  uint32_t nc = le_get_u32((const uint8_t *)blob + 8);
  return nc >= 2 && nc <= CONFSET_MAX ? (int)nc : 1;
}

/* The set of n blobs (n >= 2) into *out (malloc'd). 0, or -1 out of memory
 * or for a bad n. */
static inline int confset_build(uint8_t *const *blobs, const size_t *lens, int n, uint8_t **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  if (n < 2 || n > CONFSET_MAX) return -1;
  size_t total = 12 + 4 * (size_t)n + 4;
  for (int i = 0; i < n; i++) {
    if (lens[i] > UINT32_MAX) return -1;
    total += lens[i];
  }
  uint8_t *b = (uint8_t *)malloc(total), *p = b + 12 + 4 * (size_t)n;
  if (!b) return -1;
  memcpy(b, CONFSET_MAGIC, 4);
  le_put_u16(b + 4, 1);
  le_put_u16(b + 6, 0);
  le_put_u32(b + 8, (uint32_t)n);
  for (int i = 0; i < n; i++) {
    le_put_u32(b + 12 + 4 * (size_t)i, (uint32_t)lens[i]);
    memcpy(p, blobs[i], lens[i]);
    p += lens[i];
  }
  crc32c_seal(b, total);
  *out = b;
  *out_len = total;
  return 0;
}

#endif
