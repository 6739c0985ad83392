// SPDX-License-Identifier: MIT
/*
 * Skip-reason text for the relocators. Reasons carry offsets, so they are
 * formatted; not initial-exec TLS: relocation runs when a function is
 * patched, never on a trampoline's path.
 */
#include <stdarg.h>
#include <stdio.h>

#include "trampolines/skip_reason.h"

static __thread char reason_buf[112];

const char *skip_reason_format(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason_buf, sizeof(reason_buf), fmt, ap);
	va_end(ap);
	return reason_buf;
}
