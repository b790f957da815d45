// SPDX-License-Identifier: GPL-2.0
#include <stdarg.h>
#include <stdio.h>
#include "lib/log.h"

enum ls_log_level ls_log_max = LS_LOG_INFO;

void ls_log(enum ls_log_level level, const char *fmt, ...)
{
	/* sd-daemon(3) prefixes, so journald keeps the priority */
	static const char *const prefix[] = { "<3>", "<4>", "<6>", "<7>" };
	va_list ap;

	if (level > ls_log_max)
		return;
	fputs(prefix[level], stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}
