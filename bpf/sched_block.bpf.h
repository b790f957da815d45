/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Part of scheduler.bpf.c, included after sched_futex.bpf.h: blocking waits that are not
 * futex waits. A task switched out asleep in another syscall (read on a pipe, epoll_wait,
 * fdatasync...) or in none (a page fault) opens a wait in its slot as a futex wait does,
 * classified by the syscall's family and named by the file descriptor it was called on;
 * its next switch in closes it into the wait tables (class LS_WAIT_BLOCK). Only the
 * registers are read: what the descriptor is, the daemon reads from /proc.
 */
#ifndef __LS_SCHED_BLOCK_BPF_H
#define __LS_SCHED_BLOCK_BPF_H

/* The family of syscall @nr (-1: none, the task was not in a syscall), and whether its first argument is a descriptor. */
static __always_inline __u32 block_type(long nr, bool *takes_fd)
{
	*takes_fd = true;
	switch (nr) {
	case LS_SYS_EPOLL_WAIT:
	case LS_SYS_EPOLL_PWAIT:
	case LS_SYS_EPOLL_PWAIT2:
		return LS_BTYPE_POLL;
	case LS_SYS_READ:
	case LS_SYS_READV:
	case LS_SYS_PREAD64:
	case LS_SYS_PREADV:
	case LS_SYS_PREADV2:
		return LS_BTYPE_READ;
	case LS_SYS_RECVFROM:
	case LS_SYS_RECVMSG:
	case LS_SYS_RECVMMSG:
		return LS_BTYPE_RECV;
	case LS_SYS_WRITE:
	case LS_SYS_WRITEV:
	case LS_SYS_PWRITE64:
	case LS_SYS_SENDTO:
	case LS_SYS_SENDMSG:
		return LS_BTYPE_WRITE;
	case LS_SYS_ACCEPT:
	case LS_SYS_ACCEPT4:
	case LS_SYS_CONNECT:
		return LS_BTYPE_ACCEPT;
	case LS_SYS_FSYNC:
	case LS_SYS_FDATASYNC:
	case LS_SYS_SYNC_FILE_RANGE:
		return LS_BTYPE_SYNC;
	case LS_SYS_IO_URING_ENTER:
		return LS_BTYPE_URING;
	case LS_SYS_FLOCK:
	case LS_SYS_FCNTL:
		return LS_BTYPE_FLOCK;
	}
	*takes_fd = false;
	switch (nr) {
	case LS_SYS_POLL:
	case LS_SYS_PPOLL:
	case LS_SYS_SELECT:
	case LS_SYS_PSELECT6:
		return LS_BTYPE_POLL;	/* a set of descriptors: no one object */
	case LS_SYS_WAIT4:
	case LS_SYS_WAITID:
		return LS_BTYPE_CHILD;
	case LS_SYS_PAUSE:
	case LS_SYS_RT_SIGSUSPEND:
	case LS_SYS_RT_SIGTIMEDWAIT:
		return LS_BTYPE_SIGNAL;
	case LS_SYS_NANOSLEEP:
	case LS_SYS_CLOCK_NANOSLEEP:
		return LS_BTYPE_SLEEP;
	case -1:
		return LS_BTYPE_KERNEL;
	default:
		return LS_BTYPE_OTHER;
	}
}

/*
 * The timeout of a poll that passes it in a register (epoll_wait, epoll_pwait, poll: in
 * milliseconds), LS_NO_TIMEOUT for none (negative) or one behind a pointer: when it runs
 * out, a timer ends the wait, whatever thread the timer's interrupt finds on the CPU.
 */
static __always_inline __u32 poll_timeout_ms(struct pt_regs *regs, long nr)
{
	int ms;

	if (nr == LS_SYS_EPOLL_WAIT || nr == LS_SYS_EPOLL_PWAIT)
		ms = LS_SYSCALL_ARG4(regs);
	else if (nr == LS_SYS_POLL)
		ms = LS_SYSCALL_ARG3(regs);
	else
		return LS_NO_TIMEOUT;
	return ms < 0 ? LS_NO_TIMEOUT : ms;
}

/*
 * wait_prepare() for a blocking syscall's wait of @type on @uaddr (descriptor + 1, or 0), by
 * the current thread, as a global function, verified once. Inlined, each of the states the
 * switch program reaches here with took its own path through it, once for each family of
 * syscalls: 555 k of the million instructions the verifier may walk, the daemon ready in
 * 4.6-5.0 s. Without ctx (6.1 takes none in a tracing program's global function): the
 * caller takes the stack.
 */
__noinline int block_prepare(struct sched_slot *e, __u64 uaddr, __u32 type)
{
	if (!e)
		return 0;
	return wait_prepare(e, bpf_get_current_task_btf(), uaddr, type, 0, SLOT_BLOCKED, ULOCK_RF_BLOCKCALL);
}

/* @prev goes to sleep in syscall @nr, not a futex: a blocking wait begins. */
static __always_inline void block_begin(void *ctx, struct task_struct *prev, struct pt_regs *regs, long nr)
{
	__u32 tid = prev->pid, timeout_ms;
	bool takes_fd, sampled;
	__u32 type = block_type(nr, &takes_fd);
	struct sched_slot *e = thread_slot(tid, true);

	if (!e || e->state == SLOT_SYSCALL)
		return;
	if (e->state == SLOT_BLOCKED)	/* its switch-in never reached us */
		ls_count(LS_DROP_MISSED_END);
	/* the object: descriptor + 1, so that 0 is none (descriptor 0 is stdin) */
	sampled = block_prepare(e, takes_fd ? (__u64)(__u32)LS_SYSCALL_ARG1(regs) + 1 : 0, type);
	wait_publish(ctx, e, tid, SLOT_BLOCKED, sampled);
	timeout_ms = poll_timeout_ms(regs, nr);
	if (timeout_ms != LS_NO_TIMEOUT)	/* timed_out() reads it where the run queue clock lags */
		e->deadline_ns = bpf_ktime_get_ns() + (__u64)timeout_ms * LS_NSEC_PER_MSEC;
	if (!waker_on)	/* the thread that wakes it: sched_waking (attached at the same rate) */
		waker_wanted();
}

#endif
