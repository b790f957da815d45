/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lockscoped's settings: one table names every numeric setting once, with its default,
 * range and the field it fills, for both the command line (--KEY=VALUE) and the config
 * file (KEY = VALUE lines).
 */
#ifndef __LS_CONFIG_H
#define __LS_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include "engine.h"

struct ls_setting {
	const char *key;
	size_t offset;		/* of a uint32_t in struct engine_opts */
	uint32_t min, max;
	const char *help;
};

extern const struct ls_setting ls_settings[];
extern const int ls_nr_settings;

const struct ls_setting *ls_setting_find(const char *key);
/* Sets @key from @value; on error fills @err with a line saying what is accepted. */
int ls_setting_apply(struct engine_opts *o, const char *key, const char *value, char *err, size_t len);
/* Reads KEY = VALUE lines ('#' comments); errors name the file and line. */
int ls_config_load(struct engine_opts *o, const char *path, char *err, size_t len);

#endif
