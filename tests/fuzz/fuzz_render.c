// SPDX-License-Identifier: GPL-2.0
/*
 * The CLI's renderers: the input's first byte picks the table (low three bits) and the
 * columns (the others, as -t -l --stacks -o --holders set them); the rest is the response
 * as the client reads it from the socket. Whatever the daemon (or anything that listens on
 * its socket path) answers, the client prints tables and never crashes.
 */
#include "fuzz.h"
#include "render.h"

/* the commands whose responses have tables of their own, in the order of the low bits */
static const char *const tables[] = { "top", "status", "threads", "spin", "report" };

enum fuzz_columns {
	FUZZ_COL_THREADS	= 1 << 3,
	FUZZ_COL_LOCKS		= 1 << 4,
	FUZZ_COL_STACKS		= 1 << 5,
	FUZZ_COL_OWNERS		= 1 << 6,
	FUZZ_COL_HOLDERS	= 1 << 7,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	struct render_opts o;
	cJSON *resp;

	if (!null && !(null = fopen("/dev/null", "we")))
		exit(1);
	if (size < 1)
		return 0;
	resp = cJSON_ParseWithLength((const char *)data + 1, size - 1);
	if (!resp)
		return 0;
	o = (struct render_opts){
		.threads = data[0] & FUZZ_COL_THREADS,
		.locks = data[0] & FUZZ_COL_LOCKS,
		.stacks = data[0] & FUZZ_COL_STACKS,
		.owners = data[0] & FUZZ_COL_OWNERS,
		.holders = data[0] & FUZZ_COL_HOLDERS,
	};
	render_response(null, tables[(data[0] & 7) % (sizeof(tables) / sizeof(tables[0]))], resp, &o);
	cJSON_Delete(resp);
	return 0;
}
