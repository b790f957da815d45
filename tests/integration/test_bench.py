"""The benchmark's own pieces, checked without timing anything (make bench measures; make
test never asserts a speed).

- the floor (bench/floor.bpf.c) builds, loads, and stands on exactly the hooks lockscoped
  attaches: a program added to lockscoped without its empty twin fails here
- the bound (bench/bound.bpf.c) does the work it stands for: it times the waits that an
  independent count says happened, or its cost would say less than it claims
- the single-hook floors (floor --lock-begin, --lock-end) attach their one empty program
  and nothing else, and it runs at every event perf counts on that tracepoint
"""
import json
import os
import re
import subprocess
import sys

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


@pytest.mark.quiet_host
def test_bound_times_the_waits_that_happened():
    subprocess.run(["make", "-s", f"OUTPUT={BUILD}", os.path.join(BUILD, "bench", "floor")], cwd=ROOT, check=True)
    floor = subprocess.Popen([os.path.join(BUILD, "bench", "floor"), "--bound"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert floor.stdout.readline().strip() == "ready"
        before = floor_ask(floor, "totals")
        # kernel locks: perf counts every contention_end on the host while pipe_storm runs
        perf = subprocess.run(["perf", "stat", "-a", "-x,", "-e", "lock:contention_end", "--",
                               os.path.join(WORKLOADS, "pipe_storm"), "--threads", "4", "--messages", "200000"],
                              capture_output=True, text=True, timeout=120, check=True)
        ends = int(re.search(r"^(\d+),", perf.stderr, re.M).group(1))
        middle = floor_ask(floor, "totals")
        # futex waits: mutex_server counts its own futex sleeps (getrusage around the lock)
        ms = subprocess.run([os.path.join(WORKLOADS, "mutex_server"), "--workers", "8", "--until", "2000"],
                            capture_output=True, text=True, timeout=120, check=True)
        sleeps = json.loads(ms.stdout)["sleeps"]
        after = floor_ask(floor, "totals")
    finally:
        floor.stdin.close()
        floor.wait(timeout=30)
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


@pytest.mark.parametrize("mode,tracepoint", [("--lock-begin", "contention_begin"), ("--lock-end", "contention_end")])
def test_single_hook_floor_runs_alone_on_its_hook(mode, tracepoint):
    subprocess.run(["make", "-s", f"OUTPUT={BUILD}", os.path.join(BUILD, "bench", "floor")], cwd=ROOT, check=True)
    floor = subprocess.Popen([os.path.join(BUILD, "bench", "floor"), mode], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        with bpf_stats():
            assert floor.stdout.readline().strip() == "ready"
            before = floor_ask(floor, "stats")
            perf = subprocess.run(["perf", "stat", "-a", "-x,", "-e", f"lock:{tracepoint}", "--",
                                   os.path.join(WORKLOADS, "pipe_storm"), "--threads", "4", "--messages", "200000"],
                                  capture_output=True, text=True, timeout=120, check=True)
            events = int(re.search(r"^(\d+),", perf.stderr, re.M).group(1))
            after = floor_ask(floor, "stats")
    finally:
        floor.stdin.close()
        floor.wait(timeout=30)
    assert [p["hook"] for p in after] == [f"tp_btf/{tracepoint}"]
    runs = after[0]["run_cnt"] - before[0]["run_cnt"]
    skipped = after[0]["recursion_misses"] - before[0]["recursion_misses"]
    print(f"floor {mode}: {runs} runs, {skipped} skipped, perf: {events} lock:{tracepoint} events")
    # the floor's window holds perf's and a little of the host's locking beside it; an event
    # that fires while the program runs on its CPU (an interrupt's) is skipped, and counted
    assert events > 10000 and events <= runs + skipped <= events + events // 100 and skipped <= events // 1000
