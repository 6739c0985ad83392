/* SPDX-License-Identifier: MIT */
/*
 * `profctl report`'s options: parsed into profctl_report_opts, each bad one
 * refused with one line.
 */
#ifndef PROFD_REPORT_OPTIONS_H
#define PROFD_REPORT_OPTIONS_H

#include "profctl/profctl.h"

extern const char profctl_report_usage[];

/*
 * Fills o, *path and *filter (--funcs, the caller frees it even on error)
 * from argv; -EINVAL after one line on stderr.
 */
int profctl_report_parse(int argc, char **argv, struct profctl_report_opts *o, const char **path,
			 struct func_filter **filter);

#endif
