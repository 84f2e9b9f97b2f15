/* workflow.c — what the workflow says about which stages run and what they
 * read: questions several stages ask (stage.h). They live here, not in the
 * stage they concern, because stages never call each other's functions:
 * they talk through the database and the runner. */
#include <stddef.h>

#include "stage.h"

int stage_score_only(const struct cfg_node *root) {
  /* train configured: a section the workflow writes (defaults alone do not count) */
  return root && cfg_get(root, "stages.score.checkpoint") && !cfg_written(cfg_get(root, "stages.train"));
}

int stage_acquiring(const struct cfg_node *root) {
  const struct cfg_node *a = root ? cfg_get(root, "stages.acquire") : NULL;
  return a && cfg_written(a);
}

int stage_dock_only(const struct cfg_node *root) {
  return stage_dock_label(root) && !cfg_written(cfg_get(root, "stages.train")) &&
         !cfg_written(cfg_get(root, "stages.score")) && !stage_acquiring(root);
}

const char *stage_dock_label(const struct cfg_node *root) {
  const struct cfg_node *d = root ? cfg_get(root, "stages.dock") : NULL;
  return d && cfg_written(d) ? cfg_str(d, "label") : NULL;
}
