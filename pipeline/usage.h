/* usage.h — each verb's usage text (pipeline/usage.c). */
#ifndef SE3_USAGE_H
#define SE3_USAGE_H

extern const char usage_report[];
extern const char usage_run[];
extern const char usage_predict[];
extern const char usage_check[];
extern const char usage_schema[];
extern const char usage_keys[];
extern const char usage_status[];
extern const char usage_upgrade[];
extern const char usage_query[];
extern const char usage_top[];
extern const char usage_export[];
extern const char usage_merge[];
extern const char usage_slurm[];
extern const char usage_verify[];

#endif
