"""Spin, yields, bursts and preempted holders (seeds 000, 001, 004): `lockscope spin` on
real reproducers, with the figures checked against an independent count."""
import json
import math
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import ROOT, WORKLOADS, Workload, require_tool, running_daemon
from perfref import PerfPreemptedIn, PerfYields
from test_cgroups import Cgroup


# The yield storm runs until its loop thread was switched out involuntarily this often
# (yields that ran the sender, and preemptions): twice the yields the test needs.
LOOP_SWITCHES = 600


def findings(d, pid, kind):
    resp = d.cli_json("spin", "-p", str(pid))
    return [f for f in resp["findings"] if f["kind"] == kind]


def frames(f):
    return [(fr["sym"] or "", fr["module"] or "") for fr in f["stack"] or []]


def test_libuv_async_yield_spin(daemon):
    """Seed 000: libuv 1.44's uv__async_spin, the loop thread yielding while its sender is
    preempted between its two stores. One sender pinned with the loop to one CPU."""
    require_tool("perf")
    w = Workload("uv_async_spin", "--senders", "1", "--seconds", "1", "--until", str(LOOP_SWITCHES))
    perf = PerfYields(w.pid)   # the loop thread is the main thread; counting from here
    w.go()
    res = w.wait()
    perf_counts = perf.counts()
    fs = findings(daemon, w.pid, "yield_spin")
    print(json.dumps(fs, indent=1)[:3000], "perf:", perf_counts)
    assert [f["tid"] for f in fs] == [res["loop_tid"]], "the loop thread, and only it"
    f = fs[0]
    assert f["comm"] == "uv-loop" and f["pid"] == w.pid
    # the yields that switched are counted at the switch, each one (those that found nothing
    # else to run return at once: the CPU they burn is in cpu_ns and the samples)
    ev = f["evidence"]
    switched = perf_counts["switched"]
    assert switched >= 300, "the reproducer must spin"
    assert abs(ev["yields_total"] - switched) <= max(2, 0.01 * switched)
    assert f["rate_per_s"] >= 100 and abs(f["rate_per_s"] - ev["storm_yields"] / ev["storm_s"]) < 1
    assert 0 < f["cpu_ns"] < 3e9
    # the thread it waits for: the sender, preempted (by the loop thread's own wakeup)
    assert f["peer"]["tid"] == res["sender_tids"][0] and f["peer"]["comm"] == "uv-send-0"
    assert f["peer"]["preempted"]
    # issue 5: the yield site unwound through libc and libuv (no frame pointers) to uv_run
    st = frames(f)
    assert "sched_yield" in st[0][0], st
    assert f["unwind"] == "dwarf"
    uv = [i for i, (sym, mod) in enumerate(st) if mod.startswith("libuv.so")]
    assert uv and uv[0] == 1, "sched_yield is called from inside libuv"
    run = [i for i, (sym, mod) in enumerate(st) if sym == "uv_run"]
    assert run and run[0] > uv[0], "up to uv_run"
    assert any(sym == "main" for sym, mod in st)
    assert "libuv" in f["hint"] and "1.45" in f["hint"]


# The yield storm's rate depends on how long each peer runs before the scheduler preempts
# it (its slice): measured 50-150 switched yields/s here, around the daemon's default
# yield-min-rate of 100/s, so a finding at defaults came in 1 of 2-4 storms and CI once saw
# none in 4. This test is about the peers' accounting, not the thresholds (test_libuv's
# storm checks those at defaults): its daemon takes any storm of 10 yields/s.
YIELD_RING_MIN_RATE = "10"


@pytest.fixture
def storm_daemon():
    yield from running_daemon("--yield-min-rate", YIELD_RING_MIN_RATE)


def test_yield_peers_beyond_the_spinners_own(storm_daemon):
    """A yield storm with five peers on the yielder's CPU, which spin: a spinner counts its
    first peers in its own entry and any more in the peers map (struct sched_spin_thread).
    The peers listed are the five (and any kernel thread a yield ran), each once, preempted
    when yielded to, and they add up to the yields counted, which are every yield that
    switched as perf counts them."""
    require_tool("perf")
    daemon = storm_daemon
    w = Workload("yield_ring", "--threads", "6", "--yields", "300")
    perf = PerfYields(w.pid)	# the yielder is the main thread
    w.go()
    res = w.wait()
    counts = perf.counts()
    switched = counts["switched"]
    fs = [f for f in findings(daemon, w.pid, "yield_spin") if f["tid"] == res["yielder_tid"]]
    assert fs, f"no yield_spin finding for the yielder ({switched} yields switched)"
    ev = fs[0]["evidence"]
    peers = {p["tid"]: p["yields_to"] for p in ev["peers"]}
    print(json.dumps(ev["peers"]), "workload:", res["yields"], "perf switched:", switched, "to:", counts["to"],
          "rate:", fs[0]["rate_per_s"])
    # 132-201 of the 300 switched in 12 storms here; the rest found the peers not yet due
    assert res["yields"] == 300 and switched >= 30, "the yields must switch"
    # each pair once, the peers perf saw the yields run (the scheduler may pass one of the
    # five over); a yield may also run a kernel thread that woke on the CPU
    ran = {t for t in counts["to"] if t in res["peer_tids"]}
    assert ran, counts["to"]
    assert len(ev["peers"]) == len(peers) and set(peers) >= ran, (peers, counts["to"])
    assert all(p["preempted"] for p in ev["peers"] if p["tid"] in res["peer_tids"])
    assert sum(peers.values()) == ev["yields_total"]
    assert abs(ev["yields_total"] - switched) <= max(2, 0.01 * switched)


# A sampled share against the thread's own CPU clock, within 5 standard errors of the
# thread's sample count plus a residue. The residue was 0.11 (timed) and 0.2 (locks) while
# an open bias made lockscope read ~0.1 high, up to +0.32 on TTAS: the holder sampler's
# program attached to a cpu-clock event before the spin sampler's skewed the spin samples
# for the daemon's lifetime (A/B against `perf record -a` of the same runs: +0.06..+0.32
# with it, ±0.02 without; the holder sampler is now created only while needed, after the
# spin sampler). What is left: perf's own cpu-clock samples read 0.00..+0.05 below the
# clock on these spinners (the clock reads around each spin are the thread's too), and
# with a lock the share itself moves between runs (0.14..0.5 on this 2-CPU machine, as the
# holder is preempted or not), which only the precondition has to allow for. The timed
# lock's residue is what its differences reached (2026-11-29, the same for 04c1067 and the
# head after it): 0.078 at most over 36 threads of the plain build, 0.096 over 18 of the
# sanitizer build, 0.103 once in CI (which runs that build) where 5 standard errors were 0.061.
#
# With a lock, any sampler on a per-CPU clock can read high in a run, not only lockscope's:
# a sample instant is the same for every thread on the CPU, and an interrupted holder makes
# its waiters spin after it. Measured 2026-11-30, TTAS, 3 threads on 2 CPUs, 20 runs each:
# bpftrace's `profile:hz:907` alone (no lockscope) read +0.06..+0.17 high in 10 runs;
# lockscope at 907 Hz in 1 to 3 of each 14-20 (+0.07..+0.27), while `perf record -p` of
# the same runs, whose clock is each thread's own CPU time, agreed with the thread's clock
# within 0.03 in all. So other tests that check a share against a thread's own clock do it
# on the timed spinner, whose spin is the thread's alone (spinner_args(), share_tolerance()).
TIMED_RESIDUE = 0.06
LOCK_RESIDUE = 0.06
MIN_SHARE = 0.08	# the workload spins, and a finding's share is well above pause-min-share (5 %)
SPIN_FUNCTION = {"ttas": "ttas_spin", "pthread": "pthread_spin_lock", "timed": "timed_spin"}


def spinner_args(lock):
    """spin_locks' arguments for @lock, 3 threads for 3 s. Timed rounds are 10x the default:
    ~0.6 ms, so that the two clock reads around each spin are under 0.5 % of the workload's
    own figure (at ~60 us, measured: 0.04-0.09 of it)."""
    rounds = ("--inside", "300000", "--outside", "100000") if lock == "timed" else ()
    return ("--lock", lock, "--threads", "3", "--seconds", "3", *rounds)


def share_tolerance(lock, share, samples):
    """How far a sampled spin share of @samples samples may be from the thread's own @share."""
    return 5 * math.sqrt(share * (1 - share) / samples) + (TIMED_RESIDUE if lock == "timed" else LOCK_RESIDUE)


@pytest.mark.parametrize("lock", ["ttas", "pthread", "timed"])
def test_pause_spin_share(fast_sampler, lock):
    w = Workload("spin_locks", *spinner_args(lock))
    try:
        w.go()
        own = json.loads(w.proc.stdout.readline())   # its threads are parked from here on
        fs = {f["tid"]: f for f in findings(fast_sampler, w.pid, "pause_spin")}
        # all threads' figures first: a failure then shows whether one thread or all were off
        for t in own["threads"]:
            f = fs.get(t["tid"], {})
            print(lock, t["tid"], "own", round(t["share"], 3), "lockscope", round(f.get("share", -1), 3),
                  f.get("evidence", {}).get("samples"),
                  [(round(x["share"], 3), [fr["sym"] for fr in (x.get("stack") or [])[:2]])
                   for x in f.get("evidence", {}).get("stacks", [])])
        for t in own["threads"]:
            f = fs[t["tid"]]
            assert t["share"] > MIN_SHARE and f["share"] > MIN_SHARE, "the workload spins and is seen to"
            assert abs(f["share"] - t["share"]) <= share_tolerance(lock, t["share"], f["evidence"]["samples"])
            assert f["comm"] == "spinner" and f["cpu_ns"] > 0
            st = frames(f)
            assert SPIN_FUNCTION[lock] in st[0][0], st
            assert any(sym == "worker_main" for sym, mod in st)
            assert f["evidence"]["stacks"][0]["share"] <= f["share"] + 1e-9
        # the main thread only sleeps: no finding
        assert w.pid not in fs
    finally:
        w.proc.stdin.close()
        assert w.proc.wait(timeout=30) == 0


def run_stopped(args, stop_s=2.0):
    """tokio_tick for 5 s, stopped (SIGSTOP) for @stop_s after 1.5 s, then continued."""
    w = Workload("tokio_tick", "--seconds", "5", *args)
    w.go()
    time.sleep(1.5)
    os.kill(w.pid, signal.SIGSTOP)
    time.sleep(stop_s)
    os.kill(w.pid, signal.SIGCONT)
    return w, w.wait()


def run_frozen(cg, stop_s=2.0):
    """tokio_tick for 5 s in cgroup @cg, frozen there (cgroup v2's cgroup.freeze) for
    @stop_s after 1.5 s, then thawed: what systemd's `systemctl freeze` and a paused
    container (runc, crun) do."""
    w = Workload("tokio_tick", "--seconds", "5", cgroup=cg.dir)
    w.go()
    time.sleep(1.5)
    with open(os.path.join(cg.dir, "cgroup.freeze"), "w") as f:
        f.write("1")
    with open(os.path.join(cg.dir, "cgroup.events")) as f:
        assert "frozen 1" in f.read() or wait_frozen(cg), "the cgroup froze"
    time.sleep(stop_s)
    with open(os.path.join(cg.dir, "cgroup.freeze"), "w") as f:
        f.write("0")
    return w, w.wait()


def wait_frozen(cg):
    for _ in range(200):
        with open(os.path.join(cg.dir, "cgroup.events")) as f:
            if "frozen 1" in f.read():
                return True
        time.sleep(0.01)
    return False


def test_tokio_catch_up_burst(daemon):
    """Seed 001: a 1 ms tokio interval (MissedTickBehavior::Burst, the default) fires every
    tick it missed during a 2 s stop at once; with Skip it does not."""
    w, res = run_stopped([])
    fs = findings(daemon, w.pid, "burst")
    print(json.dumps(fs, indent=1)[:2500], res)
    assert res["ticks_first_100ms"] >= 1500, "the reproducer must burst"
    assert len(fs) == 1
    f = fs[0]
    ev = f["evidence"]
    assert f["tid"] == res["tid"] and f["comm"] == "tokio_tick"
    assert 1.9e9 <= ev["stop_ns"] <= 2.6e9
    # each tick writes once: at least the workload's own ticks, plus its sleeps in the window
    assert res["ticks_first_100ms"] <= ev["events_first_100ms"] <= res["ticks_first_100ms"] + 250
    # before the stop: a tick (a write and a sleep) per ms, ~200 per 100 ms
    assert 120 <= ev["baseline_per_100ms"] <= 260
    assert ev["ratio"] >= 5 and f["rate_per_s"] == pytest.approx(ev["events_first_100ms"] * 10)
    assert "MissedTickBehavior::Skip" in f["hint"] and "Delay" in f["hint"]
    assert any(mod == "tokio_tick" for sym, mod in frames(f)), "a stack in the program"

    # the fix: Skip drops the missed ticks, the resume is not a burst
    w, res = run_stopped(["--skip"])
    assert res["ticks_first_100ms"] <= 150
    assert findings(daemon, w.pid, "burst") == []


def test_burst_after_cgroup_freeze(daemon):
    """The same burst after a cgroup v2 freeze: the freezer traps each thread in a plain
    interruptible sleep (its stop is seen in the task's jobctl, not its state), as long
    as the stop above."""
    cg = Cgroup(f"/lockscope-test-freeze-{os.getpid()}")
    try:
        w, res = run_frozen(cg)
    finally:
        cg.remove()
    fs = findings(daemon, w.pid, "burst")
    print(json.dumps(fs, indent=1)[:1500], res)
    assert res["ticks_first_100ms"] >= 1500, "the reproducer must burst"
    assert len(fs) == 1
    ev = fs[0]["evidence"]
    assert fs[0]["tid"] == res["tid"]
    assert 1.9e9 <= ev["stop_ns"] <= 2.6e9
    assert res["ticks_first_100ms"] <= ev["events_first_100ms"] <= res["ticks_first_100ms"] + 250


def test_holder_preemption(daemon):
    """Seed 004's server: 8 workers on one mutex on 2 CPUs, formatting a log line while
    holding it; holders are preempted while others wait. Counted per lock, shown in
    `top -o` and as spin findings; each preemption is one of the holder's involuntary
    switches."""
    w = Workload("mutex_server", "--seconds", "3")
    try:
        w.go()
        time.sleep(2.5)
        top = daemon.cli_json("top", "-p", str(w.pid), "-l", "-o", "--kind", "user", "-w", "all")
        threads = {r["tid"]: r for r in daemon.cli_json("threads", "-p", str(w.pid))["rows"]}
        fs = findings(daemon, w.pid, "holder_preempted")
    finally:
        w.wait()
    row = top["rows"][0]
    hp = row["holder_preempted"]
    print(hp, [(f["tid"], f["evidence"]) for f in fs])
    assert hp["count"] > 0 and hp["total_ns"] > 0
    assert fs and all(f["lock"]["addr"] == row["lock"]["addr"] for f in fs)
    assert sum(f["evidence"]["preemptions"] for f in fs) >= hp["count"]
    for f in fs:
        assert f["comm"] == "mutex_server" and f["pid"] == w.pid
        # a preemption is an involuntary switch of that thread: never more of them
        assert f["evidence"]["preemptions"] <= threads[f["tid"]]["involuntary"]
        assert f["evidence"]["max_preempted_ns"] <= f["evidence"]["preempted_ns"]
    text = daemon.cli("top", "-p", str(w.pid), "-o", "--kind", "user", "-w", "all").stdout
    assert "holder preempted" in text and re.search(r" \d+x \d", text), text


def test_spin_bad_flags_and_empty(daemon):
    r = daemon.cli("spin", "-t", check=False)
    assert r.returncode == 2 and "-t/--threads does not apply to spin (top, scan, waits take it)" in r.stderr
    r = daemon.cli("spin", "--max-stack", "0", check=False)
    assert r.returncode != 0 and "--max-stack" in r.stderr
    # a process with nothing to report: an empty list, said so in the table
    resp = daemon.cli_json("spin", "-p", str(os.getpid()))
    assert resp["findings"] == [] and resp["sources"]["pause_sampling"]
    assert "nothing spins" in daemon.cli("spin", "-p", str(os.getpid())).stdout
    # the daemon still serves
    assert daemon.cli_json("status")["features"]["sched"]


def test_kernel_holder_preemption(daemon):
    """Writers on one memfd queue on its inode rwsem; CPU hogs make the copy loop's
    cond_resched() switch a holder out while the others sleep on the rwsem. Each
    preemption lockscope counts is one perf sees (a preempted switch inside
    shmem_file_write_iter, where the rwsem is held), and most of perf's are lockscope's."""
    require_tool("perf")
    w = Workload("file_writers", "--seconds", "3")
    perf = PerfPreemptedIn(w.pid)  # counting from here, before the workload starts writing
    try:
        w.go()
    finally:
        w.wait()
        ref = perf.counts("shmem_file_write_iter")
    top = daemon.cli_json("top", "-p", str(w.pid), "-o", "--kind", "kernel", "-w", "all", "-Y", "rwsem:W")
    fs = [f for f in findings(daemon, w.pid, "holder_preempted") if f["lock_kind"] == "kernel"]
    row = top["rows"][0]
    hp = row["holder_preempted"]
    counted = sum(f["evidence"]["preemptions"] for f in fs)
    print("lockscope", hp, "per holder", {f["tid"]: f["evidence"]["preemptions"] for f in fs}, "perf", ref)
    assert fs and all(f["lock"]["addr"] == row["lock"]["addr"] and f["lock_type"] == "rwsem:W"
                      and f["comm"].startswith("writer-") for f in fs)
    assert counted == hp["count"] and hp["total_ns"] > 0
    assert hp["count"] >= 20, "the hogs preempt holders many times a second"
    for f in fs:
        assert f["evidence"]["preemptions"] <= ref.get(f["tid"], 0)
    assert hp["count"] >= 0.8 * sum(ref.values())
    text = daemon.cli("top", "-p", str(w.pid), "-o", "--kind", "kernel", "-w", "all", "-Y", "rwsem:W").stdout
    assert re.search(r"rwsem:W .* \d+x \d", text), text
    text = daemon.cli("spin", "-p", str(w.pid)).stdout
    assert "holding rwsem:W 0xffff" in text, text


@pytest.mark.parametrize("mode,via", [("epoll", "epoll_wait"), ("poll", "poll"), ("select", "select")])
def test_busy_poll(fast_sampler, mode, via):
    """A loop of zero-timeout waits never leaves its CPU: only cpu-clock samples see it.
    The share of the thread's samples inside the call agrees with the thread's own
    kernel-time share (getrusage) within 0.1 (at the default 47 Hz, ~130 samples of a
    2.8 s loop would put 0.1 at two standard errors: the fast sampler's ~2 500 at eight);
    with a 1 ms timeout the loop idles and nothing is reported."""
    daemon = fast_sampler
    w = Workload("busy_poll", "--mode", mode, "--seconds", "3")
    w.go()
    time.sleep(2.8)
    fs = findings(daemon, w.pid, "yield_spin")
    own = w.wait()
    print(mode, own, [(f["share"], f["evidence"]) for f in fs])
    assert len(fs) == 1
    f = fs[0]
    assert f["comm"] == "poller" and f["evidence"]["via"] == via and f["peer"] is None
    assert abs(f["share"] - own["kernel_share"]) <= 0.1
    assert f["cpu_ns"] > 0 and "poller" in [s for s, _ in frames(f)]
    w = Workload("busy_poll", "--mode", mode, "--timeout-ms", "1", "--seconds", "2")
    w.go()
    time.sleep(1.8)
    assert findings(daemon, w.pid, "yield_spin") == []
    w.wait()


def test_zero_sleep_storm(daemon):
    """nanosleep(0) sleeps for the timer slack: every call switches out and back. Each one
    is counted like a yield; the storm's rate agrees with the workload's own within 5 %."""
    w = Workload("busy_poll", "--mode", "nanosleep", "--seconds", "3")
    w.go()
    time.sleep(2.8)
    fs = findings(daemon, w.pid, "yield_spin")
    own = w.wait()
    print(own, fs)
    assert len(fs) == 1
    f = fs[0]
    assert f["evidence"]["via"] == "nanosleep" and f["peer"] is None and "zero-length sleep" in f["hint"]
    assert abs(f["rate_per_s"] - own["calls"] / own["seconds"]) <= 0.05 * own["calls"] / own["seconds"]
    assert "poller" in [s for s, _ in frames(f)]


def test_futex_eagain_storm(daemon):
    """FUTEX_WAIT on a word that already changed returns EAGAIN without sleeping: only the
    precise mode sees such calls. A precise scan over the whole run counts every one of
    them (the workload's own count, less the records counted as dropped) and `spin` reports
    the storm after it."""
    w = Workload("busy_poll", "--mode", "futex", "--seconds", "1.5")
    scan = subprocess.Popen([os.path.join(ROOT, "build", "lockscope"), "--socket", daemon.sock,
                             "scan", "-p", str(w.pid), "--precise", "-d", "3", "--json"],
                            stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)  # the scan is on before the first call
    w.go()
    own = w.wait()
    assert scan.wait(timeout=60) == 0
    fs = findings(daemon, w.pid, "yield_spin")
    print(own, [(f["rate_per_s"], f["evidence"]) for f in fs])
    assert len(fs) == 1
    f = fs[0]
    # every call is counted, or counted as dropped (a ring filled at ~600k calls/s)
    dropped = sum(daemon.cli_json("status")["dropped"].values())
    missing = own["calls"] - f["evidence"]["nonblocking"]
    print("missing", missing, "dropped", dropped)
    assert f["evidence"]["via"] == "futex" and 0 <= missing <= dropped
    assert missing <= 0.01 * own["calls"]
    assert f["rate_per_s"] >= 100 and f["lock"]["addr"] and "busy_poll" in (f["lock"]["name"] or "")
    assert "poller" in [s for s, _ in frames(f)]
