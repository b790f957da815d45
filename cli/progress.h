/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One updating line on stderr while the CLI waits for long work (a scan): elapsed and
 * remaining time and what was seen so far. Only on a terminal, and not with --quiet:
 * a pipe or a log gets nothing.
 */
#ifndef __LS_PROGRESS_H
#define __LS_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct progress;

/* @what ("scan of pid 1234") for @total_ms; NULL when there is no line to show. */
struct progress *progress__new(const char *what, uint64_t total_ms, bool quiet);
/* Redraws the line with @events so far (negative: not known). */
void progress__update(struct progress *p, int64_t events);
/* Clears the line. */
void progress__free(struct progress *p);

#endif
