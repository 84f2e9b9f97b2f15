/* sdtext.c — SD titles, tag names and values that cannot break a record
 * (sdtext.h says what is changed, and why). */
#include "chem/sdtext.h"

#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"

/* Bytes of the line break at p, 0 when there is none: CR LF as one; CR, LF,
 * VT, FF and 0x1c-0x1e (Python's str.splitlines breaks at those too); NEL
 * (U+0085) and U+2028/U+2029 in UTF-8. */
static size_t line_break(const unsigned char *p) {
  if (p[0] == '\r') return p[1] == '\n' ? 2 : 1;
  if (p[0] == '\n' || p[0] == '\v' || p[0] == '\f' || (p[0] >= 0x1c && p[0] <= 0x1e)) return 1;
  if (p[0] == 0xc2 && p[1] == 0x85) return 2;
  if (p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) return 3;
  return 0;
}

/* s on one line (title: tabs become spaces too), with the '_' in front when
 * it would begin with `$$$$`. */
static char *one_line(const char *s, int title) {
  if (!s) s = "";
  /* one byte for a '_' in front, written last: the flat text starts at out + 1 */
  char *out = malloc(strlen(s) + 2), *w;
  if (!out) return NULL;
  w = out + 1;
  int pending = 0; /* a run of line breaks since the last character written */
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    size_t k = line_break(p);
    if (k) {
      pending = w > out + 1; /* a run at the start is dropped */
      p += k;
      continue;
    }
    if (pending) *w++ = ' ';
    pending = 0; /* a run at the end is dropped: nothing follows it */
    *w++ = title && *p == '\t' ? ' ' : (char)*p;
    p++;
  }
  *w = 0;
  const char *first = out + 1 + strspn(out + 1, " \t");
  if (!title && !*first) { /* nothing but blanks */
    out[0] = 0;
    return out;
  }
  if (!strncmp(first, "$$$$", 4)) {
    out[0] = '_';
    return out;
  }
  memmove(out, out + 1, (size_t)(w - out));
  return out;
}

char *sd_safe_title(const char *s) { return one_line(s, 1); }

char *sd_safe_value(const char *s) { return one_line(s, 0); }

char *sd_safe_tag_name(const char *s) {
  char *t = strdup(s ? s : "");
  for (unsigned char *p = (unsigned char *)t; p && *p; p++)
    if (*p == '<' || *p == '>' || *p < 0x20 || *p == 0x7f) *p = '_';
  /* a UTF-8 line separator is three bytes of text to the name's readers,
   * but a line break to some: it goes too */
  for (unsigned char *p = (unsigned char *)t; p && *p; p++) {
    size_t k = line_break(p);
    if (k > 1) memset(p, '_', k);
  }
  return t;
}

/* *slot replaced by make(*slot); 0, or -1 when out of memory. */
static int replace(char **slot, char *(*make)(const char *)) {
  char *t = make(*slot);
  if (!t) return -1;
  free(*slot);
  *slot = t;
  return 0;
}

int sd_make_safe(struct mol *m) {
  if (m->name && replace(&m->name, sd_safe_title)) return -1;
  for (int i = 0; i < m->n_tags; i++)
    if (replace(&m->tags[i].name, sd_safe_tag_name) || replace(&m->tags[i].value, sd_safe_value)) return -1;
  return 0;
}
