/* records_cml.c — CML files: each top-level <molecule> element is a record,
 * found by a character scan that knows tags, quotes and comments.
 */
#define _GNU_SOURCE /* memmem */
#include "chem/records_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Scans the input character by character for top-level <molecule> elements
 * (any namespace prefix), skipping comments and counting nested <molecule>
 * tags. A tag at top level is kept tentatively from its '<' and dropped at
 * its '>' unless it opens a molecule. Text outside top-level molecules is
 * dropped.
 *
 * Open Babel (libxml2) reads a lone <molecule> element without any root or
 * xmlns (checked with 3.1.1), so records are not wrapped. A namespace prefix
 * declared on an enclosing element (<cml xmlns:cml="..."><cml:molecule>) is
 * copied into the molecule's start tag, or libxml2 would reject the record
 * (and print to stderr). */
static int cml_put(struct rec_reader *r, char c) {
  if (r->overflow) return 0;
  if (r->tlen + 2 > r->tcap) {
    if (r->tlen + 1 > r->max_rec) {
      r->overflow = 1;
      return 0;
    }
    if (rec_text_reserve(r, 1) != 0) return -1;
  }
  r->text[r->tlen++] = c;
  return 0;
}

static int cml_tag_is_molecule(const struct rec_reader *r) {
  const char *n = r->tag_name, *colon = strrchr(n, ':');
  return strcmp(colon ? colon + 1 : n, "molecule") == 0;
}

/* Remembers the xmlns:prefix declarations of a top-level tag (text[from..tlen)). */
static int cml_keep_ns(struct rec_reader *r, size_t from) {
  const char *t = r->text + from, *end = r->text + r->tlen;
  while ((t = memmem(t, (size_t)(end - t), "xmlns:", 6)) != NULL) {
    const char *eq = memchr(t, '=', (size_t)(end - t));
    if (!eq || eq + 1 >= end || (eq[1] != '"' && eq[1] != '\'')) break;
    const char *close = memchr(eq + 2, eq[1], (size_t)(end - eq - 2));
    if (!close) break;
    size_t n = (size_t)(close + 1 - t);
    if (isspace((unsigned char)t[-1]) && r->ns_len + n + 2 <= 4096) {
      char *ns = realloc(r->ns, r->ns_len + n + 2);
      if (!ns) return -1;
      r->ns = ns;
      r->ns[r->ns_len++] = ' ';
      memcpy(r->ns + r->ns_len, t, n);
      r->ns_len += n;
      r->ns[r->ns_len] = 0;
    }
    t = close + 1;
  }
  return 0;
}

/* Adds the remembered declarations for the prefix of the molecule's tag,
 * unless the tag declares it itself. */
static int cml_add_ns(struct rec_reader *r) {
  const char *colon = strchr(r->tag_name, ':');
  if (!r->ns || !colon || r->overflow || r->tag_nlen >= (int)sizeof r->tag_name - 1) return 0;
  char want[48];
  snprintf(want, sizeof want, "xmlns:%.*s=", (int)(colon - r->tag_name), r->tag_name);
  size_t wn = strlen(want);
  if (memmem(r->text + r->tag_start, r->tlen - r->tag_start, want, wn)) return 0;
  const char *d = strstr(r->ns, want); /* the first declaration of the prefix */
  if (!d) return 0;
  const char *q = d + wn, *close = strchr(q + 1, *q);
  size_t n = (size_t)(close + 1 - d);
  size_t at = r->tag_start + 1 + strlen(r->tag_name);
  if (rec_text_reserve(r, n + 1) != 0) return -1;
  memmove(r->text + at + n + 1, r->text + at, r->tlen - at);
  r->text[at] = ' ';
  memcpy(r->text + at + 1, d, n);
  r->tlen += n + 1;
  return 0;
}

/* The '>' ending a tag: 1 when a record is complete, -1 out of memory. */
static int cml_tag_end(struct rec_reader *r) {
  int mol = cml_tag_is_molecule(r), self = r->prev1 == '/';
  r->in_tag = 0;
  if (mol && r->tag_close) {
    if (r->depth > 0 && --r->depth == 0) return 1;
  } else if (mol && !self) {
    if (r->depth++ == 0) {
      r->rec_line = r->tag_line;
      if (cml_add_ns(r) != 0) return -1;
    }
  } else if (mol && r->depth == 0) { /* <molecule/>: an empty record */
    r->rec_line = r->tag_line;
    r->cml_empty = 1;
    return 1;
  } else if (r->depth == 0) {
    if (!r->tag_close && !r->overflow && cml_keep_ns(r, r->tag_start) != 0) return -1;
    r->tlen = r->tag_start; /* not ours */
    r->overflow = 0;
  }
  return 0;
}

int rec_next_cml(struct rec_reader *r, struct rec *out) {
  rec_text_reset(r);
  for (;;) {
    if (!r->have_cp) {
      int k = rec_next_piece(r, &r->cp);
      if (k < 0) return -1;
      if (k == 0) {
        if (r->depth > 0) {
          r->depth = r->in_tag = 0;
          return rec_emit(r, out, r->rec_line, "unterminated <molecule> element");
        }
        return 0;
      }
      r->have_cp = 1;
      r->cpos = 0;
    }
    while (r->cpos < r->cp.n) {
      char c = r->cp.p[r->cpos++];
      int store = r->depth > 0, done = 0;
      if (!c && r->depth > 0) rec_note_nul(&r->nul_line, &r->nul_col, &r->cp, r->cpos - 1);
      if (r->in_comment) {
        if (c == '>' && r->prev1 == '-' && r->prev2 == '-') r->in_comment = 0;
      } else if (!r->in_tag) {
        if (c == '<') {
          r->in_tag = 1;
          r->tag_close = r->tag_quote = r->tag_name_done = r->tag_nlen = 0;
          r->tag_name[0] = 0;
          r->tag_line = r->cp.no;
          if (r->depth == 0) r->tag_start = r->tlen;
          store = 1;
        }
      } else {
        store = 1;
        if (r->tag_quote) {
          if (c == r->tag_quote) r->tag_quote = 0;
        } else if (c == '>') {
          if (cml_put(r, c) != 0) return rec_oom(r);
          store = 0;
          done = cml_tag_end(r);
          if (done < 0) return rec_oom(r);
        } else if (!r->tag_name_done) {
          if (c == '/' && r->tag_nlen == 0 && !r->tag_close) {
            r->tag_close = 1;
          } else if (isspace((unsigned char)c) || c == '/') {
            r->tag_name_done = r->tag_nlen > 0;
          } else if (r->tag_nlen < (int)sizeof r->tag_name - 1) {
            r->tag_name[r->tag_nlen++] = c;
            r->tag_name[r->tag_nlen] = 0;
            if (r->tag_nlen == 3 && memcmp(r->tag_name, "!--", 3) == 0) {
              r->in_tag = 0; /* a comment: kept inside molecules, dropped outside */
              r->in_comment = 1;
              if (r->depth == 0) {
                r->tlen = r->tag_start;
                r->overflow = 0;
                store = 0;
              }
              c = 0; /* so that "<!-->" does not end it */
            }
          }
        } else if (c == '"' || c == '\'') {
          r->tag_quote = c;
        }
      }
      if (store && cml_put(r, r->cp.p[r->cpos - 1]) != 0) return rec_oom(r);
      r->prev2 = r->prev1;
      r->prev1 = c;
      if (done && r->cml_empty) {
        r->cml_empty = 0;
        int e = rec_empty_record(r, out, r->rec_line, "empty record (a <molecule/> element)");
        if (e) return e;
        continue;
      }
      if (done) return rec_emit(r, out, r->rec_line, NULL);
    }
    r->have_cp = 0;
  }
}
