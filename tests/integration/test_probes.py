"""Feature probes and degraded mode, on this kernel with real privilege limits.

`lockscoped --check` prints each feature found or missing and exits; a missing feature
turns off only what needs it (one line each in the log and in status); `--strict` makes it
fatal. The missing features here are real: an unprivileged user's bpf(), and the kallsyms
addresses and tracefs that a user holding only CAP_BPF and CAP_PERFMON cannot read. The
kernel matrix (test_kernels.py) adds a kernel without bpf_task_from_pid.
"""
import json
import grp
import os
import subprocess
import tempfile
import time

from conftest import (LOCKSCOPE, LOCKSCOPED, Daemon, check_response, for_other_users, require_bpf,
                      require_tool, stop_daemon)

FEATURES = ["bpf", "btf", "lock_tracepoints", "tp_btf", "task_from_pid", "perf_event",
            "syscall_tracepoints", "task_iter", "kallsyms"]
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
# what the unit grants, less what lets it read kallsyms addresses and tracefs as root does
CAPS = "+bpf,+perfmon,+sys_ptrace,+dac_read_search"
TRACING = NOBODY + [f"--inh-caps={CAPS}", f"--ambient-caps={CAPS}"]


def check(*args, prefix=()):
    daemon = for_other_users(LOCKSCOPED) if prefix else LOCKSCOPED
    p = subprocess.run([*prefix, daemon, "--check", *args], capture_output=True, text=True, timeout=60)
    table = {line.split()[0]: line for line in p.stdout.splitlines()[:-1]}
    return p, table


def test_check_as_root_finds_everything():
    require_bpf()
    p, table = check()
    print(p.stdout)
    assert p.returncode == 0
    assert list(table) == FEATURES
    assert all(line.split()[1] == "ok" for line in table.values())
    assert p.stdout.splitlines()[-1] == "lockscoped can run with every feature"
    assert check("--strict")[0].returncode == 0


def test_tracefs_is_mounted_when_nothing_mounted_it():
    """A system not booted by systemd may leave tracefs unmounted; as perf does, the daemon
    mounts it (in a mount namespace of the test's own here) and the syscall tracepoints that
    precise scans attach by their tracefs ids are found."""
    require_bpf()
    require_tool("unshare")
    script = (f"mount --make-rprivate / && umount -R /sys/kernel/tracing; "
              f"test -e /sys/kernel/tracing/events && exit 3; {LOCKSCOPED} --check")
    p = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    print(p.stdout, p.stderr)
    assert p.returncode == 0
    table = {line.split()[0]: line for line in p.stdout.splitlines()[:-1]}
    assert table["syscall_tracepoints"].split()[1] == "ok"


def test_check_without_privileges():
    require_bpf()
    require_tool("setpriv")
    p, table = check(prefix=NOBODY)
    print(p.stdout)
    assert p.returncode == 1
    assert table["bpf"].split()[1] == "missing"
    assert "run as root or with CAP_BPF and CAP_PERFMON; off: everything" in table["bpf"]
    assert p.stdout.splitlines()[-1] == "lockscoped cannot run here: 1 required feature(s) missing"


def test_degraded_mode_with_tracing_capabilities_only():
    require_bpf()
    require_tool("setpriv")
    p, table = check(prefix=TRACING)
    print(p.stdout)
    assert p.returncode == 0
    missing = sorted(k for k, line in table.items() if line.split()[1] == "missing")
    assert missing == ["kallsyms", "syscall_tracepoints"], p.stdout
    assert "off: kernel symbols" in table["kallsyms"]
    assert "off: precise scans" in table["syscall_tracepoints"]
    assert check("--strict", prefix=TRACING)[0].returncode == 1

    tmp = tempfile.mkdtemp(prefix="lockscope-test-")
    os.chown(tmp, 65534, 65534)
    sock = os.path.join(tmp, "ls.sock")
    # --strict: refused, each missing feature named in one line, nothing served
    p = subprocess.run([*TRACING, for_other_users(LOCKSCOPED), "--strict", "--socket", sock], capture_output=True, text=True,
                       timeout=60)
    print(p.stderr)
    assert p.returncode == 1 and not os.path.exists(sock)
    assert "kallsyms missing: /proc/kallsyms shows no addresses" in p.stderr
    assert "refused by --strict" in p.stderr

    # without it: runs, with what needs the missing features off, and says so
    log = open(os.path.join(tmp, "daemon.log"), "w+")
    proc = subprocess.Popen([*TRACING, for_other_users(LOCKSCOPED), "--socket", sock], stdout=log, stderr=log)
    d = Daemon(sock, proc, log)
    try:
        deadline = time.time() + 30
        while not os.path.exists(sock) and time.time() < deadline:
            assert proc.poll() is None
            time.sleep(0.1)
        time.sleep(0.3)
        st = d.call({"cmd": "status"})
        probes = {p["name"]: p for p in st["probes"]}
        assert not probes["kallsyms"]["ok"] and probes["kallsyms"]["disables"].startswith("kernel symbols")
        assert not probes["syscall_tracepoints"]["ok"]
        assert st["features"]["kernel_symbols"] is False and st["features"]["precise_futex"] is False
        assert st["self"]["kernel_symbols"] == 0
        # everything else attached
        assert st["degraded"] == [] and all(p["attached"] or p["on_demand"] for p in st["programs"])
        text = subprocess.run([LOCKSCOPE, "status", "--socket", sock], capture_output=True, text=True).stdout
        assert "missing: kallsyms: /proc/kallsyms shows no addresses" in text, text
        # what needs a missing feature says so in one line; the daemon serves on
        resp = subprocess.run([LOCKSCOPE, "scan", "--precise", "-p", str(os.getpid()), "-d", "100ms",
                               "--socket", sock], capture_output=True, text=True, timeout=60)
        assert resp.returncode == 1 and "precise mode needs the syscalls:sys_enter_futex" in resp.stderr
        assert len(resp.stderr.strip().splitlines()) == 1
        assert check_response(d.call({"cmd": "top", "limit": 1}))["cmd"] == "top"
    finally:
        rc, out = stop_daemon(d)
    print(out)
    assert rc == 0
    assert "kallsyms missing: /proc/kallsyms shows no addresses (kernel.kptr_restrict; CAP_SYSLOG); " \
           "off: kernel symbols" in out
    assert "syscall_tracepoints missing" in out
    # the socket's group: none here, or one it may not give the socket to (not a member,
    # no CAP_CHOWN); either way it says so and serves its own user
    try:
        grp.getgrnam("lockscope")
        assert "cannot give the socket to group lockscope (not a member, no CAP_CHOWN): only uid 65534" in out, out
    except KeyError:
        assert "no group lockscope: only root may query" in out, out
