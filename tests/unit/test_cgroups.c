// SPDX-License-Identifier: GPL-2.0
/*
 * Cgroup attribution without a kernel: /proc/PID/cgroup and mountinfo as pure v2 and
 * hybrid hosts write them, the unit, container and pod read from the layouts systemd,
 * Docker, containerd, CRI-O and the kubelet make, -G's matching, and the process table
 * over a /proc made in a temporary directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "decode/cgroups.h"
#include "decode/pods.h"
#include "fake_proc.h"

#define CID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define UID "1f6c2a3e-5b7d-4c8e-9f00-112233445566"
#define UID_ "1f6c2a3e_5b7d_4c8e_9f00_112233445566"

/* a hybrid host (this development machine's layout) and a pure v2 one */
static const char hybrid_cgroup[] = "9:name=systemd:/system.slice/nginx.service\n"
				    "4:memory:/system.slice/nginx.service\n"
				    "0::/system.slice/nginx.service\n";
static const char pure_cgroup[] = "0::/user.slice/user-1000.slice/session-3.scope\n";
static const char v1_only_cgroup[] = "4:memory:/\n1:cpu:/\n";
static const char hybrid_mountinfo[] =
	"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
static const char pure_mountinfo[] =
	"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
	"26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

/* the same in a mount namespace that made the other layout over the host's */
static const char hybrid_mountinfo_over[] =
	"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	"610 31 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 none rw\n";
static const char pure_mountinfo_over[] =
	"26 22 0:23 / /sys/fs/cgroup rw,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	"611 26 0:90 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw\n"
	"612 611 0:23 / /sys/fs/cgroup/unified rw,relatime - cgroup2 none rw\n";

static void test_proc_cgroup_v2_line(void **state)
{
	char path[LS_CGROUP_PATH_MAX];

	(void)state;
	assert_int_equal(ls_cgroup_v2_path(hybrid_cgroup, path, sizeof(path)), 0);
	assert_string_equal(path, "/system.slice/nginx.service");
	assert_int_equal(ls_cgroup_v2_path(pure_cgroup, path, sizeof(path)), 0);
	assert_string_equal(path, "/user.slice/user-1000.slice/session-3.scope");
	assert_int_equal(ls_cgroup_v2_path(v1_only_cgroup, path, sizeof(path)), -ENOENT);
	assert_int_equal(ls_cgroup_v2_path("", path, sizeof(path)), -ENOENT);
	/* cut, never overrun */
	assert_int_equal(ls_cgroup_v2_path("0::/abcdef\n", path, 4), 0);
	assert_string_equal(path, "/ab");
}

static void test_mountinfo_finds_cgroup2(void **state)
{
	char mount[LS_CGROUP_PATH_MAX];

	(void)state;
	assert_int_equal(ls_cgroup_v2_mount(hybrid_mountinfo, mount, sizeof(mount)), 0);
	assert_string_equal(mount, "/sys/fs/cgroup/unified");
	assert_int_equal(ls_cgroup_v2_mount(pure_mountinfo, mount, sizeof(mount)), 0);
	assert_string_equal(mount, "/sys/fs/cgroup");
	assert_int_equal(ls_cgroup_v2_mount("22 1 8:1 / /a\\040b rw - cgroup2 none rw\n", mount, sizeof(mount)), 0);
	assert_string_equal(mount, "/a b");
	assert_int_equal(ls_cgroup_v2_mount("32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n", mount,
					    sizeof(mount)), -ENOENT);
	/* mounted over in a namespace: what is hidden is passed over */
	assert_int_equal(ls_cgroup_v2_mount(hybrid_mountinfo_over, mount, sizeof(mount)), 0);
	assert_string_equal(mount, "/sys/fs/cgroup");
	assert_int_equal(ls_cgroup_v2_mount(pure_mountinfo_over, mount, sizeof(mount)), 0);
	assert_string_equal(mount, "/sys/fs/cgroup/unified");
}

static struct ls_cgroup names(const char *path)
{
	struct ls_cgroup c = {};

	snprintf(c.path, sizeof(c.path), "%s", path);
	ls_cgroup_names(&c);
	return c;
}

static void test_units_containers_and_pods(void **state)
{
	static const struct {
		const char *path, *unit, *container, *pod;
	} cases[] = {
		{ "/system.slice/nginx.service", "nginx.service", "", "" },
		/* a service that delegates its own sub-cgroups is still the service */
		{ "/system.slice/postgresql@15-main.service/worker", "postgresql@15-main.service", "", "" },
		{ "/user.slice/user-1000.slice/session-3.scope", "session-3.scope", "", "" },
		{ "/user.slice", "user.slice", "", "" },
		{ "/", "", "", "" },
		{ "/lockscope-test", "", "", "" },
		{ "/system.slice/docker-" CID ".scope", "docker-" CID ".scope", CID, "" },
		{ "/docker/" CID, "", CID, "" },
		{ "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice/cri-containerd-" CID
		  ".scope", "cri-containerd-" CID ".scope", CID, UID },
		{ "/kubepods.slice/kubepods-pod" UID_ ".slice/crio-" CID ".scope", "crio-" CID ".scope", CID, UID },
		{ "/kubepods/burstable/pod" UID "/" CID, "", CID, UID },
		/* seen from a pod's own cgroup namespace */
		{ "/../../kubepods-besteffort-pod" UID_ ".slice/cri-containerd-" CID ".scope", "cri-containerd-" CID ".scope",
		  CID, UID },
		/* a static pod: its manifest's hash for a UID */
		{ "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod5e1a7f3c9b2d4e6f8a0b1c2d3e4f5a6b.slice",
		  "kubepods-besteffort-pod5e1a7f3c9b2d4e6f8a0b1c2d3e4f5a6b.slice", "", "5e1a7f3c9b2d4e6f8a0b1c2d3e4f5a6b" },
		/* not quite: a short id, a "pod" inside a word */
		{ "/system.slice/docker-0123.scope", "docker-0123.scope", "", "" },
		{ "/ipod" UID, "", "", "" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ls_cgroup c = names(cases[i].path);

		assert_string_equal(c.unit, cases[i].unit);
		assert_string_equal(c.container, cases[i].container);
		assert_string_equal(c.pod, cases[i].pod);
	}
}

static void test_filters(void **state)
{
	struct ls_cgroup svc = names("/system.slice/nginx.service/worker");
	struct ls_cgroup pod = names("/kubepods/burstable/pod" UID "/" CID);

	(void)state;
	/* paths: the cgroup and below, with or without the leading '/', whole components only */
	assert_true(ls_cgroup_matches(&svc, "/system.slice"));
	assert_true(ls_cgroup_matches(&svc, "system.slice/nginx.service"));
	assert_true(ls_cgroup_matches(&svc, "/system.slice/nginx.service/worker/"));
	assert_true(ls_cgroup_matches(&svc, "/"));
	assert_false(ls_cgroup_matches(&svc, "/system.sl"));
	assert_false(ls_cgroup_matches(&svc, "/user.slice"));
	assert_false(ls_cgroup_matches(&svc, "/system.slice/nginx.service/worker/more"));
	/* names: a unit or slice anywhere on the path */
	assert_true(ls_cgroup_matches(&svc, "nginx.service"));
	assert_true(ls_cgroup_matches(&svc, "system.slice"));
	assert_false(ls_cgroup_matches(&svc, "nginx"));
	assert_false(ls_cgroup_matches(&svc, "apache.service"));
	/* containers by their full or `docker ps` id, pods by UID */
	assert_true(ls_cgroup_matches(&pod, CID));
	assert_true(ls_cgroup_matches(&pod, "0123456789ab"));
	assert_false(ls_cgroup_matches(&pod, "0123456789"));
	assert_true(ls_cgroup_matches(&pod, UID));
	assert_false(ls_cgroup_matches(&svc, UID));
	assert_true(ls_cgroup_matches(&svc, ""));
}

static void test_table_groups_and_keeps_exited(void **state)
{
	char root[] = "/tmp/test_cgroups.XXXXXX", path[256];
	struct cgroups_stats st;
	struct cgroups *cg;
	uint32_t pid;

	(void)state;
	assert_non_null(mkdtemp(root));
	fake_proc_cgroup(root, 10, "/system.slice/a.service");
	fake_proc_cgroup(root, 11, "/system.slice/a.service/sub");
	fake_proc_cgroup(root, 12, "/system.slice/b.service");
	fake_proc_cgroup(root, 13, "/kubepods/burstable/pod" UID "/" CID);
	assert_int_equal(cgroups__new(&(struct cgroups_opts){ .max_procs = 4, .max_cgroups = 8, .proc = root,
							      .mountinfo = hybrid_mountinfo }, &cg), 0);
	assert_string_equal(cgroups__mount(cg), "/sys/fs/cgroup/unified");
	for (pid = 10; pid <= 12; pid++)
		cgroups__see(cg, pid, 0);
	cgroups__see(cg, 99, 0);	/* no such process */
	assert_string_equal(cgroups__of(cg, 11)->path, "/system.slice/a.service/sub");
	assert_string_equal(cgroups__of(cg, 11)->unit, "a.service");
	assert_null(cgroups__of(cg, 99));
	/* 10 and 11: two cgroups, one unit; 12 another unit; none of them in a pod */
	assert_int_not_equal(cgroups__group(cg, 10, CGROUP_BY_CGROUP), cgroups__group(cg, 11, CGROUP_BY_CGROUP));
	assert_int_equal(cgroups__group(cg, 10, CGROUP_BY_UNIT), cgroups__group(cg, 11, CGROUP_BY_UNIT));
	assert_int_not_equal(cgroups__group(cg, 10, CGROUP_BY_UNIT), cgroups__group(cg, 12, CGROUP_BY_UNIT));
	assert_int_not_equal(cgroups__group(cg, 10, CGROUP_BY_UNIT), 0);
	assert_int_equal(cgroups__group(cg, 10, CGROUP_BY_POD), 0);
	assert_true(cgroups__matches(cg, 11, "a.service"));
	assert_false(cgroups__matches(cg, 12, "a.service"));
	assert_false(cgroups__matches(cg, 99, ""));
	/* an exited process keeps its cgroup */
	snprintf(path, sizeof(path), "%s/10/cgroup", root);
	unlink(path);
	for (pid = 0; pid < 12; pid++)
		cgroups__tick(cg);
	cgroups__see(cg, 10, 0);
	assert_string_equal(cgroups__of(cg, 10)->unit, "a.service");
	/* a live one that moved is read again after the refresh */
	fake_proc_cgroup(root, 12, "/system.slice/c.service");
	cgroups__see(cg, 12, 0);
	assert_string_equal(cgroups__of(cg, 12)->unit, "c.service");
	/* a full table starts again, counted */
	cgroups__see(cg, 13, 0);
	assert_string_equal(cgroups__of(cg, 13)->pod, UID);
	assert_string_equal(cgroups__of(cg, 13)->container, CID);
	cgroups__stats(cg, &st);
	assert_int_equal(st.cleared, 1);
	assert_int_equal(st.procs, 1);
	assert_int_equal(st.unresolved, 1);
	cgroups__free(cg);
	fake_proc_remove(root);
}

/*
 * A process whose wait names another cgroup than its last one is read again at once: it
 * moved (a shell that entered a unit's cgroup and exec'd the service), or its pid is a new
 * process's. Threads that name two cgroups in turn cost at most two reads a second.
 */
static void test_moved_process_is_read_again_at_once(void **state)
{
	char root[] = "/tmp/test_cgroups.XXXXXX";
	struct cgroups *cg;
	int i;

	(void)state;
	assert_non_null(mkdtemp(root));
	fake_proc_cgroup(root, 30, "/");
	assert_int_equal(cgroups__new(&(struct cgroups_opts){ .max_procs = 8, .max_cgroups = 8, .proc = root,
							      .mountinfo = hybrid_mountinfo }, &cg), 0);
	cgroups__see(cg, 30, 1);
	assert_string_equal(cgroups__of(cg, 30)->path, "/");
	/* it moves, and its next wait says so: read again, within the same second */
	fake_proc_cgroup(root, 30, "/app.slice/a.service");
	cgroups__see(cg, 30, 1);
	assert_string_equal(cgroups__of(cg, 30)->path, "/");
	cgroups__see(cg, 30, 7);
	assert_string_equal(cgroups__of(cg, 30)->unit, "a.service");
	/* the same cgroup again, or a record that names none: not read */
	fake_proc_cgroup(root, 30, "/app.slice/b.service");
	cgroups__see(cg, 30, 7);
	cgroups__see(cg, 30, 0);
	assert_string_equal(cgroups__of(cg, 30)->unit, "a.service");
	/* two cgroups in turn (threads in threaded cgroups): no more reads this second */
	for (i = 0; i < 4; i++)
		cgroups__see(cg, 30, i % 2 ? 7 : 8);
	assert_string_equal(cgroups__of(cg, 30)->unit, "a.service");
	/* the next second, one read more */
	cgroups__tick(cg);
	cgroups__see(cg, 30, 8);
	assert_string_equal(cgroups__of(cg, 30)->unit, "b.service");
	cgroups__free(cg);
	fake_proc_remove(root);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *text = NULL;
	size_t cap = 0;
	ssize_t n;

	assert_non_null(f);
	n = getdelim(&text, &cap, 0, f);
	fclose(f);
	assert_true(n > 0);
	*len = n;
	return text;
}

#define STATIC_HASH "5e1a7f3c9b2d4e6f8a0b1c2d3e4f5a6b"

/* The kubelet's /pods and the API server's /api/v1/pods of one node (tests/data, checked
 * against the upstream API types by tests/k8s): the same pods, a static one named both ways. */
static void test_pod_lists(void **state)
{
	static const char *const files[] = { "tests/data/kubelet-pods.json", "tests/data/apiserver-pods.json" };
	char err[160];
	size_t i, len, skipped;

	(void)state;
	for (i = 0; i < 2; i++) {
		char *text = read_file(files[i], &len);
		struct pods *p = NULL;
		const struct ls_pod *pod;

		assert_int_equal(pods__parse(text, len, &p, &skipped, err, sizeof(err)), 0);
		assert_int_equal(pods__count(p), 3);
		assert_int_equal(skipped, 0);
		assert_non_null(pod = pods__find(p, UID));
		assert_string_equal(pod->ns, "shop");
		assert_string_equal(pod->name, "checkout-7d9f8b6c4d-x2x8q");
		/* the static pod by the hash its cgroup carries, in both lists */
		assert_non_null(pod = pods__find(p, STATIC_HASH));
		assert_string_equal(pod->name, "etcd-node-1");
		assert_null(pods__find(p, "d2c4e6f8-0a1b-4c3d-8e5f-6a7b8c9d0e1f"));
		assert_null(pods__find(p, ""));
		pods__free(p);
		free(text);
	}
	/* not a list, not JSON, items lacking what names them */
	{
		static const char pod[] = "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{}}";
		static const char status[] = "{\"kind\":\"Status\",\"items\":[],\"message\":\"Unauthorized\"}";
		static const char some[] = "{\"items\":[{\"metadata\":{\"uid\":\"" UID "\",\"name\":\"a\",\"namespace\":\"b\"}},"
					   "{\"metadata\":{\"uid\":\"" UID "\",\"name\":\"a\"}},{\"metadata\":7},{}]}";
		struct pods *p = NULL;

		assert_int_equal(pods__parse(pod, strlen(pod), &p, &skipped, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "not a PodList"));
		assert_int_equal(pods__parse(status, strlen(status), &p, &skipped, err, sizeof(err)), -EINVAL);
		assert_int_equal(pods__parse("<html>", 6, &p, &skipped, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "not JSON"));
		assert_int_equal(pods__parse(some, strlen(some), &p, &skipped, err, sizeof(err)), 0);
		assert_int_equal(pods__count(p), 1);
		assert_int_equal(skipped, 3);
		pods__free(p);
	}
}

/* A table given a pod list names its processes' pods, and -G takes NAMESPACE/NAME. */
static void test_table_names_pods(void **state)
{
	char root[] = "/tmp/test_cgroups.XXXXXX", err[160];
	struct pods *p = NULL;
	struct cgroups *cg;
	size_t len, skipped;
	char *text;

	(void)state;
	assert_non_null(mkdtemp(root));
	fake_proc_cgroup(root, 20, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
				   ".slice/cri-containerd-" CID ".scope");
	fake_proc_cgroup(root, 21, "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" STATIC_HASH
				   ".slice/cri-containerd-00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff.scope");
	fake_proc_cgroup(root, 22, "/system.slice/kubelet.service");
	assert_int_equal(cgroups__new(&(struct cgroups_opts){ .max_procs = 8, .max_cgroups = 8, .proc = root,
							      .mountinfo = hybrid_mountinfo }, &cg), 0);
	cgroups__see(cg, 20, 0);
	/* a pod before any list: the list is wanted, once */
	assert_true(cgroups__pods_wanted(cg));
	assert_false(cgroups__pods_wanted(cg));
	assert_null(cgroups__pod(cg, cgroups__of(cg, 20)));
	text = read_file("tests/data/kubelet-pods.json", &len);
	assert_int_equal(pods__parse(text, len, &p, &skipped, err, sizeof(err)), 0);
	free(text);
	cgroups__set_pods(cg, p);
	cgroups__see(cg, 21, 0);
	cgroups__see(cg, 22, 0);
	assert_false(cgroups__pods_wanted(cg));	/* both known, or no pod at all */
	assert_string_equal(cgroups__pod(cg, cgroups__of(cg, 20))->name, "checkout-7d9f8b6c4d-x2x8q");
	assert_string_equal(cgroups__pod(cg, cgroups__of(cg, 21))->ns, "kube-system");
	assert_null(cgroups__pod(cg, cgroups__of(cg, 22)));
	assert_string_equal(cgroups__of(cg, 21)->pod, STATIC_HASH);
	assert_true(cgroups__matches(cg, 20, "shop/checkout-7d9f8b6c4d-x2x8q"));
	assert_false(cgroups__matches(cg, 21, "shop/checkout-7d9f8b6c4d-x2x8q"));
	assert_false(cgroups__matches(cg, 20, "shop/checkout"));
	assert_true(cgroups__matches(cg, 21, "kube-system/etcd-node-1"));
	/* a path still reads as one */
	assert_true(cgroups__matches(cg, 20, "/kubepods.slice"));
	cgroups__free(cg);
	fake_proc_remove(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_proc_cgroup_v2_line),
		cmocka_unit_test(test_moved_process_is_read_again_at_once),
		cmocka_unit_test(test_mountinfo_finds_cgroup2),
		cmocka_unit_test(test_units_containers_and_pods),
		cmocka_unit_test(test_filters),
		cmocka_unit_test(test_table_groups_and_keeps_exited),
		cmocka_unit_test(test_pod_lists),
		cmocka_unit_test(test_table_names_pods),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
