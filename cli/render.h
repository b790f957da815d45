/* SPDX-License-Identifier: GPL-2.0 */
/* Human output of protocol responses: perf-style tables. Pure functions over JSON. */
#ifndef __LS_RENDER_H
#define __LS_RENDER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <cjson/cJSON.h>

struct render_opts {
	bool threads;		/* -t: pid/comm columns */
	bool locks;		/* -l: address/name columns */
	bool stacks;		/* --stacks: frames under each row */
	bool owners;		/* -o: owner and releaser columns and stacks */
	bool holders;		/* --holders: holder stacks under user lock rows */
	const char *by;		/* --by unit|cgroup|pod|edge|mechanism: that column; NULL: none */
	bool waits;		/* `lockscope waits`: class and object columns */
};

/* "431.46 ms": perf's units, two decimals above 1 us. */
void ls_fmt_ns(char *buf, size_t len, double ns);
void render_rows(FILE *f, const cJSON *resp, const struct render_opts *o);
void render_status(FILE *f, const cJSON *resp);
/* @by: unit, cgroup or pod when the rows are grouped (--by); NULL: one per thread */
void render_threads(FILE *f, const cJSON *resp, const char *by);
void render_spin(FILE *f, const cJSON *resp);
/* `lockscope report`: the findings, most wasted time first, with evidence and fix. */
void render_report(FILE *f, const cJSON *resp);
/* The table of command @cmd's response: one of the above (rows for top and scan). */
void render_response(FILE *f, const char *cmd, const cJSON *resp, const struct render_opts *o);

#endif
