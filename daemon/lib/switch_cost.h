/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __LS_SWITCH_COST_H
#define __LS_SWITCH_COST_H

#include <stdint.h>

/* The cost of one context switch in ns: the least of @runs of @rounds round trips on the calling CPU. */
int ls_measure_switch_cost(uint32_t rounds, uint32_t runs, uint64_t *ns);

#endif
