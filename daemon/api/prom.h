/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Prometheus text exposition (format 0.0.4): lockscoped's health, made from the status
 * response so that `lockscope status` and the metrics never disagree, and the lock
 * metrics, from the waits since start. Base units (seconds, bytes), _total counters, no
 * stack or address labels.
 */
#ifndef __LS_PROM_H
#define __LS_PROM_H

#include <stddef.h>
#include <stdio.h>
#include <cjson/cJSON.h>

struct agg_view;
struct query;

/*
 * The wait-time histogram's upper bounds: powers of two ns from 2^10 (1 us) to 2^34 (17 s),
 * every other one, where the aggregator's log2 buckets end. A bucket counts the waits
 * shorter than its bound: a wait of exactly 2^k ns lands in the next one.
 */
#define PROM_HIST_MIN_SHIFT	10
#define PROM_HIST_MAX_SHIFT	34
#define PROM_HIST_STEP		2

/*
 * The lock series given labels of their own, at most @max for the object's life (the
 * first seen, by wait time): /metrics stays bounded whatever the host runs, and a series
 * never loses its labels, so its counters never move to another. The rest are summed into
 * comm="(other)", unit="(other)" per kind and type, and counted.
 */
struct prom_series;

int prom_series__new(size_t max, struct prom_series **out);
void prom_series__free(struct prom_series *ps);
size_t prom_series__count(const struct prom_series *ps);
/* label sets summed into "(other)" at the last write */
size_t prom_series__folded(const struct prom_series *ps);

/* lockscope_metrics_series{,_limit,_folded}: how many series, the limit, and what it folded. */
void prom_write_series(FILE *f, const struct prom_series *ps);
void prom_write_status(FILE *f, const cJSON *status);
/*
 * lockscope_contentions_total, lockscope_wait_seconds_total and the
 * lockscope_wait_duration_seconds histogram by kind, type, the waiting thread's comm and
 * its systemd unit, over the waits in @tab that @q wants, labelled as @ps admits. -ENOMEM.
 */
int prom_write_locks(FILE *f, const struct agg_view *tab, const struct query *q, struct prom_series *ps);

#endif
