/* suggest.c — "did you mean" by edit distance (see suggest.h). */
#include "common/suggest.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Edit distance without letter case: "SMILE" is 1 from "smiles". */
static int distance_nocase(const char *a, const char *b) {
  char la[65], lb[65];
  size_t na = strlen(a), nb = strlen(b);
  if (na > 64 || nb > 64) return 1000;
  for (size_t i = 0; i <= na; i++)
    la[i] = (char)tolower((unsigned char)a[i]);
  for (size_t i = 0; i <= nb; i++)
    lb[i] = (char)tolower((unsigned char)b[i]);
  return se3_edit_distance(la, lb);
}

int se3_edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64) return 1000;
  int row[65]; /* row[j]: distance between a[0, i) and b[0, j), one row at a time */
  for (size_t j = 0; j <= lb; j++)
    row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0]; /* row[j - 1] of the previous row */
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j];
      int best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

const char *se3_suggest(const char *word, const char *const *cands, int n) {
  if (!word || !cands) return NULL;
  size_t wl = strlen(word);
  for (int i = 0; i < n; i++)
    if (cands[i] && strcasecmp(cands[i], word) == 0) return cands[i];
  const char *best = NULL;
  if (wl >= 3)
    for (int i = 0; i < n; i++)
      if (cands[i] && strncasecmp(cands[i], word, wl) == 0 && (!best || strlen(cands[i]) < strlen(best)))
        best = cands[i];
  if (best) return best;
  int best_d = 3;
  for (int i = 0; i < n; i++) {
    if (!cands[i]) continue;
    int d = distance_nocase(word, cands[i]);
    if (d < best_d && d < (int)wl && d < (int)strlen(cands[i])) {
      best = cands[i];
      best_d = d;
    }
  }
  if (best) return best;
  for (int i = 0; i < n; i++) {
    size_t cl = cands[i] ? strlen(cands[i]) : 0;
    if (cl >= 3 && strncasecmp(word, cands[i], cl) == 0) return cands[i];
  }
  return NULL;
}

char *se3_list_names(char *buf, size_t size, const char *const *names, int n, int max_shown) {
  if (!buf || !size) return buf;
  buf[0] = 0;
  if (n <= 0) {
    snprintf(buf, size, "none");
    return buf;
  }
  size_t o = 0;
  for (int i = 0; i < n && i < max_shown && o < size; i++) {
    int w = snprintf(buf + o, size - o, "%s'%s'", i ? ", " : "", names[i] ? names[i] : "");
    if (w < 0) break;
    o += (size_t)w;
  }
  if (n > max_shown && o < size) snprintf(buf + o, size - o, ", ... (%d in all)", n);
  return buf;
}
