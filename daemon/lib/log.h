/* SPDX-License-Identifier: GPL-2.0 */
/* Levelled logging to stderr; journald collects it when run as a service. */
#ifndef __LS_LOG_H
#define __LS_LOG_H

enum ls_log_level { LS_LOG_ERROR, LS_LOG_WARN, LS_LOG_INFO, LS_LOG_DEBUG };

extern enum ls_log_level ls_log_max;

void ls_log(enum ls_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pr_err(...)	ls_log(LS_LOG_ERROR, __VA_ARGS__)
#define pr_warn(...)	ls_log(LS_LOG_WARN, __VA_ARGS__)
#define pr_info(...)	ls_log(LS_LOG_INFO, __VA_ARGS__)
#define pr_debug(...)	ls_log(LS_LOG_DEBUG, __VA_ARGS__)

#endif
