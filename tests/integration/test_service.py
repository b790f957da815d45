"""lockscoped as a systemd service: the units verify, and the daemon speaks the
sd_notify protocol to a NOTIFY_SOCKET this test plays (READY=1 only once it serves,
STATUS= phases, WATCHDOG=1 from its main loop, STOPPING=1 on SIGTERM)."""
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import BUILD, LOCKSCOPED, ROOT, Daemon, Workload, require_bpf, require_tool


def systemd_verify(unit_text, name="lockscoped.service"):
    require_tool("systemd-analyze")
    d = tempfile.mkdtemp(prefix="lockscope-unit-")
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(unit_text)
    return subprocess.run(["systemd-analyze", "verify", "--man=no", path], capture_output=True,
                          text=True, timeout=60)


def built_unit():
    with open(os.path.join(BUILD, "lockscoped.service")) as f:
        # the unit names the installed path; verify checks the binary exists
        return re.sub(r"^ExecStart=\S+", f"ExecStart={LOCKSCOPED}", f.read(), flags=re.M)


def test_unit_verifies():
    unit = built_unit()
    r = systemd_verify(unit)
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    for key in ("Type=notify", "WatchdogSec=", "RuntimeDirectory=lockscope", "NoNewPrivileges=yes",
                "ProtectSystem=strict", "ProtectHome=read-only", "PrivateTmp=yes",
                "RestrictAddressFamilies=", "CapabilityBoundingSet=CAP_BPF CAP_PERFMON", "MemoryMax=",
                "CPUQuota="):
        assert key in unit
    # the validator is real: a misspelt key and a missing binary are both reported
    r = systemd_verify(unit.replace("WatchdogSec=", "WatchdogSecs="))
    assert "Unknown key 'WatchdogSecs'" in r.stderr
    r = systemd_verify(unit.replace(LOCKSCOPED, "/nonexistent/lockscoped"))
    assert r.returncode != 0 and "not executable" in r.stderr


def test_sysusers_creates_the_group():
    require_tool("systemd-sysusers")
    root = tempfile.mkdtemp(prefix="lockscope-sysroot-")
    os.makedirs(os.path.join(root, "etc"))
    # an empty root: the group cannot exist there yet, so the file must create it
    r = subprocess.run(["systemd-sysusers", f"--root={root}", "--dry-run",
                        os.path.join(ROOT, "deploy", "systemd", "lockscope.sysusers")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Creating group 'lockscope'" in r.stdout + r.stderr


class NotifySocket:
    """The service manager's side of sd_notify: a datagram socket collecting messages."""

    def __init__(self, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"lockscope-notify-{os.getpid()}-{time.monotonic_ns()}"
            self.sock.bind("\0" + name)
            self.addr = "@" + name
        else:
            self.addr = os.path.join(tempfile.mkdtemp(prefix="lockscope-notify-"), "notify")
            self.sock.bind(self.addr)
        self.messages = []

    def next(self, timeout):
        self.sock.settimeout(timeout)
        try:
            msg = self.sock.recv(4096).decode()
        except socket.timeout:
            return None
        fields = dict(line.split("=", 1) for line in msg.splitlines() if "=" in line)
        self.messages.append(fields)
        return fields

    def wait_for(self, key, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self.next(deadline - time.monotonic())
            if m and key in m:
                return m
        raise AssertionError(f"no {key}= within {timeout} s; got {self.messages}")


def start_notified(env_extra, abstract=False):
    ns = NotifySocket(abstract)
    tmp = tempfile.mkdtemp(prefix="lockscope-test-")
    sock = os.path.join(tmp, "ls.sock")
    log = open(os.path.join(tmp, "daemon.log"), "w+")
    env = dict(os.environ, NOTIFY_SOCKET=ns.addr, **env_extra)
    proc = subprocess.Popen([LOCKSCOPED, "--socket", sock], stdout=log, stderr=log, env=env)
    return ns, Daemon(sock, proc, log)


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_sd_notify_ready_watchdog_stopping(abstract):
    require_bpf()
    ns, d = start_notified({"WATCHDOG_USEC": "400000"}, abstract)
    try:
        first = ns.next(30)
        assert first and "loading" in first.get("STATUS", ""), ns.messages
        ready = ns.wait_for("READY")
        assert ready["READY"] == "1" and d.sock in ready["STATUS"]
        # READY means serving: the socket answers at once
        assert d.call({"cmd": "status"})["cmd"] == "status"
        # half of WATCHDOG_USEC: at least 3 pings in a second, from the running main loop
        t0, pings = time.monotonic(), 0
        while time.monotonic() - t0 < 1.0:
            m = ns.next(1.0)
            pings += bool(m and m.get("WATCHDOG") == "1")
        assert pings >= 3, ns.messages
        d.proc.send_signal(signal.SIGTERM)
        stopping = ns.wait_for("STOPPING")
        assert stopping["STOPPING"] == "1"
        assert d.proc.wait(timeout=30) == 0
    finally:
        if d.proc.poll() is None:
            d.proc.kill()


def test_sd_notify_watchdog_for_another_pid_and_bad_socket():
    require_bpf()
    # WATCHDOG_PID names someone else: the watchdog is not ours to feed
    ns, d = start_notified({"WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"})
    try:
        ns.wait_for("READY")
        end = time.monotonic() + 0.6
        while time.monotonic() < end:
            m = ns.next(0.6)
            assert not (m and "WATCHDOG" in m), ns.messages
    finally:
        d.proc.send_signal(signal.SIGTERM)
        assert d.proc.wait(timeout=30) == 0
    # a relative NOTIFY_SOCKET is refused in one line, before anything is loaded
    p = subprocess.run([LOCKSCOPED, "--socket", "/tmp/lockscope-never.sock"], capture_output=True,
                       text=True, timeout=30, env=dict(os.environ, NOTIFY_SOCKET="relative/path"))
    assert p.returncode != 0
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "NOTIFY_SOCKET" in lines[0], p.stderr


def test_capability_bounding_set_is_enough():
    """The daemon, limited to the unit's CapabilityBoundingSet, loads and attaches every
    program it attaches as full root: the set in the unit is what it needs."""
    require_bpf()
    require_tool("setpriv")
    caps = re.search(r"^CapabilityBoundingSet=(.*)$", built_unit(), re.M).group(1).split()
    bounding = "-all," + ",".join("+" + c.lower().removeprefix("cap_") for c in caps)
    tmp = tempfile.mkdtemp(prefix="lockscope-caps-")
    sock = os.path.join(tmp, "ls.sock")
    log = open(os.path.join(tmp, "daemon.log"), "w+")
    ns = NotifySocket()
    proc = subprocess.Popen(["setpriv", f"--bounding-set={bounding}", "--inh-caps=-all", LOCKSCOPED,
                             "--socket", sock], stdout=log, stderr=log,
                            env=dict(os.environ, NOTIFY_SOCKET=ns.addr))
    d = Daemon(sock, proc, log)
    try:
        ns.wait_for("READY")
        st = d.call({"cmd": "status"})
        attached = {p["name"] for p in st["programs"] if p["attached"] or p["on_demand"]}
        print(bounding, sorted(attached))
        # the variants of a kernel with kfuncs (this one's): owner stacks, plain loads
        for prog in ("contention_begin_btf_owner_stack", "contention_end_btf", "sched_switch_direct",
                     "sched_waking_direct", "hold_sample", "spin_sample"):
            assert prog in attached, (prog, attached)
        assert st["degraded"] == [], st["degraded"]
        # the on-demand ones attach under the same set once needed: a contended mutex
        w = Workload("mutex_server", "--until", "2000")
        w.go()
        w.wait()
        for _ in range(50):
            now = {p["name"] for p in d.call({"cmd": "status"})["programs"] if p["attached"]}
            if {"sched_waking_direct", "hold_sample"} <= now:
                break
            time.sleep(0.1)
        assert {"sched_waking_direct", "hold_sample"} <= now, now
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
