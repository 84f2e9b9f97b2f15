/* csvcell.h — one CSV cell as se3screen writes it into files: RFC 4180
 * quoting, and text that a spreadsheet would run as a formula neutralised.
 * A leaf module: it includes nothing of the project.
 *
 * Formula injection: Excel, LibreOffice and Google Sheets read a cell that
 * begins with = + - or @ as a formula (a tab or carriage return in front is
 * skipped by some), so a molecule named `=HYPERLINK(...)` or
 * `-2+3+cmd|'/C calc'!A0` in hits.csv runs when the file is opened. Such a
 * TEXT cell is written with a single quote in front ('=HYPERLINK(...)),
 * the common rule (OWASP's): spreadsheets show the rest as text, and a
 * reader that wants the exact name strips the quote. Numbers are never
 * changed: a cell the caller marks as a number (a score of -1.5), and a
 * text cell that is a plain decimal number ("-1.5", "+3e5"), are written as
 * they are, so numeric readers and spreadsheets read them as numbers.
 */
#ifndef SE3_CSVCELL_H
#define SE3_CSVCELL_H

#include <stdio.h>

/* 1 when s, a text cell, would be written with a ' in front. */
int csv_cell_is_formula(const char *s);

/* Writes s as one cell: a ' in front when text (is_text) that
 * csv_cell_is_formula says so; quoted when it holds a comma, a quote or a
 * line break, quotes doubled. NULL writes nothing (an empty cell). */
void csv_cell_write(FILE *f, const char *s, int is_text);

/* A finite double as the shortest of %.15g, %.16g and %.17g that reads
 * back as the same number (7.4, not 7.4000000000000004): how numbers go
 * into the files se3screen writes (CSV cells, model cards). */
void csv_double_text(double v, char *buf, size_t n);

#endif
