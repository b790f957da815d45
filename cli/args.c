// SPDX-License-Identifier: GPL-2.0
/*
 * lockscope's command line: the usage, each command's options (an option a command does
 * not take is refused naming those that do), and the request they make.
 */
#include <getopt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/query.h"
#include "api/engine.h"
#include "api/export.h"
#include "serve/server.h"
#include "cli.h"
#include "render.h"

/* report, export and flamegraph: one process or all, a window or a scan, a format */
static bool is_report_cmd(const char *cmd)
{
	return !strcmp(cmd, "report") || !strcmp(cmd, "export") || !strcmp(cmd, "flamegraph");
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: lockscope COMMAND [OPTION]...\n"
		"Show lock contention seen by lockscoped.\n\n"
		"Commands:\n"
		"  status                     programs, event rates, drop counters, windows\n"
		"  top                        contended locks, like `perf lock contention`\n"
		"  waits [--by mechanism|caller|edge]\n"
		"                             every user wait (futex and other blocking syscalls) by\n"
		"                             class: lock (peers taking turns), idle (waiting for work,\n"
		"                             input, a timer), io (a device); -p, -w, -G, -Y, -E, -o\n"
		"  scan -p PID [-d DURATION]  collect one process for DURATION (default 5s) and report;\n"
		"                             in-process (root) when no daemon is listening\n"
		"  threads [-p PID] [-w W]    per-thread context switches (like pidstat -w), their time\n"
		"                             off CPU and run-queue wait, the host's cost of a switch\n"
		"  spin [-p PID] [-w W]       CPU burnt or time lost while nothing useful runs: yield\n"
		"                             storms, PAUSE spin loops, bursts after a stop, lock\n"
		"                             holders preempted while others waited\n"
		"  report [-p PID]            the top problems, most wasted time first: finding,\n"
		"                             evidence and fix (seed 004's severity table, spin)\n"
		"  export -F FORMAT [-o FILE] json (the full report), prometheus, pprof, folded, or dot\n"
		"                             (the wait-for graph: lockscope export -F dot -Y wait,futex)\n"
		"  flamegraph -o FILE.svg     a wait-time flame graph (waiters' stacks by wait ns)\n"
		"  pause, resume              take every program off its hook and back (root): the\n"
		"                             host runs untraced meanwhile, the windows are kept\n\n"
		"Options of top and scan:\n"
		"  -p, --pid PID              only this process\n"
		"  -t, --threads              one row per thread\n"
		"  -l, --locks                one row per lock address (names mmap_lock, kernel symbols)\n"
		"      --by unit|cgroup|pod   top, threads: one row per systemd unit, cgroup or\n"
		"                             Kubernetes pod (NAMESPACE/NAME when lockscoped names pods)\n"
		"      --by edge              top: one row per waiting process and the process whose\n"
		"                             thread woke it, per type: the wait-for graph\n"
		"  -G, --cgroup CG            top, threads, spin, report, export, flamegraph: only\n"
		"                             processes in CG, a cgroup path (and below:\n"
		"                             /system.slice), a unit (nginx.service), a container id\n"
		"                             or a pod (UID, or NAMESPACE/NAME when named)\n"
		"  -Y, --type-filter TYPES    spinlock,rwlock,rwsem,mutex,rt-mutex,percpu-rwsem or rwsem:R...,\n"
		"                             futex[:mutex|:pi|:waitv|:condvar], or the other blocking\n"
		"                             syscalls: wait[:poll|:read|:recv|:write|:accept|:sync|:uring|\n"
		"                             :flock|:child|:signal|:sleep|:other|:kernel]; default: all\n"
		"                             but futex:condvar and wait (mostly idle: waits for an event)\n"
		"                             unless their class is lock (see waits)\n"
		"  -E, --entries N            show the top N rows\n"
		"  -w, --window W             10s, 1m, 5m or all (top: default 10s)\n"
		"  -k, --key KEY              sort by wait_total (default), contended, wait_max, avg_wait, wait_min\n"
		"  -o, --owners               the owner each row waited for most, with its stack\n"
		"      --stacks               the waiter's call stack under each row\n"
		"      --kind KIND            user (futex), kernel or all (default) locks\n"
		"      --holders              user locks: the holder's sampled stacks while others waited\n"
		"      --precise              scan: time futex calls from the syscall tracepoints (also\n"
		"                             counts calls that did not sleep); slows every syscall\n"
		"                             on the host while the scan runs\n"
		"      --max-stack N          frames per stack (default 8)\n"
		"  -d, --duration D           scan length: 500ms, 5s, 1m\n"
		"  -q, --quiet                scan: no progress line (shown only on a terminal)\n"
		"Options of threads: -p, -E, -w (without it: the threads running now; with it: what\n"
		"  happened in the window, threads that exited included) and\n"
		"      --measure              measure the cost of a switch again, now (~0.1 s)\n"
		"Options of spin: -p, -w (default all) and --max-stack\n"
		"Options of report, export and flamegraph: -p, -w (default 1m), -Y, --kind and\n"
		"  -d, --duration D           collect -p PID for D now (a scan) instead of the window\n"
		"  -F, --format F             export (and scan): json, prometheus, pprof, folded, dot\n"
		"      --profile P            pprof, folded, flamegraph: block (each wait under the\n"
		"                             waiter's stack, default), mutex (under the stack of\n"
		"                             the thread that released or owned the lock) or\n"
		"                             mechanism (folded, flamegraph: the waiter's stack under\n"
		"                             its class and type: lock;wait:poll;postgres;...)\n"
		"  -o, --output FILE          export, flamegraph: write FILE (atomically) instead of\n"
		"                             stdout; scan --format takes --output\n"
		"      --title T              flamegraph: the title\n"
		"Common options:\n"
		"  -S, --socket PATH          daemon socket (default $LOCKSCOPE_SOCKET or " LS_DEFAULT_SOCKET ")\n"
		"  -j, --json                 the daemon's JSON response (see schemas/)\n"
		"  -h, --help                 this text\n"
		"An answer is waited for 60 s at most (a scan: past its duration), or\n"
		"$LOCKSCOPE_TIMEOUT seconds (0: no limit).\n\n"
		"Examples:\n"
		"  lockscope top -E 10 --stacks\n"
		"  lockscope top -l -Y rwsem -w 1m\n"
		"  sudo lockscope scan -p $(pidof myserver) -d 10s --json\n"
		"  lockscope threads -p $(pidof myserver) -E 20\n"
		"  lockscope spin -p $(pidof myserver)\n"
		"  lockscope report -p $(pidof myserver) -d 10s\n"
		"  lockscope export -F pprof -w 5m -o locks.pb.gz && go tool pprof -top locks.pb.gz\n"
		"  lockscope export -F prometheus -o /var/lib/node_exporter/lockscope.prom\n"
		"  lockscope flamegraph -p $(pidof myserver) -o waits.svg\n");
}

static int bad_flag(const char *flag, const char *value, const char *accepted)
{
	fprintf(stderr, "lockscope: invalid %s '%s': %s\n", flag, value, accepted);
	return -EINVAL;
}

static int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "500ms", "5s", "2m", "1h", or plain seconds. */
static int parse_duration_ms(const char *s, uint64_t *ms)
{
	static const struct { const char *suffix; uint64_t mult; } units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 }, { "", 1000 },
	};
	char *end;
	double v;
	size_t i;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v <= 0)
		return -EINVAL;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (!strcmp(end, units[i].suffix)) {
			*ms = (uint64_t)(v * units[i].mult);
			return *ms ? 0 : -EINVAL;
		}
	}
	return -EINVAL;
}

/*
 * The request of report, export and flamegraph: the daemon's window, or with -d a scan of
 * -p PID that answers in the format asked.
 */
static int report_args(struct cli *c, bool duration_set)
{
	const char *given = cJSON_GetStringValue(cJSON_GetObjectItem(c->req, "format"));
	char fmt[16];

	snprintf(fmt, sizeof(fmt), "%s", !strcmp(c->cmd, "report") ? "json" :
		 !strcmp(c->cmd, "flamegraph") ? "folded" : given ? given : "");

	if (!fmt[0]) {
		fprintf(stderr, "lockscope: export needs -F json|prometheus|pprof|folded|dot\n");
		return -EINVAL;
	}
	if (!strcmp(c->cmd, "flamegraph") && !c->output) {
		fprintf(stderr, "lockscope: flamegraph needs -o FILE.svg\n");
		return -EINVAL;
	}
	if (cJSON_GetObjectItem(c->req, "profile") &&
	    (!strcmp(fmt, "json") || !strcmp(fmt, "prometheus") || !strcmp(fmt, "dot"))) {
		fprintf(stderr, "lockscope: --profile applies to pprof, folded and flamegraph\n");
		return -EINVAL;
	}
	if (!strcmp(c->cmd, "report") && c->output) {
		fprintf(stderr, "lockscope: report prints; 'lockscope export -F json -o FILE' writes the report\n");
		return -EINVAL;
	}
	cJSON_DeleteItemFromObject(c->req, "format");
	if (duration_set) {
		if (!cJSON_GetObjectItem(c->req, "pid")) {
			fprintf(stderr, "lockscope: -d collects one process now: add -p PID\n");
			return -EINVAL;
		}
		cJSON_ReplaceItemInObject(c->req, "cmd", cJSON_CreateString("scan"));
		cJSON_DeleteItemFromObject(c->req, "window");
		cJSON_AddStringToObject(c->req, "format", fmt);
		cJSON_AddNumberToObject(c->req, "duration_ms", c->duration_ms);
	} else if (strcmp(c->cmd, "report")) {
		cJSON_ReplaceItemInObject(c->req, "cmd", cJSON_CreateString("export"));
		cJSON_AddStringToObject(c->req, "format", fmt);
	}
	return 0;
}

enum long_opt {
	OPT_STACKS = 0x100, OPT_MAX_STACK, OPT_KIND, OPT_HOLDERS, OPT_PRECISE, OPT_MEASURE, OPT_PROFILE,
	OPT_OUTPUT, OPT_TITLE, OPT_BY,
};

/* The commands, as bits: which ones take an option. */
enum cmd_bit {
	CMD_STATUS	= 1 << 0,
	CMD_TOP		= 1 << 1,
	CMD_SCAN	= 1 << 2,
	CMD_THREADS	= 1 << 3,
	CMD_SPIN	= 1 << 4,
	CMD_REPORT	= 1 << 5,
	CMD_EXPORT	= 1 << 6,
	CMD_FLAMEGRAPH	= 1 << 7,
	CMD_WAITS	= 1 << 8,
	CMD_PAUSE	= 1 << 9,
	CMD_RESUME	= 1 << 10,
	CMD_ROWS	= CMD_TOP | CMD_SCAN | CMD_WAITS,		/* lock rows */
	CMD_REPORTS	= CMD_REPORT | CMD_EXPORT | CMD_FLAMEGRAPH,	/* a window's report */
	CMD_ALL		= 0x7ff,
};

static const char *const cmd_names[] = {
	"status", "top", "scan", "threads", "spin", "report", "export", "flamegraph", "waits", "pause", "resume",
};

/*
 * One grammar: each option means one thing in every command that takes it, and a command
 * that does not take it says so, with the commands that do. (-o is --owners where there
 * are lock rows and --output where a file is written.)
 */
static const struct {
	int opt;
	const char *name;
	unsigned int cmds;
} options[] = {
	{ 'p', "-p/--pid", CMD_ROWS | CMD_THREADS | CMD_SPIN | CMD_REPORTS },
	{ 't', "-t/--threads", CMD_ROWS },
	{ OPT_BY, "--by", CMD_TOP | CMD_THREADS | CMD_WAITS },
	{ 'G', "-G/--cgroup", CMD_TOP | CMD_WAITS | CMD_THREADS | CMD_SPIN | CMD_REPORTS },
	{ 'l', "-l/--locks", CMD_ROWS },
	{ 'Y', "-Y/--type-filter", CMD_ROWS | CMD_REPORTS },
	{ 'E', "-E/--entries", CMD_ROWS | CMD_THREADS },
	{ 'w', "-w/--window", CMD_TOP | CMD_WAITS | CMD_THREADS | CMD_SPIN | CMD_REPORTS },
	{ 'k', "-k/--key", CMD_ROWS },
	{ 'o', "-o", CMD_ROWS | CMD_EXPORT | CMD_FLAMEGRAPH },
	{ OPT_STACKS, "--stacks", CMD_ROWS },
	{ OPT_MAX_STACK, "--max-stack", CMD_ROWS | CMD_SPIN },
	{ OPT_KIND, "--kind", CMD_ROWS | CMD_REPORTS },
	{ OPT_HOLDERS, "--holders", CMD_ROWS },
	{ OPT_PRECISE, "--precise", CMD_SCAN },
	{ OPT_MEASURE, "--measure", CMD_THREADS },
	{ 'd', "-d/--duration", CMD_SCAN | CMD_REPORTS },
	{ 'F', "-F/--format", CMD_SCAN | CMD_EXPORT },
	{ OPT_PROFILE, "--profile", CMD_SCAN | CMD_EXPORT | CMD_FLAMEGRAPH },
	{ OPT_OUTPUT, "--output", CMD_SCAN | CMD_EXPORT | CMD_FLAMEGRAPH },
	{ OPT_TITLE, "--title", CMD_FLAMEGRAPH },
	{ 'q', "-q/--quiet", CMD_SCAN | CMD_REPORTS },
};

static unsigned int cmd_bit(const char *cmd)
{
	size_t i;

	for (i = 0; i < sizeof(cmd_names) / sizeof(cmd_names[0]); i++)
		if (!strcmp(cmd, cmd_names[i]))
			return 1U << i;
	return 0;
}

/* Whether @cmd takes option @opt; if not, a one-line error naming the commands that do. */
static bool option_applies(const char *cmd, int opt)
{
	char takers[128] = "";
	size_t i, j, len = 0, n = 0;

	for (i = 0; i < sizeof(options) / sizeof(options[0]) && options[i].opt != opt; i++)
		;
	if (i == sizeof(options) / sizeof(options[0]) || (options[i].cmds & cmd_bit(cmd)))
		return true;	/* the common options: every command */
	for (j = 0; j < sizeof(cmd_names) / sizeof(cmd_names[0]); j++)
		if (options[i].cmds & (1U << j) && ++n)
			len += snprintf(takers + len, sizeof(takers) - len, "%s%s", len ? ", " : "", cmd_names[j]);
	fprintf(stderr, "lockscope: %s does not apply to %s (%s%s %s it)\n", options[i].name, cmd,
		n == 1 ? "only " : "", takers, n == 1 ? "takes" : "take");
	return false;
}

/*
 * For bash and zsh completion (deploy/completion/): the commands, or the options @cmd
 * takes, one per line, from the same table the parser checks.
 */
static void complete(const char *cmd)
{
	static const char *const common[] = { "--socket", "--json", "--help" };
	unsigned int bit = cmd ? cmd_bit(cmd) : 0;
	size_t i;

	if (!cmd) {
		for (i = 0; i < sizeof(cmd_names) / sizeof(cmd_names[0]); i++)
			printf("%s\n", cmd_names[i]);
		return;
	}
	for (i = 0; bit && i < sizeof(options) / sizeof(options[0]); i++) {
		const char *name = options[i].name, *slash = strchr(name, '/');

		if (!(options[i].cmds & bit))
			continue;
		/* "-p/--pid": both spellings */
		if (slash)
			printf("%.*s\n%s\n", (int)(slash - name), name, slash + 1);
		else if (!strcmp(name, "-o"))
			printf("-o\n%s\n", bit & CMD_ROWS ? "--owners" : "--output");
		else
			printf("%s\n", name);
	}
	for (i = 0; bit && i < sizeof(common) / sizeof(common[0]); i++)
		printf("%s\n", common[i]);
}

int cli_parse_args(int argc, char **argv, struct cli *c)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "threads", no_argument, NULL, 't' },
		{ "locks", no_argument, NULL, 'l' },
		{ "type-filter", required_argument, NULL, 'Y' },
		{ "entries", required_argument, NULL, 'E' },
		{ "window", required_argument, NULL, 'w' },
		{ "key", required_argument, NULL, 'k' },
		{ "owners", no_argument, NULL, 'o' },
		{ "stacks", no_argument, NULL, OPT_STACKS },
		{ "max-stack", required_argument, NULL, OPT_MAX_STACK },
		{ "kind", required_argument, NULL, OPT_KIND },
		{ "holders", no_argument, NULL, OPT_HOLDERS },
		{ "precise", no_argument, NULL, OPT_PRECISE },
		{ "measure", no_argument, NULL, OPT_MEASURE },
		{ "duration", required_argument, NULL, 'd' },
		{ "format", required_argument, NULL, 'F' },
		{ "profile", required_argument, NULL, OPT_PROFILE },
		{ "output", required_argument, NULL, OPT_OUTPUT },
		{ "title", required_argument, NULL, OPT_TITLE },
		{ "by", required_argument, NULL, OPT_BY },
		{ "cgroup", required_argument, NULL, 'G' },
		{ "socket", required_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	static const char *const sorts[] = { "wait_total", "contended", "wait_max", "avg_wait", "wait_min" };
	uint64_t v;
	int opt;
	size_t i;
	char err[256];
	uint32_t mask;
	enum ls_window w;
	enum ls_export_format fmt;
	enum ls_profile prof;
	bool duration_set = false;

	if (argc == 2 && !strcmp(argv[1], "--version")) {
		printf("lockscope %s\n", LS_VERSION);
		exit(0);
	}
	if (argc == 2 && !strcmp(argv[1], "__complete")) {	/* the shells' completion: commands */
		complete(NULL);
		exit(0);
	}
	if (argc == 3 && !strcmp(argv[1], "__complete")) {	/* and a command's options */
		complete(argv[2]);
		exit(0);
	}
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		if (argc < 2)
			return -EINVAL;
		exit(0);
	}
	/* the common options may come before the command: lockscope --socket P top */
	for (i = 1; i < (size_t)argc && argv[i][0] == '-'; i++)
		if (!strcmp(argv[i], "-S") || !strcmp(argv[i], "--socket"))
			i++;
	if (i >= (size_t)argc) {
		fprintf(stderr, "lockscope: no command (" CLI_CMDS "; see --help)\n");
		return -EINVAL;
	}
	c->cmd = argv[i];
	memmove(&argv[i], &argv[i + 1], (argc - i - 1) * sizeof(*argv));
	argc--;
	if (!cmd_bit(c->cmd)) {
		fprintf(stderr, "lockscope: unknown command '%s' (" CLI_CMDS "; see --help)\n", c->cmd);
		return -EINVAL;
	}
	cJSON_AddStringToObject(c->req, "cmd", c->cmd);
	if (!strcmp(c->cmd, "top") || !strcmp(c->cmd, "waits"))
		cJSON_AddStringToObject(c->req, "window", "10s");
	c->ro.waits = !strcmp(c->cmd, "waits");
	if (is_report_cmd(c->cmd))
		cJSON_AddStringToObject(c->req, "window", DEFAULT_REPORT_WINDOW);
	optind = 1;
	/* -o names the output where there is one, and asks for owners where there are rows */
	while ((opt = getopt_long(argc, argv, strcmp(c->cmd, "export") && strcmp(c->cmd, "flamegraph") ?
				  "p:tlY:E:w:k:od:S:jqhF:G:" : "p:tlY:E:w:k:o:d:S:jqhF:G:", longopts, NULL)) != -1) {
		if (opt != '?' && !option_applies(c->cmd, opt))
			return -EINVAL;
		switch (opt) {
		case 'p':
			if (parse_uint(optarg, INT32_MAX, &v) || !v)
				return bad_flag("-p/--pid", optarg, "a process id");
			cJSON_AddNumberToObject(c->req, "pid", v);
			break;
		case 't': c->ro.threads = true; cJSON_AddStringToObject(c->req, "group", "thread"); break;
		case 'l': c->ro.locks = true; cJSON_AddStringToObject(c->req, "group", "lock"); break;
		case OPT_BY:
			if (c->ro.waits) {
				if (strcmp(optarg, "mechanism") && strcmp(optarg, "caller") && strcmp(optarg, "edge"))
					return bad_flag("--by", optarg, "mechanism, caller or edge");
			} else if (strcmp(optarg, "unit") && strcmp(optarg, "cgroup") && strcmp(optarg, "pod") &&
				   (strcmp(optarg, "edge") || strcmp(c->cmd, "top"))) {
				return bad_flag("--by", optarg, strcmp(c->cmd, "top") ? "unit, cgroup or pod" :
							"unit, cgroup, pod or edge");
			}
			c->ro.by = strcmp(optarg, "caller") ? optarg : NULL;	/* caller: the default rows */
			cJSON_AddStringToObject(c->req, "group", optarg);
			break;
		case 'G':
			if (!*optarg || strlen(optarg) >= LS_CGROUP_PATH_MAX)
				return bad_flag("-G/--cgroup", optarg, "a cgroup path, unit, container id or pod UID");
			cJSON_AddStringToObject(c->req, "cgroup", optarg);
			break;
		case 'Y':
			if (query__parse_types(optarg, &mask, err, sizeof(err)))
				return bad_flag("-Y/--type-filter", optarg, err);
			cJSON_AddStringToObject(c->req, "types", optarg);
			break;
		case 'E':
			if (parse_uint(optarg, 1000000, &v) || !v)
				return bad_flag("-E/--entries", optarg, "a row count from 1 to 1000000");
			cJSON_AddNumberToObject(c->req, "limit", v);
			break;
		case 'w':
			if (ls_window_parse(optarg, &w))
				return bad_flag("-w/--window", optarg, "one of 10s, 1m, 5m, all");
			cJSON_DeleteItemFromObject(c->req, "window");
			cJSON_AddStringToObject(c->req, "window", optarg);
			break;
		case 'k':
			for (i = 0; i < sizeof(sorts) / sizeof(sorts[0]) && strcmp(optarg, sorts[i]); i++)
				;
			if (i == sizeof(sorts) / sizeof(sorts[0]))
				return bad_flag("-k/--key", optarg, "one of wait_total, contended, wait_max, avg_wait, wait_min");
			cJSON_AddStringToObject(c->req, "sort", optarg);
			break;
		case 'o':
			if (optarg) {
				c->output = optarg;
				break;
			}
			c->ro.owners = true;
			cJSON_AddBoolToObject(c->req, "owners", true);
			break;
		case 'F':
			if (ls_export_format_parse(optarg, &fmt))
				return bad_flag("-F/--format", optarg, "json, prometheus, pprof, folded or dot");
			cJSON_AddStringToObject(c->req, "format", optarg);
			break;
		case OPT_PROFILE:
			if (ls_profile_parse(optarg, &prof))
				return bad_flag("--profile", optarg, "block (waiters' stacks), mutex (releasers' and owners') "
						"or mechanism (waiters' under class and type: folded, flamegraph)");
			cJSON_AddStringToObject(c->req, "profile", optarg);
			break;
		case OPT_OUTPUT: c->output = optarg; break;
		case OPT_TITLE: c->title = optarg; break;
		case OPT_STACKS: c->ro.stacks = true; cJSON_AddBoolToObject(c->req, "stacks", true); break;
		case OPT_KIND:
			if (strcmp(optarg, "user") && strcmp(optarg, "kernel") && strcmp(optarg, "all"))
				return bad_flag("--kind", optarg, "user, kernel or all");
			cJSON_AddStringToObject(c->req, "kind", optarg);
			break;
		case OPT_HOLDERS: c->ro.holders = true; cJSON_AddBoolToObject(c->req, "holders", true); break;
		case OPT_PRECISE: c->precise = true; break;
		case OPT_MEASURE: cJSON_AddBoolToObject(c->req, "measure", true); break;
		case OPT_MAX_STACK:
			if (parse_uint(optarg, LS_MAX_STACK_DEPTH, &v) || !v)
				return bad_flag("--max-stack", optarg, "a frame count from 1 to 127");
			cJSON_AddNumberToObject(c->req, "max_stack", v);
			break;
		case 'd':
			if (parse_duration_ms(optarg, &c->duration_ms))
				return bad_flag("-d/--duration", optarg, "a positive duration like 500ms, 5s, 2m");
			duration_set = true;
			break;
		case 'S': c->socket = optarg; break;
		case 'j': c->json = true; break;
		case 'q': c->quiet = true; break;
		case 'h': usage(stdout); exit(0);
		default:
			fprintf(stderr, "lockscope: see 'lockscope --help' for the options\n");
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "lockscope: unexpected argument '%s'; see --help\n", argv[optind]);
		return -EINVAL;
	}
	if (!strcmp(c->cmd, "scan") && !cJSON_GetObjectItem(c->req, "pid")) {
		fprintf(stderr, "lockscope: scan needs -p PID\n");
		return -EINVAL;
	}
	if (is_report_cmd(c->cmd) && report_args(c, duration_set))
		return -EINVAL;
	if (!strcmp(c->cmd, "scan") && c->output && !cJSON_GetObjectItem(c->req, "format")) {
		fprintf(stderr, "lockscope: scan --output writes an export: add -F json|prometheus|pprof|folded\n");
		return -EINVAL;
	}

	if (c->ro.threads + c->ro.locks + !!c->ro.by > 1) {
		fprintf(stderr, "lockscope: -t, -l and --by group rows differently; use one\n");
		return -EINVAL;
	}
	c->exporting = !strcmp(c->cmd, "export") || (!strcmp(c->cmd, "scan") && cJSON_GetObjectItem(c->req, "format"));
	if (!strcmp(c->cmd, "scan")) {
		cJSON_AddNumberToObject(c->req, "duration_ms", c->duration_ms);
		if (c->precise)
			cJSON_AddBoolToObject(c->req, "precise", true);
	}
	return 0;
}
