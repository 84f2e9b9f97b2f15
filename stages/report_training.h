/* report_training.h — the report page's Training section
 * (stages/report_training.c), which report_page.c places in the page; it
 * writes through the helpers of report_html.h, as the page does. */
#ifndef SE3_REPORT_TRAINING_H
#define SE3_REPORT_TRAINING_H

#include "report_html.h"

/* The Training section (report_training.c): test metrics, learning curves
 * and the held-out molecules' plots; or, where no model was trained here,
 * a note naming the models the scores came from. */
void report_section_training(struct rep *r);

#endif
