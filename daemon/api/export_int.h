/* SPDX-License-Identifier: GPL-2.0 */
/* What export.c (names, folded stacks, files) and pprof.c share, and only they. */
#ifndef __LS_EXPORT_INT_H
#define __LS_EXPORT_INT_H

#include <stddef.h>
#include <stdint.h>
#include "analyze/query.h"
#include "api/export.h"

/* The side of a wait a profile draws: the waiter's stacks, or the releaser's and owner's. */
enum query_side export_side_of(enum ls_profile p);
/* The comm of whoever a wait is drawn under: the waiter, or the releaser/owner. */
const char *export_side_comm(const struct agg_key *k, const struct agg_val *v, enum query_side side);
void export_side_ids(const struct agg_key *k, enum query_side side, uint32_t *pid, uint32_t *tid);
/* A function's name: the symbol, else module+offset, else the bare address. */
void export_func_name(const struct query_ctx *ctx, const struct query_frame *fi, char *buf, size_t len);

#endif
