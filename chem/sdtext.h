/* sdtext.h — titles, tag names and tag values that cannot break an SD record.
 *
 * Open Babel writes a molecule's title as the record's first line and each
 * tag as a header line `>  <NAME>`, its value, and a blank line; it writes
 * them as given. Readers find the end of a record at a line that is (or,
 * for RDKit and Open Babel, begins with) `$$$$`, and the end of a value at
 * its first blank line. So before a molecule goes to ob_write_sdf every SD
 * writer (export --format sdf, the rank stage's hits.sdf) passes it through
 * sd_make_safe, which changes what would break the record and nothing else:
 *
 *   values  An SD data item has no way to hold a blank line, and a value line
 *           beginning with `$$$$` ends the record for some readers. Rather
 *           than refuse the row (a user would rather have the file than no
 *           file), a value is flattened onto one line: every run of line
 *           breaks (CR, LF, CR LF, VT, FF, the separators 0x1c-0x1e, and
 *           the Unicode NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR) becomes
 *           one space, and runs at its start and end are dropped. A value
 *           of nothing but blanks becomes empty (readers disagree on a line
 *           of blanks: end of the value, or the value).
 *   title   One line: line breaks and tabs become spaces the same way.
 *   both    After that, a title or value whose first characters other than
 *           blanks are `$$$$` gets a '_' in front ("$$$$" is written
 *           "_$$$$"), so no line of the record but its last is `$$$$`.
 *   names   A tag name sits between < and >: '<', '>', line breaks and
 *           every other control character in it become '_'.
 *
 * Each of these is lossy only for text that could not be written as it is.
 */
#ifndef SE3_SDTEXT_H
#define SE3_SDTEXT_H

struct mol;

/* The title, value or tag name written for s (NULL reads as ""), malloc'd;
 * NULL only when out of memory. */
char *sd_safe_title(const char *s);
char *sd_safe_value(const char *s);
char *sd_safe_tag_name(const char *s);

/* m's title and every tag's name and value replaced by their safe forms
 * (m->name NULL stays NULL). 0, or -1 when out of memory (m is then still
 * whole: what was replaced is safe, the rest as it was). */
int sd_make_safe(struct mol *m);

#endif
