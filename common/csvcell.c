/* csvcell.c — CSV cells with RFC 4180 quoting and formulas neutralised
 * (csvcell.h). */
#include "common/csvcell.h"

#include <stdlib.h>
#include <string.h>

/* A plain decimal number: [+-] digits [. digits] [e [+-] digits], at least
 * one digit before the exponent. What a spreadsheet reads as a number, and
 * nothing it could run (no letters but the exponent's e, no parentheses). */
static int is_number(const char *s) {
  const char *p = s + (*s == '+' || *s == '-');
  size_t whole = strspn(p, "0123456789"), frac = 0;
  p += whole;
  if (*p == '.') {
    frac = strspn(p + 1, "0123456789");
    p += 1 + frac;
  }
  if (!whole && !frac) return 0;
  if (*p == 'e' || *p == 'E') {
    p++;
    p += *p == '+' || *p == '-';
    size_t e = strspn(p, "0123456789");
    if (!e) return 0;
    p += e;
  }
  return *p == 0;
}

int csv_cell_is_formula(const char *s) { return s && *s && strchr("=+-@\t\r", *s) && !is_number(s); }

void csv_cell_write(FILE *f, const char *s, int is_text) {
  if (!s) return;
  int quote_mark = is_text && csv_cell_is_formula(s);
  if (!strpbrk(s, ",\"\n\r")) {
    if (quote_mark) fputc('\'', f);
    fputs(s, f);
    return;
  }
  fputc('"', f);
  if (quote_mark) fputc('\'', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

void csv_double_text(double v, char *buf, size_t n) {
  for (int p = 15; p <= 17; p++) {
    snprintf(buf, n, "%.*g", p, v);
    if (strtod(buf, NULL) == v) break;
  }
}
