/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Reading fields of protocol objects (responses, rows, findings) where a missing or
 * mistyped field simply reads as 0 or NULL: what the renderers, the metrics and the
 * diagnoses all need from the same JSON.
 */
#ifndef __LS_JSONGET_H
#define __LS_JSONGET_H

#include <stdint.h>
#include <cjson/cJSON.h>

static inline const cJSON *ls_json_get(const cJSON *o, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(o, name);
}

static inline double ls_json_num(const cJSON *o, const char *name)
{
	const cJSON *v = ls_json_get(o, name);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/*
 * A count or an offset: clamped to what a uint64_t holds. Converting a double outside that
 * range is undefined, and a response may come from anything listening at the socket path.
 */
static inline uint64_t ls_json_u64(const cJSON *o, const char *name)
{
	double v = ls_json_num(o, name);

	if (!(v > 0))		/* negative, or NaN */
		return 0;
	return v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v;
}

static inline const char *ls_json_str_or(const cJSON *o, const char *name, const char *def)
{
	const cJSON *v = ls_json_get(o, name);

	return cJSON_IsString(v) ? v->valuestring : def;
}

static inline const char *ls_json_str(const cJSON *o, const char *name)
{
	return ls_json_str_or(o, name, NULL);
}

#endif
