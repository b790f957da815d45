// SPDX-License-Identifier: GPL-2.0
/* User addresses of a process that is gone: what its maps said while it lived still names them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "decode/usyms.h"
#include "lib/procfs.h"

/* what a lock in the program's .data looks like to the daemon: an address in its image */
static int a_lock_word = 1;

/* A child that lives until its end of @fds is closed; its pid. */
static pid_t child_new(int fds[2])
{
	pid_t pid;
	char c;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		close(fds[1]);
		_exit(read(fds[0], &c, 1) < 0);
	}
	close(fds[0]);
	return pid;
}

/* The state letter of /proc/@pid/stat; 0 when it is gone. */
static char proc_state(pid_t pid)
{
	struct ls_proc_stat st;

	return ls_proc_stat(pid, &st) ? 0 : st.state;
}

static void test_exited_process_keeps_its_maps(void **state)
{
	struct usyms_opts opts = { .max_procs = 16 };
	const char *module = NULL;
	uint64_t vaddr = 0, again = 0;
	struct timespec pause = { 0, 1000000 };
	struct usyms *u;
	int fds[2];
	pid_t pid;

	(void)state;
	assert_int_equal(usyms__new(&opts, &u), 0);
	pid = child_new(fds);
	usyms__see(u, pid);
	assert_int_equal(usyms__data(u, pid, (uintptr_t)&a_lock_word, &module, &vaddr), 0);
	assert_string_equal(module, "test_usyms");
	/* a zombie: /proc/PID/maps still opens, and reads empty */
	close(fds[1]);
	while (proc_state(pid) != 'Z')
		nanosleep(&pause, NULL);
	usyms__reload(u, pid);
	module = NULL;
	assert_int_equal(usyms__data(u, pid, (uintptr_t)&a_lock_word, &module, &again), 0);
	assert_string_equal(module, "test_usyms");
	assert_int_equal(again, vaddr);
	/* and reaped: no /proc entry at all */
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	usyms__reload(u, pid);
	assert_int_equal(usyms__data(u, pid, (uintptr_t)&a_lock_word, &module, &again), 0);
	assert_int_equal(again, vaddr);
	usyms__free(u);
}

static void test_reload_reads_a_live_process_again(void **state)
{
	struct usyms_opts opts = { .max_procs = 16 };
	const char *module;
	uint64_t vaddr;
	struct usyms *u;
	int fds[2];
	pid_t pid;

	(void)state;
	assert_int_equal(usyms__new(&opts, &u), 0);
	pid = child_new(fds);
	/* never seen: reload reads it for the first time */
	usyms__reload(u, pid);
	assert_int_equal(usyms__data(u, pid, (uintptr_t)&a_lock_word, &module, &vaddr), 0);
	assert_string_equal(module, "test_usyms");
	assert_int_equal(usyms__data(u, pid + 1000000, (uintptr_t)&a_lock_word, &module, &vaddr), -ENOENT);
	close(fds[1]);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	usyms__free(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exited_process_keeps_its_maps),
		cmocka_unit_test(test_reload_reads_a_live_process_again),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
