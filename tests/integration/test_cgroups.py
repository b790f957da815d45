"""Cgroup attribution end to end: seed 004's server run inside a cgroup of its own, found
there by `top --by unit|cgroup`, `-G` (top, threads, spin, report), the JSON rows, threads
and the Prometheus export, on both cgroup layouts (pure v2, and hybrid with v2 at /sys/fs/cgroup/unified)."""
import os
import re
import time

import pytest

from conftest import Workload, require_bpf, start_daemon, stop_daemon, wait_for

# The layouts, each made for the daemon alone in a mount namespace of its own, so that
# both are tested on any host: pure v2 (cgroup2 at /sys/fs/cgroup), and hybrid (a tmpfs
# there, v1 controllers beside, v2 at /sys/fs/cgroup/unified: this development machine's).
LAYOUTS = {
    "v2": ("/sys/fs/cgroup", "mount -t cgroup2 none /sys/fs/cgroup"),
    "hybrid": ("/sys/fs/cgroup/unified",
               "mount -t tmpfs tmpfs /sys/fs/cgroup && mkdir /sys/fs/cgroup/unified && "
               "mount -t cgroup2 none /sys/fs/cgroup/unified"),
}
# futex sleeps each server makes: enough that a lost or misattributed run would show
MIN_SLEEPS = 2000


def host_cgroup2():
    """Where this host mounts cgroup v2 (the test makes its cgroups there)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[fields.index("-") + 1] == "cgroup2":
                return fields[4]
    pytest.fail("no cgroup v2 mount on this host: lockscope's attribution needs one")


class Cgroup:
    """A cgroup made by hand with a systemd-like name (no systemd here to make a scope)."""

    def __init__(self, rel):
        self.rel = rel
        self.dir = host_cgroup2() + rel
        os.makedirs(self.dir, exist_ok=True)

    def remove(self):
        # innermost first; a cgroup goes once its processes have exited
        path = self.dir
        while path != host_cgroup2():
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except OSError:
                    time.sleep(0.05)
            path = os.path.dirname(path)


@pytest.fixture(params=sorted(LAYOUTS))
def layout_daemon(request):
    require_bpf()
    mount, setup = LAYOUTS[request.param]
    d = start_daemon(wrap=("unshare", "--mount", "--propagation", "private", "sh", "-c",
                           f"{setup} && exec \"$@\"", "sh"))
    d.mount = mount
    yield d
    rc, log = stop_daemon(d)
    assert rc == 0, log


def server_in(cg, *args):
    w = Workload("mutex_server", "--until", str(MIN_SLEEPS), "--workers", "4", *args, cgroup=cg.dir)
    w.go()
    return w


def user_rows(d, *args):
    return d.cli_json("top", "-w", "all", "--kind", "user", *args)["rows"]


def test_workloads_in_cgroups_are_found_there(layout_daemon):
    d = layout_daemon
    a = Cgroup("/lockscope-test.slice/seed004-a.service")
    b = Cgroup("/lockscope-test.slice/seed004-b.scope")
    try:
        wa, wb = server_in(a), server_in(b)
        ra, rb = wa.wait(), wb.wait()
        time.sleep(0.5)  # one drain of the rings
        assert d.call({"cmd": "status"})["cgroups"]["mount"] == d.mount

        # each process's rows carry its cgroup, id as the kernel numbers it
        for w, cg, unit in ((wa, a, "seed004-a.service"), (wb, b, "seed004-b.scope")):
            rows = user_rows(d, "-p", str(w.pid), "-t")
            assert rows and all(r["cgroup"] == {"id": os.stat(cg.dir).st_ino, "path": cg.rel, "unit": unit,
                                                "container": None, "pod": None, "namespace": None,
                                                "pod_name": None} for r in rows), rows
        per_pid = {w.pid: sum(r["contended"] for r in user_rows(d, "-p", str(w.pid), "-t")) for w in (wa, wb)}
        print(per_pid, ra["sleeps"], rb["sleeps"])
        assert min(per_pid.values()) >= MIN_SLEEPS * 0.9

        # --by unit: one row per unit, holding exactly its process's waits
        by_unit = {r["cgroup"]["unit"]: r for r in user_rows(d, "--by", "unit") if r["cgroup"]}
        assert by_unit["seed004-a.service"]["contended"] == per_pid[wa.pid]
        assert by_unit["seed004-b.scope"]["contended"] == per_pid[wb.pid]
        assert by_unit["seed004-a.service"]["cgroup"]["path"] == a.rel
        # --by cgroup the same, keyed by path
        by_path = {r["cgroup"]["path"]: r for r in user_rows(d, "--by", "cgroup") if r["cgroup"]}
        assert by_path[b.rel]["contended"] == per_pid[wb.pid]

        # -G: by unit, by path (a slice takes both), by its parent path's name; nothing else
        for g, pids in (("seed004-a.service", {wa.pid}), (a.rel, {wa.pid}), ("lockscope-test.slice", {wa.pid, wb.pid}),
                        ("/lockscope-test.slice", {wa.pid, wb.pid}), ("seed004-b.scope", {wb.pid})):
            rows = user_rows(d, "-G", g, "-t")
            assert {r["pid"] for r in rows} == pids, (g, rows)
        assert user_rows(d, "-G", "no-such.service") == []

        # the table shows the unit column
        out = d.cli("top", "-w", "all", "--kind", "user", "--by", "unit").stdout
        assert re.search(r"\bseed004-a\.service\b", out), out

        # threads and the Prometheus export carry it too
        threads = d.cli_json("threads", "-p", str(wa.pid), "-w", "all")["rows"]
        assert threads and all(t["cgroup"]["unit"] == "seed004-a.service" for t in threads)
        # -G keeps threads, spin findings and every part of the report to what it names
        for g, pids in (("seed004-a.service", {wa.pid}), ("lockscope-test.slice", {wa.pid, wb.pid}),
                        ("no-such.service", set())):
            threads = d.cli_json("threads", "-w", "all", "-G", g)["rows"]
            assert {t["pid"] for t in threads} == pids, (g, threads)
            report = d.cli_json("report", "-w", "all", "-G", g)
            assert {t["pid"] for t in report["threads"]["rows"]} == pids, (g, report["threads"])
            assert {r["pid"] for r in report["callers"] if r.get("pid")} <= pids
            for findings in (report["spin"]["findings"], d.cli_json("spin", "-w", "all", "-G", g)["findings"]):
                assert all(f["pid"] in pids for f in findings), (g, findings)
        prom = d.cli("export", "-F", "prometheus", "-w", "all").stdout
        line = [ln for ln in prom.splitlines() if ln.startswith("lockscope_contentions_total{")
                and 'type="futex:mutex"' in ln and 'unit="seed004-b.scope"' in ln]
        assert line and sum(int(ln.rsplit(" ", 1)[1]) for ln in line) == per_pid[wb.pid], line
    finally:
        a.remove()
        b.remove()


def test_a_process_moved_is_found_where_it_went(daemon):
    """A process that waited in one cgroup and is moved to another (what a shell does that
    enters a unit's cgroup and execs the service, or systemd moving a process into a scope)
    is named by its new cgroup as soon as a wait of it there is drained, not at the next
    periodic re-read 10 s later: the kernel side reads each wait-table entry's cgroup id."""
    a = Cgroup("/lockscope-test.slice/seed004-before.service")
    b = Cgroup("/lockscope-test.slice/seed004-after.service")
    try:
        w = Workload("mutex_server", "--seconds", "4", "--workers", "4", cgroup=a.dir)
        w.go()
        units = lambda: {r["cgroup"]["unit"] for r in user_rows(daemon, "-p", str(w.pid), "-t") if r["cgroup"]}
        wait_for("the server's first waits, in its first cgroup", lambda: units() == {"seed004-before.service"})
        with open(os.path.join(b.dir, "cgroup.procs"), "w") as f:
            f.write(str(w.pid))
        res = w.wait()
        assert res["sleeps"] >= MIN_SLEEPS
        # every wait is in by now (a query drains the tables first), its last ones made in b
        assert units() == {"seed004-after.service"}
    finally:
        a.remove()
        b.remove()


def test_bad_cgroup_flags_say_what_to_do(daemon):
    for args, msg in ((("--by", "host"), "invalid --by 'host': unit, cgroup, pod or edge"),
                      (("-G", ""), "invalid -G/--cgroup ''"),
                      (("-t", "--by", "unit"), "-t, -l and --by group rows differently; use one")):
        p = daemon.cli("top", *args, check=False)
        assert p.returncode != 0 and msg in p.stderr, (args, p.stderr)
    p = daemon.cli("spin", "--by", "unit", check=False)
    assert p.returncode != 0 and "--by does not apply to spin (top, threads, waits take it)" in p.stderr, p.stderr
    err = daemon.call({"cmd": "threads", "group": "lock"}, check=False)
    assert "'group' must be one of: thread unit cgroup pod" in err["error"], err
    err = daemon.call({"cmd": "top", "cgroup": 7}, check=False)
    assert "'cgroup' must be a cgroup path" in err["error"]
