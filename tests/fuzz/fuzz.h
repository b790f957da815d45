/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the libFuzzer targets share: one real engine per process (BPF loaded and attached,
 * as lockscoped runs it; created at the first input, since loading takes a second) and the
 * framing of inputs that carry several items.
 *
 * The seed corpora in tests/fuzz/corpus/ are real traffic: `make fuzz-seeds` runs the
 * targets with LOCKSCOPE_FUZZ_SEEDS=DIR, which makes each write what it saw (records from
 * the rings while workloads run, the requests of the integration suite, its own stacks).
 */
#ifndef __LS_FUZZ_H
#define __LS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/engine.h"
#include "lib/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_KEYS 8192
#define FUZZ_MAX_STACKS 4096

/* Scans answer later, through this: rendered as the socket would send them, then freed. */
static inline void fuzz_reply(void *ctx, uint64_t client, cJSON *resp)
{
	char *text = cJSON_PrintUnformatted(resp);

	(void)ctx;
	(void)client;
	free(text);
	cJSON_Delete(resp);
}

/* The engine every input of this process goes to, with lockscoped's defaults. */
static inline struct engine *fuzz_engine(const struct engine_opts *tap_opts)
{
	static struct engine *e;
	struct engine_opts o;
	int err;

	if (e)
		return e;
	ls_log_max = LS_LOG_ERROR;	/* the fuzzer's own output stays readable */
	engine_opts__init(&o);
	o.windows = true;
	/*
	 * Small tables: inputs add keys and stacks for as long as the run lasts, and at the
	 * defaults' 200 k keys each query would slow with them; full tables are paths to fuzz too.
	 */
	o.max_keys = FUZZ_MAX_KEYS;
	o.max_stacks = FUZZ_MAX_STACKS;
	if (tap_opts) {
		o.tap = tap_opts->tap;
		o.tap_ctx = tap_opts->tap_ctx;
	}
	err = engine__new(&o, fuzz_reply, NULL, &e);
	if (err) {
		fprintf(stderr, "fuzz: cannot start the engine (%s): run as root on a kernel with BTF\n",
			strerror(-err));
		exit(1);
	}
	return e;
}

/*
 * Inputs that carry several items frame each as: u8 kind, u16 length (little endian), then
 * that many bytes. A frame cut short by the input's end is given with what is there.
 */
struct fuzz_frame {
	uint8_t kind;
	const uint8_t *data;
	size_t size;
};

static inline int fuzz_next_frame(const uint8_t **pos, const uint8_t *end, struct fuzz_frame *f)
{
	const uint8_t *p = *pos;
	size_t len;

	if (end - p < 3)
		return 0;
	f->kind = p[0];
	len = p[1] | (size_t)p[2] << 8;
	p += 3;
	if (len > (size_t)(end - p))
		len = end - p;
	f->data = p;
	f->size = len;
	*pos = p + len;
	return 1;
}

static inline int fuzz_write_frame(FILE *out, uint8_t kind, const void *data, size_t size)
{
	uint8_t hdr[3] = { kind, size & 0xff, (size >> 8) & 0xff };

	if (size > 0xffff)
		return -1;
	return fwrite(hdr, 1, 3, out) == 3 && fwrite(data, 1, size, out) == size ? 0 : -1;
}

/* $LOCKSCOPE_FUZZ_SEEDS, where a target writes the seeds it captures; NULL: fuzzing. */
static inline const char *fuzz_seed_dir(void)
{
	const char *d = getenv("LOCKSCOPE_FUZZ_SEEDS");

	return d && *d ? d : NULL;
}

/* Opens seed @name/@n in the seed directory for writing. */
static inline FILE *fuzz_seed_open(const char *name, unsigned int n)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s-%04u", fuzz_seed_dir(), name, n);
	return fopen(path, "we");
}

#endif
