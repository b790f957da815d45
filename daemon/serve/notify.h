/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The service manager's readiness protocol (sd_notify(3)), in-tree: one datagram of
 * newline-separated KEY=VALUE lines to the socket named in $NOTIFY_SOCKET. Under systemd
 * with Type=notify that is READY=1 once the programs are attached and the socket serves,
 * STATUS= lines for the phases, WATCHDOG=1 at half of $WATCHDOG_USEC and STOPPING=1.
 * Without $NOTIFY_SOCKET every call is a no-op.
 */
#ifndef __LS_NOTIFY_H
#define __LS_NOTIFY_H

#include <stdint.h>

struct notify;

/* *out is NULL (and 0 returned) when the service manager asked for nothing. */
int notify__new(struct notify **out);
void notify__free(struct notify *n);
/* Sends one message, printf-style; -errno when the datagram cannot be sent. */
int notify__send(struct notify *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* How often to send WATCHDOG=1 in ms (half of $WATCHDOG_USEC), 0 when no watchdog is set. */
unsigned int notify__watchdog_ms(const struct notify *n);

#endif
