"""The benchmark's own pieces, checked without timing anything (make bench measures; make
test never asserts a speed).

- the floor (bench/floor.bpf.c) builds, loads, and stands on exactly the hooks lockscoped
  attaches: a program added to lockscoped without its empty twin fails here
- the bound (bench/bound.bpf.c) does the work it stands for: it times the waits that an
  independent count says happened, or its cost would say less than it claims
- the single-hook floors (floor --lock-begin, --lock-end) attach their one empty program
  and nothing else, and it runs at every event perf counts on that tracepoint; floor
  --waking adds the empty sched_waking program to the default floor's, running likewise;
  floor --samplers attaches the two empty samplers alone, each at lockscoped's rate
- a configuration of one's own (run.py --only --define) runs the daemon it names with its
  options, and one whose daemon cannot start stops the bench with the daemon's words
  rather than measure an untraced machine as traced
- the interleaved runs really take the tracer's programs off and put them back: lockscoped's
  switch program runs at about half the ping-pong's switches, not all nor none; the futex
  server's, the wake storm's and the pipe storm's progress make slices too
"""
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import BUILD, ROOT, WORKLOADS

sys.path.insert(0, os.path.join(ROOT, "bench"))
from lsbench import bpf_stats  # noqa: E402  the bench's own switch for the kernel's program statistics


def test_floor_stands_on_lockscopeds_hooks():
    subprocess.run(["make", "-s", f"OUTPUT={BUILD}", os.path.join(BUILD, "bench", "floor")], cwd=ROOT, check=True)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--check-floor"],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "OUTPUT": BUILD})
    print(r.stdout, r.stderr)
    assert r.returncode == 0 and "the floor's hooks are lockscoped's" in r.stdout


def floor_ask(floor, what):
    """One answer of a running floor: "totals" (the bound's waits) or "stats" (its programs')."""
    floor.stdin.write(what + "\n")
    floor.stdin.flush()
    return json.loads(floor.stdout.readline())


@contextlib.contextmanager
def running_floor(*mode):
    """bench/floor in @mode, built, attached (its "ready" read) until the block ends."""
    subprocess.run(["make", "-s", f"OUTPUT={BUILD}", os.path.join(BUILD, "bench", "floor")], cwd=ROOT, check=True)
    floor = subprocess.Popen([os.path.join(BUILD, "bench", "floor"), *mode], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert floor.stdout.readline().strip() == "ready"
        yield floor
    finally:
        floor.stdin.close()
        floor.wait(timeout=30)


def perf_count(event, argv):
    """perf's count of @event on every CPU while workload @argv (tests/workloads) runs."""
    perf = subprocess.run(["perf", "stat", "-a", "-x,", "-e", event, "--", os.path.join(WORKLOADS, argv[0]),
                           *argv[1:]], capture_output=True, text=True, timeout=120, check=True)
    return int(re.search(r"^(\d+),", perf.stderr, re.M).group(1))


@pytest.mark.quiet_host
def test_bound_times_the_waits_that_happened():
    with running_floor("--bound") as floor:
        before = floor_ask(floor, "totals")
        # kernel locks: perf counts every contention_end on the host while pipe_storm runs
        ends = perf_count("lock:contention_end", ["pipe_storm", "--threads", "4", "--messages", "200000"])
        middle = floor_ask(floor, "totals")
        # futex waits: mutex_server counts its own futex sleeps (getrusage around the lock)
        ms = subprocess.run([os.path.join(WORKLOADS, "mutex_server"), "--workers", "8", "--until", "2000"],
                            capture_output=True, text=True, timeout=120, check=True)
        sleeps = json.loads(ms.stdout)["sleeps"]
        after = floor_ask(floor, "totals")
    klock = middle["klock"][0] - before["klock"][0]
    futex = after["futex"][0] - middle["futex"][0]
    print(f"bound: {klock} kernel-lock waits (perf: {ends} ends), {futex} futex waits (mutex_server: {sleeps} sleeps)")
    # one wait per CPU slot: a mutex that slept and woke on another CPU is not matched (few
    # here); the bound's window holds perf's and a little of the host's waiting beside it
    assert ends > 10000 and abs(klock - ends) <= ends // 100
    # the host's other threads wait on futexes too, a few in a second, and add to the bound's
    # count; a host thread whose tid shares a worker's slot bits (the bound has no fallback
    # hash, lockscope has) can overwrite a worker's slot and take from it (28 of 175 401 once)
    assert sleeps >= 2000 and sleeps - sleeps // 100 <= futex <= sleeps + sleeps // 50
    assert after["futex"][1] > middle["futex"][1] and middle["klock"][1] > before["klock"][1]


@contextlib.contextmanager
def perf_around(event):
    """perf counting @event on every CPU for the block's whole length: yields a dict whose
    "count" is set at its end."""
    out = {}
    outer = subprocess.Popen(["perf", "stat", "-a", "-x,", "-e", event], stderr=subprocess.PIPE, text=True)
    time.sleep(1)  # perf prints nothing when attached; 1 s is ample here (bench/run.py)
    try:
        yield out
    finally:
        outer.send_signal(signal.SIGINT)
        out["count"] = int(re.search(r"^(\d+),", outer.communicate(timeout=30)[1], re.M).group(1))


@pytest.mark.parametrize("mode,tracepoint", [("--lock-begin", "contention_begin"), ("--lock-end", "contention_end")])
def test_single_hook_floor_runs_alone_on_its_hook(mode, tracepoint):
    with running_floor(mode) as floor, bpf_stats():
        # a second perf around the floor's whole window: the host's locking beside the
        # workload's (the kernel matrix's qemu, in CI), counted rather than guessed at
        with perf_around(f"lock:{tracepoint}") as around:
            before = floor_ask(floor, "stats")
            events = perf_count(f"lock:{tracepoint}", ["pipe_storm", "--threads", "4", "--messages", "200000"])
            after = floor_ask(floor, "stats")
    assert [p["hook"] for p in after] == [f"tp_btf/{tracepoint}"]
    runs = after[0]["run_cnt"] - before[0]["run_cnt"]
    skipped = after[0]["recursion_misses"] - before[0]["recursion_misses"]
    print(f"floor {mode}: {runs} runs, {skipped} skipped, perf: {events} lock:{tracepoint} events in the "
          f"workload, {around['count']} around")
    # the floor's window holds the workload's perf count and lies within the outer one's; an
    # event that fires while the program runs on its CPU (an interrupt's) is skipped, and
    # counted (CI once: 11 284 runs against 11 170 events + 1 %, the matrix's qemu beside)
    assert events > 10000 and events <= runs + skipped <= around["count"] and skipped <= events // 1000


def test_waking_floor_adds_the_empty_waking_program():
    """floor --waking (bench/run.py's floor_waking): the default floor's hooks and sched_waking's
    empty program, which runs at every sched_waking event perf counts."""
    with running_floor() as floor:
        default = sorted(p["hook"] for p in floor_ask(floor, "stats"))
    assert "tp_btf/sched_waking" not in default
    with running_floor("--waking") as floor, bpf_stats():
        # a second perf around the floor's whole window: the host's wakeups beside the
        # workload's, counted rather than guessed at
        with perf_around("sched:sched_waking") as around:
            before = {p["hook"]: p for p in floor_ask(floor, "stats")}
            events = perf_count("sched:sched_waking", ["pingpong", "--rounds", "20000"])
            after = {p["hook"]: p for p in floor_ask(floor, "stats")}
    assert sorted(after) == sorted(default + ["tp_btf/sched_waking"])
    runs = after["tp_btf/sched_waking"]["run_cnt"] - before["tp_btf/sched_waking"]["run_cnt"]
    print(f"floor --waking: {runs} sched_waking runs, perf: {events} events in the workload, "
          f"{around['count']} around")
    # the floor's window holds the workload's perf count and lies within the outer one's
    assert events > 10000 and events <= runs <= around["count"]


def test_samplers_floor_runs_the_empty_samplers_alone_at_lockscopeds_rates():
    """floor --samplers (bench/run.py's floor_samplers, run beside lockscoped for the samplers'
    per-event baseline): the empty spin and holder samplers, nothing else, each firing on
    every CPU at lockscoped's default rate, as cpu-clock's frequency mode keeps it."""
    import run
    rates = {r: int(re.search(rf"{r}\s*=\s*(\d+)", open(os.path.join(ROOT, "bpf", "scheduler.h")).read()).group(1))
             for r in ("SCHED_DEF_SPIN_FREQ", "ULOCK_DEF_HOLD_FREQ")}
    with running_floor("--samplers") as floor, bpf_stats():
        time.sleep(0.5)  # frequency mode settles its period
        before, t0 = {p["name"]: p for p in floor_ask(floor, "stats")}, time.monotonic()
        time.sleep(3)
        after, t1 = {p["name"]: p for p in floor_ask(floor, "stats")}, time.monotonic()
    assert sorted(p["hook"] for p in after.values()) == ["perf_event", "perf_event"]
    assert run.FLOOR_MODES["floor_samplers"] == ["--samplers"]
    for name, rate in (("scheduler_spin_sample", rates["SCHED_DEF_SPIN_FREQ"]),
                       ("scheduler_hold_sample", rates["ULOCK_DEF_HOLD_FREQ"])):
        runs = after[name]["run_cnt"] - before[name]["run_cnt"]
        want = rate * os.cpu_count() * (t1 - t0)
        print(f"{name}: {runs} runs in {t1 - t0:.2f} s, {want:.0f} at {rate}/s per CPU")
        assert 0.7 * want <= runs <= 1.3 * want


def test_bpf_lines_maps_a_programs_machine_code_to_its_source(daemon):
    """bench/profile.py's map: every line-info address lies in one of the functions the JIT
    made of the program, each function's first at its start, the program's at the kernel's
    symbol for it, and each names a source line of ours, so that a sample's address finds
    the line it came from."""
    subprocess.run(["make", "-s", f"OUTPUT={BUILD}", os.path.join(BUILD, "bench", "bpf_lines")], cwd=ROOT, check=True)
    progs = json.loads(subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True,
                                      check=True).stdout)
    begin = [p for p in progs if p.get("name", "").startswith("contention_begin")]
    assert begin, "lockscoped loaded no contention_begin program"
    prog = begin[0]
    with open("/proc/kallsyms") as f:
        start = [int(line.split()[0], 16) for line in f
                 if line.split()[2].startswith("bpf_prog_") and line.split()[2].endswith("_" + prog["name"])]
    out = subprocess.run([os.path.join(BUILD, "bench", "bpf_lines"), str(prog["id"])], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    funcs = [(int(line.split()[2], 16), int(line.split()[3])) for line in out if line.startswith("# func ")]
    lines = [line for line in out if not line.startswith("#")]
    addrs = [int(line.split()[0], 16) for line in lines]
    print(f"{prog['name']} (id {prog['id']}): {len(lines)} lines in {len(funcs)} functions; {lines[:2]}")
    # kallsyms shows addresses only to root, and the test runs as root (require_bpf); programs
    # of one name (another daemon's) have a symbol each
    assert funcs[0][0] in start and sum(n for _, n in funcs) == prog["bytes_jited"]
    owner = [[i for i, (f, n) in enumerate(funcs) if f <= a < f + n] for a in addrs]
    assert all(len(o) == 1 for o in owner), "an address outside the program's functions, or in two"
    for i, (f, _) in enumerate(funcs):
        mine = [a for a, o in zip(addrs, owner) if o == [i]]
        assert mine and mine[0] == f and mine == sorted(mine)
    assert all(re.match(r"[0-9a-f]+ [\w.]+\.(c|h):\d+: ", line) for line in lines)
    assert any(" klock.bpf.c:" in line and "BPF_PROG(contention_begin" in line for line in lines)


def bench_only(*args):
    """bench/run.py --only pingpong, one short pair a configuration: what it ran, not how fast."""
    return subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--force", "--only", "pingpong",
                           "--pairs", "1", "--seconds", "0.5", *args],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OUTPUT": BUILD})


def test_a_configuration_of_ones_own_runs_its_daemon_and_one_that_cannot_start_stops_the_bench(tmp_path):
    subprocess.run(["make", "-s", f"OUTPUT={BUILD}", os.path.join(BUILD, "bench", "floor")], cwd=ROOT, check=True)
    # another build's daemon, standing in: notes how it was started, then is this build's
    called = tmp_path / "called"
    other = tmp_path / "lockscoped"
    other.write_text(f'#!/bin/sh\necho "$@" >> {called}\nexec {os.path.join(BUILD, "lockscoped")} "$@"\n')
    other.chmod(0o755)
    r = bench_only("--define", f"nospin@{other}=--spin-freq=0 --hold-freq='0'", "--configs", "nospin")
    print(r.stdout, r.stderr[-2000:])
    assert r.returncode == 0 and re.search(r"^pingpong\s+nospin\s+[-+]\d", r.stdout, re.M)
    starts = called.read_text().splitlines()
    # one daemon per traced run, each with the options as the shell words said
    assert len(starts) == 1 and starts[0].endswith("--spin-freq=0 --hold-freq=0")

    r = bench_only("--define", "bad=--spin-freq=0 --no-such-option", "--configs", "bad")
    assert r.returncode != 0 and "exited at start (2)" in r.stderr and "unrecognized option '--no-such-option'" in r.stderr
    assert "pingpong" not in r.stdout  # no row measured without its daemon

    for spec, said in (("bad name=", "want NAME=ARGS"), ("floor=", "want NAME=ARGS"), ("untraced=", "want NAME=ARGS"),
                       (f"x@{tmp_path}/none=", "is not an executable lockscoped"), ("x='", "No closing quotation")):
        r = bench_only("--define", spec, "--configs", "x")
        assert r.returncode != 0 and said in r.stderr, (spec, r.stderr)


def test_the_ab_pairs_have_an_aa_twin_with_nothing_traced():
    """untraced: the traced run's place taken by a second untraced run (A/A), this host's
    noise beside every tracer's loss; a name --define may not take."""
    subprocess.run(["make", "-s", f"OUTPUT={BUILD}", os.path.join(BUILD, "bench", "floor")], cwd=ROOT, check=True)
    r = bench_only("--configs", "untraced", "--pairs", "2")
    print(r.stdout, r.stderr[-2000:])
    assert r.returncode == 0 and re.search(r"^pingpong\s+untraced\s+[-+]\d", r.stdout, re.M)
    assert "(2 pairs of 0.5 s)" in r.stderr


def test_a_loss_goal_is_met_only_by_its_whole_interval(tmp_path):
    """--render judges a run's figures again, measuring nothing: a throughput goal is met when
    the loss's whole 95 % interval is inside it; a median inside with an interval reaching
    past it is undecided, not met. The figures are the committed run's, with one workload's
    interval moved to each side of the goal."""
    with open(os.path.join(ROOT, "bench", "results.json")) as f:
        res = json.load(f)
    name = next(iter(res["workloads"]))
    cases = {"inside": (0.01, [-0.01, 0.025]), "straddles": (0.01, [-0.02, 0.08]), "past": (0.05, [0.04, 0.07])}
    for case, (loss, ci) in cases.items():
        res["workloads"][name]["lockscope_default"].update(loss=loss, ci95=ci)
        src = tmp_path / f"{case}.json"
        src.write_text(json.dumps(res))
        out = tmp_path / case
        out.mkdir()
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--render", str(src), "--out", str(out)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        goal = next(g for g in json.loads((out / "results.json").read_text())["goals"]
                    if g["goal"].startswith(f"{name}: loss"))
        assert goal["met"] == (case == "inside"), (case, goal)
        assert ("undecided" in goal["measured"]) == (case == "straddles"), (case, goal)
        assert goal["measured"] in (out / "results.md").read_text()


@pytest.mark.parametrize("name", ["pingpong", "futex_server", "wake_storm", "pipe_storm"])
def test_interleaved_runs_take_the_programs_off_half_the_time(name):
    """bench/run.py's interleaved runs under lockscoped: the switch program is off its hook
    every other slice (pause, resume). The ping-pong makes two switches a round trip, so
    the program runs at about half of them; a tracer never paused would run at all of them.
    The futex server notes its messages from inside its critical section, the wake storm
    its rounds and the pipe storm its messages: slices of each."""
    import run
    with bpf_stats():
        r = run.interleaved(["lockscope_default"], runs=1, seconds=3, name=name)["lockscope_default"]
    print(r)
    assert r["slices"] >= 20 and len(r["runs"]) == 1 and r["rounds"] > 0
    if name == "pingpong":
        assert 0.3 * 2 * r["rounds"] <= r["switch_runs"] <= 0.7 * 2 * r["rounds"]
