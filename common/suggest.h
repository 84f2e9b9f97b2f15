/* suggest.h — "did you mean": the closest of some names to a word that
 * named none of them (a mistyped column, SD tag or label).
 *
 * pipeline/config_validate.c makes the same kind of suggestion for unknown
 * keys; this one lives in common/ so that stages/ (which may not include
 * pipeline/) can make it too. A leaf module: it includes nothing of the
 * project. */
#ifndef SE3_SUGGEST_H
#define SE3_SUGGEST_H

#include <stddef.h>

/* Edit distance (insertions, deletions, substitutions) between a and b,
 * byte by byte and case-sensitive; 1000 when either is longer than 64
 * bytes (no suggestion is made for such words). */
int se3_edit_distance(const char *a, const char *b);

/* The candidate closest to word, or NULL when none is close (letter case
 * aside: column and tag names are often mistyped only in it), in order:
 *   - one equal to word but for letter case ("logs" -> "logS");
 *   - one that starts with word (a word cut short), shortest first, when
 *     word has 3 bytes or more;
 *   - the nearest within edit distance 2 that is less than the length of
 *     either (so that "x" does not suggest "y");
 *   - one that word starts with (a word with something added), 3 bytes or more.
 * Ties go to the earlier candidate. */
const char *se3_suggest(const char *word, const char *const *cands, int n);

/* Appends to buf (at most size bytes, always NUL-terminated) the names as
 * "'a', 'b', 'c'", at most max_shown of them followed by ", ... (N in all)"
 * when there are more; "none" when n is 0. Returns buf. */
char *se3_list_names(char *buf, size_t size, const char *const *names, int n, int max_shown);

#endif
