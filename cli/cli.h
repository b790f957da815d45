/* SPDX-License-Identifier: GPL-2.0 */
/* What the client's files share: the parsed command line and the steps of main(). */
#ifndef __LS_CLI_H
#define __LS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "render.h"

#define CLI_CMDS "status, top, waits, scan, threads, spin, report, export, flamegraph, pause, resume"
#define DEFAULT_SCAN_MS 5000
#define EXIT_USAGE 2
/* report, export and flamegraph read this window unless told (findings need a minute) */
#define DEFAULT_REPORT_WINDOW "1m"
/* How often a scan's progress line is redrawn. */
#define PROGRESS_MS 1000
/*
 * How long a request waits for the daemon's answer (a scan: past its duration), unless
 * $LOCKSCOPE_TIMEOUT says otherwise: a daemon that is stuck makes the client say so
 * rather than hang a script or a monitoring check. Answers take milliseconds; the first
 * query that symbolizes a large process, seconds.
 */
#define DEFAULT_TIMEOUT_S 60

struct cli {
	const char *socket;
	const char *cmd;
	const char *output;	/* export, flamegraph, scan --format: the file written */
	const char *title;	/* flamegraph */
	bool exporting;		/* the response carries an export to write */
	bool json;
	struct render_opts ro;
	cJSON *req;
	uint64_t duration_ms;
	bool precise;
	bool quiet;		/* no progress line */
	int timeout_ms;		/* for an answer; 0: no limit */
};

/* args.c: the command line into @c and its request; 0, or an exit code after saying why */
int cli_parse_args(int argc, char **argv, struct cli *c);
/* output.c: prints or writes @resp as @c asks; the exit code */
int cli_print_response(const struct cli *c, const cJSON *resp);
/* scan.c: a scan run in-process, for want of a daemon */
int cli_scan_embedded(struct cli *c);

#endif
