// SPDX-License-Identifier: GPL-2.0
/*
 * The decoders of what the kernel side hands over: ring records of every type (whole,
 * truncated, oversized, in any order: a stack dump and the record naming it may come in
 * either) and wait-table entries, framed as fuzz.h says (kind ENGINE_IN_*). Every
 * FUZZ_QUERY_EVERY inputs, queries render what was decoded, as `lockscope top` and `spin`
 * would.
 *
 * LOCKSCOPE_FUZZ_SEEDS=DIR [LOCKSCOPE_FUZZ_SECONDS=N]: instead of fuzzing, drain the real
 * rings and wait tables for N seconds (default 5) and write what they held as seeds,
 * a few consecutive items per file, up to FUZZ_SEEDS_PER_KIND files per record type.
 */
#include <time.h>
#include <unistd.h>
#include "fuzz.h"
#include "lockscope.h"

#define FUZZ_SEEDS_PER_KIND 12
#define FUZZ_ITEMS_PER_SEED 4
#define FUZZ_KINDS 64
#define FUZZ_QUERY_EVERY 64	/* record types and the wait entries, with room to grow */

struct seeds {
	FILE *f;		/* the seed being written */
	unsigned int items;	/* in it */
	unsigned int files;
	unsigned int per_kind[FUZZ_KINDS];
};

static void capture(void *ctx, enum engine_input kind, const void *data, size_t size)
{
	const struct ls_rec_hdr *h = data;
	struct seeds *s = ctx;
	unsigned int k;

	k = kind == ENGINE_IN_WAIT ? 0 : 1 + (size >= sizeof(*h) ? h->type : 0) % (FUZZ_KINDS - 1);
	if (!s->f) {
		/* a new seed starts with a kind that has few seeds yet */
		if (s->per_kind[k] >= FUZZ_SEEDS_PER_KIND)
			return;
		s->per_kind[k]++;
		s->f = fuzz_seed_open("records", s->files++);
		if (!s->f)
			return;
	}
	fuzz_write_frame(s->f, kind, data, size);
	if (++s->items == FUZZ_ITEMS_PER_SEED) {
		fclose(s->f);
		s->f = NULL;
		s->items = 0;
	}
}

static void write_seeds(void)
{
	struct seeds s = {};
	struct engine_opts tap = { .tap = capture, .tap_ctx = &s };
	const char *secs = getenv("LOCKSCOPE_FUZZ_SECONDS");
	struct engine *e = fuzz_engine(&tap);
	time_t end = time(NULL) + (secs ? atoi(secs) : 5);

	while (time(NULL) < end) {
		usleep(ENGINE_TICK_MS * 1000);
		engine__consume(e);
		engine__tick(e);
	}
	if (s.f)
		fclose(s.f);
	fprintf(stderr, "fuzz_records: %u seeds written\n", s.files);
	_exit(0);	/* libFuzzer takes exit() for a finding */
}

static void query(struct engine *e, const char *text)
{
	cJSON *req = cJSON_Parse(text), *resp;
	char *out;

	resp = engine__handle(e, 0, NULL, req);
	out = cJSON_PrintUnformatted(resp);
	free(out);
	cJSON_Delete(resp);
	cJSON_Delete(req);
}

/* The engine's BPF load, once, outside any input's timeout (see fuzz_request.c). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (!fuzz_seed_dir())	/* writing seeds makes its engine with a tap, in the first input */
		fuzz_engine(NULL);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned int inputs;
	const uint8_t *pos = data, *end = data + size;
	struct fuzz_frame f;
	struct engine *e;

	if (fuzz_seed_dir())
		write_seeds();
	e = fuzz_engine(NULL);
	while (fuzz_next_frame(&pos, end, &f))
		engine__feed(e, f.kind & 1 ? ENGINE_IN_WAIT : ENGINE_IN_RECORD, f.data, f.size);
	/* the queries walk every thread of the host: now and then, or they would be the run */
	if (++inputs % FUZZ_QUERY_EVERY)
		return 0;
	query(e, "{\"cmd\":\"top\",\"group\":\"caller\",\"stacks\":true,\"owners\":true,\"holders\":true,\"kind\":\"all\"}");
	query(e, "{\"cmd\":\"spin\"}");
	return 0;
}
