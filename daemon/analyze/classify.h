/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Lock or idle, decided by evidence. A lock's waits have a shape the other waits lack:
 * its waiters and its releasers are one population taking turns — A waits for B, later B
 * (or C, who waited for A) waits for A's release — so among peers (threads of one process,
 * or processes of one program) the wait-for graph of a lock's waits has cycles. A worker
 * waiting for a job is woken by a producer that never waits for the worker; a pipeline
 * stage by the stage before it; a server's backend waiting for its client by another
 * program; an event loop by a timer or a device (no thread at all): no cycle among peers.
 * That holds whatever the mechanism: PostgreSQL's LWLocks sleep on a semaphore
 * (futex:condvar to lockscope), its row locks in epoll_wait on a latch (wait:poll).
 *
 * So a wait of a mechanism that is not a lock by itself (condition variables and the other
 * blocking syscalls) is classed:
 *   lock  its waker is a peer, and waiter and waker lie on one cycle of such waits (the
 *         wait-for graph's strongly connected component, per type, over threads);
 *   io    no thread woke it, and it waited for a device (file sync, a fault's I/O);
 *   idle  everything else: waiting for work, input, a timer or a signal.
 * Mutexes (futex:mutex, :pi, :waitv), kernel locks and file locks (wait:flock) are locks
 * whatever woke them. The evidence needs the waker, which `sched_waking` names while user
 * waits come at waker-min-rate or more (above waker-max-rate, in short looks). A wait
 * that ended while it was detached (agg_key.unwatched) takes the class of its object's
 * watched waits in the view: lock if one of them was a lock's wait on the same futex word
 * or descriptor of the same process, else idle (or io). Without any watched wait, every
 * event wait is idle.
 */
#ifndef __LS_CLASSIFY_H
#define __LS_CLASSIFY_H

#include <stddef.h>
#include <stdint.h>
#include "store/agg.h"

enum ls_wclass { LS_WCLASS_LOCK, LS_WCLASS_IDLE, LS_WCLASS_IO, LS_WCLASS_MAX };

const char *classify__name(enum ls_wclass c);
/* Whether waits of type @flags (an agg_key's) are classed by evidence, not by their type. */
bool classify__by_evidence(uint32_t flags);

struct wait_classes;

/*
 * The classes of @view's waits. The wait-for graph is made from the whole view (one pass)
 * the first time a wait classed by evidence is asked about: a view of kernel locks and
 * mutexes costs nothing.
 */
struct wait_classes *wait_classes__new(const struct agg_view *view);
void wait_classes__free(struct wait_classes *wc);
/* @k's class (@v its figures, from the same view); LS_WCLASS_LOCK without @wc. -ENOMEM: idle. */
enum ls_wclass wait_classes__of(struct wait_classes *wc, const struct agg_key *k, const struct agg_val *v);

#endif
