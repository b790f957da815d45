/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the programs read off the architecture: the syscall a task is in (from the
 * registers it entered the kernel with), whether sampled registers are user or kernel
 * mode, and the instructions CPUs spin on. x86-64 and arm64.
 */
#ifndef __LS_ARCH_BPF_H
#define __LS_ARCH_BPF_H

#include <bpf/bpf_core_read.h>

#if defined(__TARGET_ARCH_x86)
enum ls_syscall_nr {
	LS_SYS_READ		= 0,
	LS_SYS_WRITE		= 1,
	LS_SYS_POLL		= 7,
	LS_SYS_PREAD64		= 17,
	LS_SYS_PWRITE64		= 18,
	LS_SYS_READV		= 19,
	LS_SYS_WRITEV		= 20,
	LS_SYS_SELECT		= 23,
	LS_SYS_SCHED_YIELD	= 24,
	LS_SYS_PAUSE		= 34,
	LS_SYS_NANOSLEEP	= 35,
	LS_SYS_CONNECT		= 42,
	LS_SYS_ACCEPT		= 43,
	LS_SYS_SENDTO		= 44,
	LS_SYS_RECVFROM		= 45,
	LS_SYS_SENDMSG		= 46,
	LS_SYS_RECVMSG		= 47,
	LS_SYS_WAIT4		= 61,
	LS_SYS_FCNTL		= 72,
	LS_SYS_FLOCK		= 73,
	LS_SYS_FSYNC		= 74,
	LS_SYS_FDATASYNC	= 75,
	LS_SYS_RT_SIGTIMEDWAIT	= 128,
	LS_SYS_RT_SIGSUSPEND	= 130,
	LS_SYS_FUTEX		= 202,
	LS_SYS_CLOCK_NANOSLEEP	= 230,
	LS_SYS_EPOLL_WAIT	= 232,
	LS_SYS_WAITID		= 247,
	LS_SYS_PSELECT6		= 270,
	LS_SYS_PPOLL		= 271,
	LS_SYS_SYNC_FILE_RANGE	= 277,
	LS_SYS_EPOLL_PWAIT	= 281,
	LS_SYS_ACCEPT4		= 288,
	LS_SYS_PREADV		= 295,
	LS_SYS_RECVMMSG		= 299,
	LS_SYS_PREADV2		= 327,
	LS_SYS_CLOSE		= 3,
	LS_SYS_SENDFILE		= 40,
	LS_SYS_SHUTDOWN		= 48,
	LS_SYS_EXIT		= 60,
	LS_SYS_KILL		= 62,
	LS_SYS_SEMOP		= 65,
	LS_SYS_MSGSND		= 69,
	LS_SYS_RT_SIGQUEUEINFO	= 129,
	LS_SYS_TKILL		= 200,
	LS_SYS_SEMTIMEDOP	= 220,
	LS_SYS_EXIT_GROUP	= 231,
	LS_SYS_TGKILL		= 234,
	LS_SYS_SPLICE		= 275,
	LS_SYS_TEE		= 276,
	LS_SYS_VMSPLICE		= 278,
	LS_SYS_RT_TGSIGQUEUEINFO = 297,
	LS_SYS_SENDMMSG		= 307,
};
/*
 * @regs is bpf_task_pt_regs()'s BTF pointer: a direct load (the verifier makes it a
 * faulting-safe one) instead of a probe-read helper call, on paths that run per switch.
 * The arguments too (the x86-64 syscall convention: rdi, rsi, rdx, r10, r8): a probe read
 * each cost a futex wait ~30 ns.
 */
#define LS_SYSCALL_NR(regs)	((regs)->orig_ax)
#define LS_SYSCALL_ARG1(regs)	((regs)->di)
#define LS_SYSCALL_ARG2(regs)	((regs)->si)
#define LS_SYSCALL_ARG3(regs)	((regs)->dx)
#define LS_SYSCALL_ARG4(regs)	((regs)->r10)
#define LS_SYSCALL_ARG5(regs)	((regs)->r8)
/*
 * The privilege level of the interrupted code is in the low bits of its %cs. Read as the
 * whole 8-byte slot: the verifier allows only full-width loads from a perf_event context.
 * By its place in the UAPI layout (asm/ptrace.h: a perf_event context's registers are
 * that ABI), not through CO-RE: 6.9+ (FRED) declares cs a 2-byte member of a union at the
 * same place, and a relocation from a 6.9+ vmlinux.h refuses an older kernel's 8-byte cs.
 */
enum { LS_PT_REGS_CS_WORD = 17 };	/* r15 ... orig_ax, ip, then cs */
#define LS_USER_MODE(regs)	((((volatile const __u64 *)(regs))[LS_PT_REGS_CS_WORD] & 3) == 3)
#elif defined(__TARGET_ARCH_arm64)
/* arm64 has no poll, select, epoll_wait or pause: only their p* forms (negative: none) */
enum ls_syscall_nr {
	LS_SYS_POLL		= -1,
	LS_SYS_SELECT		= -2,
	LS_SYS_EPOLL_WAIT	= -3,
	LS_SYS_PAUSE		= -4,
	LS_SYS_EPOLL_PWAIT	= 22,
	LS_SYS_FCNTL		= 25,
	LS_SYS_FLOCK		= 32,
	LS_SYS_READ		= 63,
	LS_SYS_WRITE		= 64,
	LS_SYS_READV		= 65,
	LS_SYS_WRITEV		= 66,
	LS_SYS_PREAD64		= 67,
	LS_SYS_PWRITE64		= 68,
	LS_SYS_PREADV		= 69,
	LS_SYS_PSELECT6		= 72,
	LS_SYS_PPOLL		= 73,
	LS_SYS_FSYNC		= 82,
	LS_SYS_FDATASYNC	= 83,
	LS_SYS_SYNC_FILE_RANGE	= 84,
	LS_SYS_WAITID		= 95,
	LS_SYS_FUTEX		= 98,
	LS_SYS_NANOSLEEP	= 101,
	LS_SYS_CLOCK_NANOSLEEP	= 115,
	LS_SYS_SCHED_YIELD	= 124,
	LS_SYS_RT_SIGSUSPEND	= 133,
	LS_SYS_RT_SIGTIMEDWAIT	= 137,
	LS_SYS_ACCEPT		= 202,
	LS_SYS_CONNECT		= 203,
	LS_SYS_SENDTO		= 206,
	LS_SYS_RECVFROM		= 207,
	LS_SYS_SENDMSG		= 211,
	LS_SYS_RECVMSG		= 212,
	LS_SYS_ACCEPT4		= 242,
	LS_SYS_RECVMMSG		= 243,
	LS_SYS_WAIT4		= 260,
	LS_SYS_PREADV2		= 286,
	LS_SYS_CLOSE		= 57,
	LS_SYS_SENDFILE		= 71,
	LS_SYS_VMSPLICE		= 75,
	LS_SYS_SPLICE		= 76,
	LS_SYS_TEE		= 77,
	LS_SYS_EXIT		= 93,
	LS_SYS_EXIT_GROUP	= 94,
	LS_SYS_KILL		= 129,
	LS_SYS_TKILL		= 130,
	LS_SYS_TGKILL		= 131,
	LS_SYS_RT_SIGQUEUEINFO	= 138,
	LS_SYS_MSGSND		= 189,
	LS_SYS_SEMTIMEDOP	= 192,
	LS_SYS_SEMOP		= 193,
	LS_SYS_SHUTDOWN		= 210,
	LS_SYS_RT_TGSIGQUEUEINFO = 240,
	LS_SYS_SENDMMSG		= 269,
};
#define LS_SYSCALL_NR(regs)	BPF_CORE_READ((struct user_pt_regs *)(regs), syscallno)
/* the first argument's register is the return value's: the kernel keeps it in orig_x0 */
#define LS_SYSCALL_ARG1(regs)	PT_REGS_PARM1_CORE_SYSCALL(regs)
#define LS_SYSCALL_ARG2(regs)	PT_REGS_PARM2_CORE_SYSCALL(regs)
#define LS_SYSCALL_ARG3(regs)	PT_REGS_PARM3_CORE_SYSCALL(regs)
#define LS_SYSCALL_ARG4(regs)	PT_REGS_PARM4_CORE_SYSCALL(regs)
#define LS_SYSCALL_ARG5(regs)	PT_REGS_PARM5_CORE_SYSCALL(regs)
/* PSTATE.M[3:0] is 0 (EL0t) for user mode */
#define LS_USER_MODE(regs)	(((regs)->pstate & 0xf) == 0)
#else
#error "lockscope reads syscall registers: only x86 and arm64 are supported"
#endif
/* these have the same number on every architecture */
#define LS_SYS_IO_URING_ENTER	426
#define LS_SYS_EPOLL_PWAIT2	441
#define LS_SYS_FUTEX_WAITV	449
#define LS_SYS_PIDFD_SEND_SIGNAL 424

/*
 * Spin-wait instructions. A spin loop is the hint followed by a load, a test and a
 * branch back: a sample lands on the hint or within a few instructions after it. Only
 * bytes before the sampled instruction count: code that merely follows a spin loop (the
 * trylock glibc places after pthread_spin_lock's loop) is not spinning.
 */
#define LS_SPIN_BACK		14	/* bytes before the sampled instruction */
#define LS_SPIN_CODE		(LS_SPIN_BACK + 2)

#if defined(__TARGET_ARCH_x86)
/* PAUSE is f3 90 (rep nop); looked for at every byte: x86 code is not aligned */
static __always_inline bool ls_spin_insn(const __u8 *code, int n)
{
	int i;

	for (i = 0; i < LS_SPIN_CODE - 1 && i < n - 1; i++)
		if (code[i] == 0xf3 && code[i + 1] == 0x90)
			return true;
	return false;
}
#else
/* YIELD, WFE and ISB (the hint Rust's and LLVM's spin_loop emit on arm64); 4-byte aligned */
static __always_inline bool ls_spin_insn(const __u8 *code, int n)
{
	int i;

	for (i = 0; i < LS_SPIN_CODE / 4 && i < n / 4; i++) {
		__u32 w = ((const __u32 *)code)[i];

		if (w == 0xd503203f || w == 0xd503205f || w == 0xd5033fdf)
			return true;
	}
	return false;
}
#endif

/*
 * Whether the user code at @ip is in a spin loop: a spin-wait hint at @ip or in the
 * LS_SPIN_BACK bytes before it. Where those bytes cannot be read (the start of a
 * mapping), only the hint at @ip.
 */
static __always_inline bool ls_spinning_at(__u64 ip)
{
	__u8 code[LS_SPIN_CODE];

	if (!bpf_probe_read_user(code, sizeof(code), (void *)(ip - LS_SPIN_BACK)))
		return ls_spin_insn(code, sizeof(code));
	return !bpf_probe_read_user(code, 4, (void *)ip) && ls_spin_insn(code, 4);
}

#endif /* __LS_ARCH_BPF_H */
