// SPDX-License-Identifier: GPL-2.0
/*
 * bpf_lines ID: the source line of each piece of a loaded BPF program's machine code, one
 * "ADDRESS FILE:LINE: SOURCE" line per entry of its line info, after one "# func ADDRESS
 * LENGTH" line per function the JIT made (the program, then each subprogram: a BPF-to-BPF
 * call's or a bpf_loop() callback's), each function's lines in order. The kernel
 * keeps, for a program loaded with BTF line info, where the JIT put each line
 * (jited_line_info); `bpftool prog dump jited linum` prints the same, but only when built
 * with a disassembler (libbfd), which Debian's is not. bench/profile.py maps perf's
 * samples of the program to these lines.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

int main(int argc, char **argv)
{
	struct bpf_prog_info info = {};
	struct bpf_line_info *lines = NULL;
	__u32 len = sizeof(info), nr_lines, nr_jited, nr_funcs, i;
	struct btf *btf = NULL;
	__u64 *addrs = NULL, *funcs = NULL;
	__u32 *func_lens = NULL;
	int fd = -1, err = 1;

	if (argc != 2) {
		fprintf(stderr, "usage: bpf_lines PROG_ID (bpftool prog show lists them)\n");
		return 2;
	}
	fd = bpf_prog_get_fd_by_id(atoi(argv[1]));
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len)) {
		fprintf(stderr, "bpf_lines: program %s: %s (run as root; is it loaded?)\n", argv[1], strerror(errno));
		goto out;
	}
	nr_lines = info.nr_line_info;
	nr_jited = info.nr_jited_line_info;
	nr_funcs = info.nr_jited_ksyms;
	if (!nr_lines || nr_jited != nr_lines || !info.btf_id || !nr_funcs || info.nr_jited_func_lens != nr_funcs) {
		fprintf(stderr, "bpf_lines: program %s has no JIT line info (loaded without BTF, or not JITed)\n",
			argv[1]);
		goto out;
	}
	lines = calloc(nr_lines, sizeof(*lines));
	addrs = calloc(nr_jited, sizeof(*addrs));
	funcs = calloc(nr_funcs, sizeof(*funcs));
	func_lens = calloc(nr_funcs, sizeof(*func_lens));
	if (!lines || !addrs || !funcs || !func_lens) {
		fprintf(stderr, "bpf_lines: out of memory\n");
		goto out;
	}
	memset(&info, 0, sizeof(info));
	info.nr_line_info = nr_lines;
	info.line_info_rec_size = sizeof(*lines);
	info.line_info = (__u64)(unsigned long)lines;
	info.nr_jited_line_info = nr_jited;
	info.jited_line_info_rec_size = sizeof(*addrs);
	info.jited_line_info = (__u64)(unsigned long)addrs;
	info.nr_jited_ksyms = nr_funcs;
	info.jited_ksyms = (__u64)(unsigned long)funcs;
	info.nr_jited_func_lens = nr_funcs;
	info.jited_func_lens = (__u64)(unsigned long)func_lens;
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		fprintf(stderr, "bpf_lines: program %s: %s\n", argv[1], strerror(errno));
		goto out;
	}
	btf = btf__load_from_kernel_by_id(info.btf_id);
	if (!btf) {
		fprintf(stderr, "bpf_lines: program %s: its BTF: %s\n", argv[1], strerror(errno));
		goto out;
	}
	for (i = 0; i < nr_funcs; i++)
		printf("# func %llx %u\n", (unsigned long long)funcs[i], func_lens[i]);
	for (i = 0; i < nr_lines; i++) {
		const char *src = btf__name_by_offset(btf, lines[i].line_off);
		const char *file = btf__name_by_offset(btf, lines[i].file_name_off);

		printf("%llx %s:%u: %s\n", (unsigned long long)addrs[i], file ? base_name(file) : "?",
		       BPF_LINE_INFO_LINE_NUM(lines[i].line_col), src ? src : "");
	}
	err = 0;
out:
	btf__free(btf);
	free(lines);
	free(addrs);
	free(funcs);
	free(func_lens);
	if (fd >= 0)
		close(fd);
	return err;
}
