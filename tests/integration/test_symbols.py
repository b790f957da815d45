"""Names for frames in modules the machine has no symbols for.

glibc's internal functions (__lll_lock_wait, start_thread) are named only by its separate
debug file (Debian's libc6-dbg). These tests hide the machine's debug files from the
daemon (a private mount namespace with an empty /usr/lib/debug), then check that
- `status` names the module left without symbols and says what to install;
- with DEBUGINFOD_URLS, the daemon fetches the debug file from a real debuginfod server
  (elfutils', serving this machine's libc6-dbg files) and names the frames.
The server and the daemon share a private network namespace, whose only interface is
loopback: nothing listens outside the test.
"""
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import Workload, require_bpf, require_tool, skip_or_fail, start_daemon, stop_daemon

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
DEBUG_DIR = "/usr/lib/debug"
# A private mount namespace where the machine's debug files are not: an empty tmpfs over
# /usr/lib/debug (/lib/debug is the same directory on merged-/usr systems). ip netns exec
# remounts /sys, so tracefs is mounted again for the syscall probes.
HIDE_DEBUG = ["unshare", "-m", "sh", "-c",
              # the directory exists only where a -dbg package was installed
              f"mount --make-rprivate / && mkdir -p {DEBUG_DIR} && mount -t tmpfs none {DEBUG_DIR} && "
              "(mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing) && "
              'exec "$0" "$@"']
PORT = 8002


def libc_build_id():
    out = subprocess.run(["readelf", "-n", LIBC], capture_output=True, text=True, check=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


def require_libc_debug_file(build_id):
    path = f"{DEBUG_DIR}/.build-id/{build_id[:2]}/{build_id[2:]}.debug"
    if not os.path.exists(path):
        skip_or_fail(f"{path} is missing: the debuginfod server needs libc6-dbg's files (make deps)")
    return path


def mutex_waits(d, pid):
    """The server's futex:mutex rows with their stacks, which makes the daemon name them."""
    rows = d.cli_json("top", "-w", "all", "--kind", "user", "-p", str(pid), "--stacks",
                      "--max-stack", "16")["rows"]
    return [r for r in rows if r["type"] == "futex:mutex" and r.get("stack")]


def run_server(d):
    w = Workload("mutex_server", "--seconds", "1", "--workers", "4")
    w.go()
    w.wait()
    deadline = time.time() + 30
    while time.time() < deadline:
        rows = mutex_waits(d, w.pid)
        if rows:
            return w.pid, rows
        time.sleep(0.2)
    raise AssertionError("no futex:mutex wait with a stack within 30 s")


def names(rows):
    return {f["sym"] for r in rows for f in r["stack"] if f["sym"]}


def test_status_names_the_module_without_symbols():
    require_bpf()
    require_tool("unshare")
    build_id = libc_build_id()
    env = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}
    d = start_daemon(wrap=HIDE_DEBUG, env=env)
    try:
        pid, rows = run_server(d)
        assert not any("lll_lock_wait" in n or n == "start_thread" for n in names(rows)), names(rows)
        st = d.call({"cmd": "status"})["self"]["user_symbols"]
        print(st)
        assert st["debuginfod"] is None
        libc = [m for m in st["missing"] if m["module"] == "libc.so.6"]
        assert libc and libc[0]["build_id"] == build_id and libc[0]["unnamed_frames"] > 0
        assert libc[0]["debuginfod"] == "off"
        text = d.cli("status").stdout
        assert "no debug symbols: libc.so.6" in text
        assert "libc6-dbg" in text and "DEBUGINFOD_URLS" in text
    finally:
        rc, log = stop_daemon(d)
        assert rc == 0, log


@pytest.fixture
def debuginfod_netns():
    """A network namespace with only loopback, and elfutils' debuginfod serving libc6-dbg there."""
    require_bpf()
    for tool in ("debuginfod", "debuginfod-find", "ip", "unshare"):
        require_tool(tool)
    build_id = libc_build_id()
    require_libc_debug_file(build_id)
    ns = f"lockscope-dbg-{os.getpid()}"
    tmp = tempfile.mkdtemp(prefix="lockscope-debuginfod-")
    subprocess.run(["ip", "netns", "add", ns], check=True)
    server = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        log = open(os.path.join(tmp, "server.log"), "w")
        server = subprocess.Popen(["ip", "netns", "exec", ns, "debuginfod", "-p", str(PORT),
                                   "-d", os.path.join(tmp, "db.sqlite"), "-F", "-t", "0", "-g", "0",
                                   f"{DEBUG_DIR}/.build-id"], stdout=log, stderr=log)
        url = f"http://127.0.0.1:{PORT}"
        # ready once it serves libc's file; each probe has a cache of its own, as
        # libdebuginfod remembers a miss for ten minutes
        deadline = time.time() + 120
        while True:
            probe = subprocess.run(["ip", "netns", "exec", ns, "env", f"DEBUGINFOD_URLS={url}",
                                    f"DEBUGINFOD_CACHE_PATH={tempfile.mkdtemp(dir=tmp)}",
                                    "debuginfod-find", "debuginfo", build_id], capture_output=True)
            if probe.returncode == 0:
                break
            assert server.poll() is None, open(os.path.join(tmp, "server.log")).read()
            assert time.time() < deadline, "debuginfod did not index libc6-dbg's files within 120 s"
            time.sleep(0.5)
        yield ns, url, tmp
    finally:
        if server:
            server.terminate()
            server.wait(timeout=30)
        subprocess.run(["ip", "netns", "del", ns])
        shutil.rmtree(tmp, ignore_errors=True)


def test_debuginfod_names_glibc_internals(debuginfod_netns):
    ns, url, tmp = debuginfod_netns
    cache = os.path.join(tmp, "daemon-cache")
    env = dict(os.environ, DEBUGINFOD_URLS=url)
    d = start_daemon(["--debuginfod-cache", cache], wrap=["ip", "netns", "exec", ns, *HIDE_DEBUG], env=env)
    try:
        pid, rows = run_server(d)
        # the first lookup finds no symbols and asks the server, off the event loop;
        # the frames are named once the file has landed
        deadline = time.time() + 60
        while True:
            got = names(rows)
            if any("__lll_lock_wait" in n for n in got) and "start_thread" in got:
                break
            assert time.time() < deadline, f"glibc's internals still unnamed after 60 s: {got}"
            time.sleep(0.5)
            rows = mutex_waits(d, pid)
        stack = [f["sym"] or "" for f in rows[0]["stack"]]
        print(stack)
        st = d.call({"cmd": "status"})["self"]["user_symbols"]
        assert st["debuginfod"] == url and not [m for m in st["missing"] if m["module"] == "libc.so.6"]
        assert os.path.islink(os.path.join(cache, ".build-id", libc_build_id()[:2],
                                           libc_build_id()[2:] + ".debug"))
    finally:
        rc, log = stop_daemon(d)
        assert rc == 0, log
