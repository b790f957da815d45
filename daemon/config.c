// SPDX-License-Identifier: GPL-2.0
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "lockscope.h"
#include "ustack.h"

#define OPT(field) offsetof(struct engine_opts, field)

const struct ls_setting ls_settings[] = {
	{ "max-threads", OPT(collector.max_threads), 64, 1U << 22, "sleeping waits open at once (BPF map)" },
	{ "stack-entries", OPT(collector.stack_entries), 64, 1U << 22, "distinct kernel stacks (BPF stack map)" },
	{ "max-locks", OPT(collector.max_locks), 64, 1U << 22, "stack sampler buckets (power of 2)" },
	{ "owner-stacks", OPT(collector.owner_stacks), 16, 1U << 20, "owner stacks in flight" },
	{ "max-stack", OPT(collector.max_stack), 1, LS_MAX_STACK_DEPTH, "frames kept per stack" },
	{ "ringbuf-kb", OPT(collector.ringbuf_bytes), 4, 1U << 20, "ring buffer per CPU, KiB (power of 2)" },
	{ "stack-rate", OPT(collector.stack_rate), 0, 1000000, "stacks/s per lock per CPU before sampling; 0: none" },
	{ "cpu-stack-rate", OPT(collector.cpu_stack_rate), 1, 1000000, "stacks/s per CPU, all locks" },
	{ "user-locks", OPT(collector.user_locks), 0, 1, "1: futex waits (sched_switch); 0: kernel locks only" },
	{ "user-threads", OPT(collector.uthreads), 64, 1U << 22, "threads in a futex wait at once (BPF map)" },
	{ "user-stack-entries", OPT(collector.ustack_entries), 64, 1U << 22, "distinct user stacks (BPF stack map)" },
	{ "max-holders", OPT(collector.max_holders), 16, 1U << 20, "lock holders noted for sampling and the preemption check (user and kernel each)" },
	{ "hold-freq", OPT(collector.hold_freq), 0, 10000, "holder samples/s per CPU; 0: no holder stacks" },
	{ "user-stack-bytes", OPT(collector.ustack_bytes), 0, LS_USTACK_MAX_BYTES,
	  "user stack copied per dump for DWARF unwinding (multiple of 8, >= 1024); 0: frame pointers" },
	{ "user-dump-rate", OPT(collector.udump_rate), 1, 1000000, "user stack dumps/s per CPU, all locks" },
	{ "sched-threads", OPT(collector.sched_threads), 0, 1U << 22,
	  "threads with per-thread switch counts (BPF map); 0: off" },
	{ "spin-stack-bytes", OPT(collector.spin_stack_bytes), LS_USTACK_MIN_BYTES, LS_USTACK_MAX_BYTES,
	  "user stack copied per yield-site, spin-sample and burst dump (multiple of 8)" },
	{ "spin-freq", OPT(collector.spin_freq), 0, 10000,
	  "spin-loop samples/s per CPU (cpu-clock); 0: no PAUSE-spin detection" },
	{ "max-keys", OPT(max_keys), 1024, 1U << 26, "aggregation keys per time slot" },
	{ "max-stacks", OPT(max_stacks), 1024, 1U << 26, "distinct stacks the daemon keeps" },
	{ "expose-kernel-addresses", OPT(expose_kernel_addrs), 0, 1,
	  "1: raw kernel addresses to every client; 0: only to clients with CAP_SYSLOG" },
};
const int ls_nr_settings = sizeof(ls_settings) / sizeof(ls_settings[0]);

const struct ls_setting *ls_setting_find(const char *key)
{
	int i;

	for (i = 0; i < ls_nr_settings; i++)
		if (!strcmp(ls_settings[i].key, key))
			return &ls_settings[i];
	return NULL;
}

int ls_setting_apply(struct engine_opts *o, const char *key, const char *value, char *err, size_t len)
{
	const struct ls_setting *s = ls_setting_find(key);
	unsigned long long v;
	char *end;

	if (!s) {
		snprintf(err, len, "unknown setting '%s' (see lockscoped --help)", key);
		return -EINVAL;
	}
	errno = 0;
	v = strtoull(value, &end, 10);
	if (errno || end == value || *end || v < s->min || v > s->max || value[0] == '-') {
		snprintf(err, len, "%s: '%s' is not an integer from %u to %u", key, value, s->min, s->max);
		return -EINVAL;
	}
	if ((!strcmp(key, "ringbuf-kb") || !strcmp(key, "max-locks")) && (v & (v - 1))) {
		snprintf(err, len, "%s: '%s' is not a power of two", key, value);
		return -EINVAL;
	}
	if ((!strcmp(key, "user-stack-bytes") || !strcmp(key, "spin-stack-bytes")) && v &&
	    (v < LS_USTACK_MIN_BYTES || v % 8)) {
		snprintf(err, len, "%s: '%s' is neither 0 nor a multiple of 8 from %u to %u", key, value,
			 LS_USTACK_MIN_BYTES, LS_USTACK_MAX_BYTES);
		return -EINVAL;
	}
	if (!strcmp(key, "ringbuf-kb"))
		v *= 1024;
	*(uint32_t *)((char *)o + s->offset) = (uint32_t)v;
	return 0;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

int ls_config_load(struct engine_opts *o, const char *path, char *err, size_t len)
{
	struct engine_opts tmp = *o;
	char line[512], msg[256];
	int lineno = 0, ret = 0;
	FILE *f = fopen(path, "re");

	if (!f) {
		snprintf(err, len, "%s: %s", path, strerror(errno));
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		char *hash = strchr(line, '#'), *eq, *key;

		lineno++;
		if (hash)
			*hash = 0;
		key = trim(line);
		if (!*key)
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			snprintf(err, len, "%s:%d: expected KEY = VALUE", path, lineno);
			ret = -EINVAL;
			break;
		}
		*eq = 0;
		if (ls_setting_apply(&tmp, trim(key), trim(eq + 1), msg, sizeof(msg))) {
			snprintf(err, len, "%s:%d: %s", path, lineno, msg);
			ret = -EINVAL;
			break;
		}
	}
	fclose(f);
	/* all or nothing: a bad file leaves the settings in force untouched */
	if (!ret)
		*o = tmp;
	return ret;
}
