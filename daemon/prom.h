/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Prometheus text exposition (format 0.0.4) of lockscoped's health, made from the status
 * response so that `lockscope status` and the metrics never disagree. Base units
 * (seconds, bytes), _total counters, no stack or address labels.
 */
#ifndef __LS_PROM_H
#define __LS_PROM_H

#include <stddef.h>
#include <cjson/cJSON.h>

/* A malloc'd buffer of *len bytes, or NULL on allocation failure. */
char *prom_from_status(const cJSON *status, size_t *len);

#endif
