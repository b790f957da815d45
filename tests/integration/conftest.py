"""Fixtures for tests that run the real daemon and CLI against real BPF.

A test that needs something the kernel or machine lacks calls require_*(); it skips with
the reason, except under CI=true (or LOCKSCOPE_REQUIRE_BPF=1), where the same skip fails:
CI runs on a kernel that has everything, so a skip there would hide a regression.
"""
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import jsonschema
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("OUTPUT", os.path.join(ROOT, "build")))
LOCKSCOPED = os.path.join(BUILD, "lockscoped")
# recorded answers and fixtures the tests read (tests/data)
DATA_DIR = os.path.join(ROOT, "tests", "data")
LOCKSCOPE = os.path.join(BUILD, "lockscope")
WORKLOADS = os.path.join(BUILD, "workloads")
TRACEFS = "/sys/kernel/tracing"
# how often a starting daemon is asked whether it serves: it takes ~0.6 s, and the suite
# starts ~190 (asked every 0.1 s, each start waited 0.05 s longer on average)
START_POLL_S = 0.02


# The machine's other work (in CI, a parallel build beside the tests) must not change what a
# workload makes: the tests and everything they start (the daemon, the workloads, perf) run
# at a CPU weight 28x a normal task's (nice -15, inherited), so that the load gets the
# CPUs the tests leave. Counts are compared within one run; this keeps the conditions the
# rule tests build (short waits, long waits, spinlock contention, which needs two of a
# workload's threads on CPUs at once) what they were built to be. With autogroup (Debian's
# kernels), a task's nice ranks it only within its session; what ranks the session against
# another one (a build started from another shell) is the session's autogroup nice, which
# is set too (sched(7), "The autogroup feature").
TEST_NICE = -15
AUTOGROUP = "/proc/self/autogroup"
if os.geteuid() == 0:
    os.setpriority(os.PRIO_PROCESS, 0, TEST_NICE)
    def _autogroup_nice(nice):
        with open(AUTOGROUP, "w") as f:
            f.write(str(nice))
    # "/autogroup-318 nice 0", or nothing when the task is in no autogroup (a task group of
    # its own, e.g. a cgroup with the cpu controller, or init's session): then nice alone
    # ranks it. The shell's session gets its own nice back at exit.
    try:
        with open(AUTOGROUP) as f:
            _ag = f.read().split()
    except FileNotFoundError:  # a kernel without CONFIG_SCHED_AUTOGROUP
        _ag = []
    if _ag:
        atexit.register(_autogroup_nice, int(_ag[-1]))
        _autogroup_nice(TEST_NICE)

SCHEMA_BASE = "https://lockscope.dev/schemas/"


def _schemas():
    """Every published schema by its $id: they refer to each other (the report's rows)."""
    store = {}
    for name in sorted(os.listdir(os.path.join(ROOT, "schemas"))):
        with open(os.path.join(ROOT, "schemas", name)) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
        store[schema["$id"]] = schema
    return store


SCHEMAS = _schemas()


def load_schema(name):
    schema = SCHEMAS[SCHEMA_BASE + name]
    resolver = jsonschema.RefResolver.from_schema(schema, store=SCHEMAS)
    return jsonschema.Draft202012Validator(schema, resolver=resolver)


REQUEST = load_schema("request.schema.json")
RESPONSE = load_schema("response.schema.json")
REPORT = load_schema("report.schema.json")


def check_response(resp):
    """Every response the tests see must match the published schema."""
    RESPONSE.validate(resp)
    return resp


def must_not_skip():
    return os.environ.get("CI") == "true" or os.environ.get("LOCKSCOPE_REQUIRE_BPF") == "1"


def skip_or_fail(reason):
    if must_not_skip():
        pytest.fail(f"required under CI but unavailable: {reason}")
    pytest.skip(reason)


def ensure_tracefs():
    """tp and perf need tracefs; mount it where a minimal system has not."""
    if os.path.exists(os.path.join(TRACEFS, "events")):
        return True
    subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return os.path.exists(os.path.join(TRACEFS, "events"))


def require_bpf():
    if os.geteuid() != 0:
        skip_or_fail("needs root to load BPF programs")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        skip_or_fail("kernel has no BTF (/sys/kernel/btf/vmlinux)")
    if not ensure_tracefs() or not os.path.exists(os.path.join(TRACEFS, "events/lock/contention_begin")):
        skip_or_fail("kernel has no lock:contention_begin tracepoint (Linux 5.19+)")


def wait_for(what, fn, timeout=30):
    """fn()'s first true answer, asked every 0.2 s; fails naming @what after @timeout s."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}")


# Work some tests need that the machine's other resources can do while the suite runs:
# started before the first test that is not quiet_host (their threads wait on futexes and
# kernel locks like any program's, and those tests count waits host-wide), in a session
# and autogroup of their own at the lowest priority, so that they take only the CPU time
# the tests leave; the tests that need them wait for them.
#
# Parca, for test_parca.py: with LOCKSCOPE_PARCA_BUILD=1 (`make test` in CI, or with
# LOCKSCOPE_TEST_PARCA=1) a missing binary is built (its Go compile, ~6 minutes on 2 cores).
# The kernel matrix, for test_kernels.py: its Debian kernels downloaded (~7 s each here, apt
# and xz) and booted under qemu (~85 s of emulation; nothing of it touches the host's BPF).
# Both run beside the other tests at the lowest priority, and the tests that wait for them
# run last.
PARCA = os.environ.get("LOCKSCOPE_PARCA", os.path.join(ROOT, "build", "parca", "parca"))
PARCA_TESTS = "test_parca.py"
PARCA_BUILD_TIMEOUT = 1800
KERNEL_TESTS = "test_kernels.py"
KERNEL_MATRIX = ("6.1:amd64", "6.1:cloud-amd64", "6.1:rt-amd64")
KERNEL_MATRIX_TIMEOUT = 1800	# three boots of 600 s at most each (matrix.sh)
_background = {}	# name: (process, log) once started
_background_wanted = {}	# name: command, to start before the first test that is not quiet_host


def _lowest_priority():
    os.setpriority(os.PRIO_PROCESS, 0, 19)
    try:
        with open(AUTOGROUP, "w") as f:
            f.write("19")
    except OSError:  # no autogroup: nice alone ranks it
        pass


def _quiet(item):
    return item.get_closest_marker("quiet_host") is not None


def pytest_collection_modifyitems(session, config, items):
    """quiet_host tests first, the tests that wait for background work last; what to start
    beside them."""
    late = [i for i in items if i.path.name in (KERNEL_TESTS, PARCA_TESTS)]
    rest = [i for i in items if i.path.name not in (KERNEL_TESTS, PARCA_TESTS)]
    items[:] = [i for i in rest if _quiet(i)] + [i for i in rest if not _quiet(i)] + late
    # make's own rule says whether the binary is older than its sources (then a no-op)
    if any(i.path.name == PARCA_TESTS for i in items) and os.environ.get("LOCKSCOPE_PARCA_BUILD") == "1":
        _background_wanted["parca"] = ["make", "-s", "-C", ROOT, "parca"]
    if any(i.path.name == KERNEL_TESTS for i in items) and os.geteuid() == 0 and \
            shutil.which("apt-get") and shutil.which("qemu-system-x86_64"):
        _background_wanted["kernels"] = [os.path.join(ROOT, "tests/kernels/matrix.sh"), *KERNEL_MATRIX]


def pytest_runtest_setup(item):
    """The background work starts before the first test that is not quiet_host."""
    if not _background_wanted or _quiet(item):
        return
    for name, cmd in _background_wanted.items():
        log_path = os.path.join(BUILD, f"background-{name}.log")
        os.makedirs(BUILD, exist_ok=True)
        log = open(log_path, "w+")
        _background[name] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                              env=dict(os.environ, OUTPUT=BUILD), preexec_fn=_lowest_priority), log)
    _background_wanted.clear()


def background_done(name, timeout, check=True):
    """Waits for the background work @name, if it was started: None if it was not, else
    its exit status and output. With @check, a failure fails the test with its log's end."""
    if name not in _background:
        return None
    proc, log = _background.pop(name)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        rc = proc.wait()
    log.seek(0)
    out = log.read()
    if check and rc != 0:
        raise AssertionError(f"{name} in the background failed ({rc}):\n{out[-3000:]}")
    return rc, out


def parca_binary():
    """The Parca server's path: waits for the build started beside the tests, if any."""
    background_done("parca", PARCA_BUILD_TIMEOUT)
    if not os.access(PARCA, os.X_OK):
        skip_or_fail(f"no Parca at {PARCA}: build it with `make parca` (or LOCKSCOPE_TEST_PARCA=1 make test)")
    return PARCA


def require_tool(name):
    if not shutil.which(name):
        skip_or_fail(f"{name} is not installed (make deps)")


class Daemon:
    def __init__(self, sock, proc, log):
        self.sock, self.proc, self.log = sock, proc, log

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(self.sock)
        return s

    def call(self, req, conn=None, check=True):
        """@req's answer, checked against the schemas unless @check is false (jsonschema's
        resolver is not thread-safe: clients in threads check theirs afterwards)."""
        own = conn is None
        conn = conn or self.connect()
        try:
            line = req if isinstance(req, (str, bytes)) else json.dumps(req)
            if isinstance(line, str):
                line = line.encode()
            conn.sendall(line + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = conn.recv(1 << 20)
                if not chunk:
                    raise ConnectionError("daemon closed the connection")
                buf += chunk
            return check_response(json.loads(buf)) if check else json.loads(buf)
        finally:
            if own:
                conn.close()

    def cli(self, *args, check=True):
        return run_cli("--socket", self.sock, *args, check=check)

    def cli_json(self, *args):
        return check_response(json.loads(self.cli(*args, "--json").stdout))


_shared_copies = {}


def for_other_users(path):
    """@path copied where any user may run it. Tests that switch to other users (nobody,
    a group member) cannot reach a build in a 0700 home directory, Debian 12's default."""
    if path not in _shared_copies:
        d = tempfile.mkdtemp(prefix="lockscope-bin-")
        os.chmod(d, 0o755)
        atexit.register(shutil.rmtree, d, True)
        _shared_copies[path] = shutil.copy2(path, d)
        os.chmod(_shared_copies[path], 0o755)
    return _shared_copies[path]


def run_cli(*args, check=True, **kw):
    p = subprocess.run([LOCKSCOPE, *args], capture_output=True, text=True, timeout=120, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"lockscope {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p


def bpf_objects_of(pid):
    """The ids of the programs, maps and links process @pid holds: its descriptors' fdinfo
    names them (prog_id, map_id, link_id)."""
    held = {"prog": set(), "map": set(), "link": set()}
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key in ("prog_id", "map_id", "link_id"):
                        held[key[:-3]].add(int(value))
        except FileNotFoundError:
            pass
    return held


def start_daemon(extra_args=(), sock=None, wrap=(), env=None):
    """lockscoped on a private socket; @wrap runs it inside another command (a namespace)."""
    tmp = tempfile.mkdtemp(prefix="lockscope-test-")
    sock = sock or os.path.join(tmp, "ls.sock")
    log = open(os.path.join(tmp, "daemon.log"), "w+")
    proc = subprocess.Popen([*wrap, LOCKSCOPED, "--socket", sock, *extra_args], stdout=log, stderr=log,
                            env=env)
    d = Daemon(sock, proc, log)
    deadline = time.time() + 30
    try:
        while time.time() < deadline:
            if proc.poll() is not None:
                log.seek(0)
                raise AssertionError(f"lockscoped exited {proc.returncode}: {log.read()}")
            try:
                if d.call({"cmd": "status"}).get("cmd") == "status":
                    return d
            except OSError:
                time.sleep(START_POLL_S)
        raise AssertionError("lockscoped did not answer within 30 s")
    except BaseException:
        # whatever went wrong (a status outside the schema too), no daemon is left behind
        proc.kill()
        proc.wait()
        raise


def stop_daemon(d):
    if d.proc.poll() is None:
        d.proc.send_signal(signal.SIGTERM)
        d.proc.wait(timeout=30)
    d.log.seek(0)
    return d.proc.returncode, d.log.read()


def running_daemon(*args):
    """lockscoped with @args, for a fixture to yield from: it must stop cleanly on SIGTERM."""
    require_bpf()
    d = start_daemon(list(args))
    yield d
    rc, log = stop_daemon(d)
    assert rc == 0, f"lockscoped exited {rc} on SIGTERM: {log}"


@pytest.fixture
def daemon():
    yield from running_daemon()


class Workload:
    """A workload started with --wait: it prints its pid and waits for a line on stdin."""

    def __init__(self, name, *args, cgroup=None):
        """@cgroup: a cgroup v2 directory it starts in (entered before exec, as systemd-run
        and container runtimes do: its first wait is already there)."""
        cmd = [os.path.join(WORKLOADS, name), "--wait", *args]
        if cgroup:
            cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup, *cmd]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        first = self.proc.stdout.readline().split()
        assert first and first[0] == "pid", f"{name} did not start: {first}"
        self.pid = int(first[1])

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def wait(self, timeout=120):
        out = self.proc.stdout.read()
        assert self.proc.wait(timeout=timeout) == 0
        return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def fast_sampler():
    """The spin sampler at 907 Hz, as `perf record -F 907` would: ~2000 samples per thread
    in the run, so the share's sampling error (~0.01) is well inside the tolerance."""
    yield from running_daemon("--spin-freq", "907")
