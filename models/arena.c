/* arena.c — memory for a training or inference step, kept across steps.
 *
 * Every step asks for the same buffers in the same order, so blocks made by
 * the first step serve all later ones: no fresh pages to fault in (on these
 * machines the kernel's first-touch faults cost as much as the arithmetic)
 * and no allocator work. */
#include <stdlib.h>

#include "models/layers.h"

#define ARENA_ALIGN 64
#define ARENA_MIN_BLOCK ((size_t)64 << 20)

/* The bytes in use now. */
static size_t in_use(const struct nn_arena *a) {
  size_t n = 0;
  for (int i = 0; i <= a->cur && i < a->n; i++)
    n += a->blocks[i].used;
  return n;
}

/* Keeps the high-water mark. */
static void note_peak(struct nn_arena *a) {
  size_t n = in_use(a);
  if (n > a->peak) a->peak = n;
}

void *nn_arena_alloc(struct nn_arena *a, size_t bytes) {
  bytes = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
  if (bytes == 0) bytes = ARENA_ALIGN;
  if (a->limit && in_use(a) + bytes > a->limit) return NULL;
  for (; a->cur < a->n; a->cur++) {
    struct nn_arena_block *b = &a->blocks[a->cur];
    if (b->cap - b->used >= bytes) {
      void *p = b->p + b->used;
      b->used += bytes;
      note_peak(a);
      return p;
    }
  }
  if (a->n == a->cap_blocks) {
    int cap = a->cap_blocks ? 2 * a->cap_blocks : 16;
    struct nn_arena_block *grown = realloc(a->blocks, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    a->blocks = grown;
    a->cap_blocks = cap;
  }
  size_t cap = bytes > ARENA_MIN_BLOCK ? bytes : ARENA_MIN_BLOCK;
  char *p = a->block_alloc ? a->block_alloc(cap) : aligned_alloc(ARENA_ALIGN, cap);
  if (!p) return NULL;
  a->blocks[a->n] = (struct nn_arena_block){p, cap, bytes};
  a->cur = a->n++;
  note_peak(a);
  return p;
}

void nn_arena_reset(struct nn_arena *a) {
  for (int i = 0; i < a->n; i++)
    a->blocks[i].used = 0;
  a->cur = 0;
}

void nn_arena_free(struct nn_arena *a) {
  for (int i = 0; i < a->n; i++)
    if (a->block_free)
      a->block_free(a->blocks[i].p);
    else
      free(a->blocks[i].p);
  free(a->blocks);
  a->blocks = NULL;
  a->n = a->cap_blocks = a->cur = 0;
  a->peak = 0;
}

size_t nn_arena_peak(const struct nn_arena *a) { return a->peak; }

size_t nn_arena_bytes(const struct nn_arena *a) {
  size_t n = 0;
  for (int i = 0; i < a->n; i++)
    n += a->blocks[i].cap;
  return n;
}

struct nn_arena_mark nn_arena_mark(const struct nn_arena *a) {
  struct nn_arena_mark m = {a->cur, a->cur < a->n ? a->blocks[a->cur].used : 0};
  return m;
}

void nn_arena_release(struct nn_arena *a, struct nn_arena_mark m) {
  for (int i = m.cur + 1; i < a->n; i++)
    a->blocks[i].used = 0;
  if (m.cur < a->n) a->blocks[m.cur].used = m.used;
  a->cur = m.cur;
}
