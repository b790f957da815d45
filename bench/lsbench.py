"""What the benchmark scripts share: a lockscoped under test, its socket, the workloads."""
import contextlib
import json
import os
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("OUTPUT", os.path.join(ROOT, "build"))
# the daemon measured: this build's, or another's (LOCKSCOPED=path: a build to compare against)
LOCKSCOPED = os.environ.get("LOCKSCOPED", os.path.join(BUILD, "lockscoped"))


def call(sock, req):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(json.dumps(req).encode() + b"\n")
    buf = b""
    while not buf.endswith(b"\n"):
        buf += s.recv(1 << 20)
    s.close()
    return json.loads(buf)


@contextlib.contextmanager
def lockscoped(*args, binary=None):
    """A running daemon with @args (@binary: another build's); yields its socket path once
    it answers. One that exits first, or never answers, stops the measurement with what it
    said: a figure taken without it would be the untraced machine's."""
    binary = binary or LOCKSCOPED
    sock = os.path.join(tempfile.mkdtemp(), "ls.sock")
    err = tempfile.TemporaryFile()
    d = subprocess.Popen([binary, "--socket", sock, *args], stderr=err)
    try:
        for _ in range(300):
            try:
                call(sock, {"cmd": "status"})
                break
            except OSError:
                if d.poll() is not None:
                    break
                time.sleep(0.05)
        else:
            raise RuntimeError(f"{binary} {' '.join(args)}: no answer on {sock} in 15 s")
        if d.poll() is not None:
            err.seek(0)
            said = err.read().decode(errors="replace").strip().splitlines()
            raise RuntimeError(f"{binary} {' '.join(args)} exited at start ({d.returncode})"
                               + (f": {' '.join(said[-2:])}" if said else ""))
        yield sock
    finally:
        if d.poll() is None:
            d.terminate()
        d.wait()
        err.close()


def workload(name, *args, **kw):
    """Runs a workload to completion; returns its JSON summary (the last line)."""
    out = subprocess.run([os.path.join(BUILD, "workloads", name), *args],
                         capture_output=True, text=True, check=True, **kw).stdout
    return json.loads(out.strip().splitlines()[-1])


@contextlib.contextmanager
def bpf_stats():
    """kernel.bpf_stats_enabled=1 for the block: per-program run_time_ns and run_cnt."""
    path = "/proc/sys/kernel/bpf_stats_enabled"
    with open(path) as f:
        old = f.read().strip()
    with open(path, "w") as f:
        f.write("1")
    try:
        yield
    finally:
        with open(path, "w") as f:
            f.write(old)


def cpu_seconds(pid):
    """user + system CPU time of process @pid so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid, field="VmRSS"):
    """@pid's resident set now (VmRSS), or its peak since it started (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field + ":"))


def pingpong(seconds):
    """pingpong's summary after @seconds of round trips between its two threads alone (no
    spinner: each round trip is two switches), timed by the workload from its first round
    to its last: rounds, seconds, per_s. It parks its threads when done."""
    p = subprocess.Popen([os.path.join(BUILD, "workloads", "pingpong"), "--seconds", str(seconds), "--no-spinner"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    summary = json.loads(p.stdout.readline())  # the run is over, the threads are parked
    p.stdin.write("exit\n")
    p.stdin.flush()
    p.wait()
    return summary
