#!/usr/bin/env python3
"""make bench: lockscope's cost and capacity, side by side with perf, bpftrace and the
empty-hook floor, in one run. Writes bench/results.md and bench/results.json.

Throughput, measured so that a 3 % loss can be seen on a shared machine: every traced run
is paired with an untraced run of the same workload right next to it (A B, then B A, ...),
and the loss is the median of the pairs' ratios, with a bootstrap 95 % interval. Beside it,
the CPU time per operation of the whole machine (workload, tracer and daemon, from
/proc/stat), which is steadier than throughput on a contended lock. The bench refuses to
start while the load average says the machine is busy.

Configurations (each against `none`, nothing traced):
  lockscope_default  lockscoped at its defaults (every source on, stacks sampled)
  perf_lock_bpf      perf lock contention -ab (perf 6.1 built with BPF skeletons, anchors.sh)
  bpftrace           bpftrace timing kernel lock waits per lock (bench/lock_contention.bt)
  floor              empty BPF programs on exactly the hooks lockscoped keeps attached
                     (bench/floor); its on-demand hooks (sched_waking, the holder sampler)
                     get their empty programs only in the per-event runs (floor --all)
  floor_switch       the empty sched_switch program alone (floor --switch; ping-pong and
                     stress-ng --switch): the one hook futex timing cannot do without here
  untraced           nothing traced in the traced run's place either (A/A): what two runs
                     side by side differ by with nothing between them, this host's noise; a
                     loss inside its interval cannot be told from no loss here
  bound              the least work that counts and times every wait exactly, on the same
                     hooks (bench/bound.bpf.c, floor --bound): a loss it shows, no exact
                     tracer avoids on this host; what lockscope costs beyond it is its design
                     (except on a lock storm, where a tracer that holds every waiter back
                     at contention_begin, as perf's stack walk there does, can gain)
With --only, also:
  floor_waking       floor and the empty sched_waking program: what the waker's hook
                     (block-waits, fast futex waits) costs a load by being attached
  floor_lock_begin,  the empty contention_begin or contention_end program alone (kernel-lock
  floor_lock_end     workloads): which of the two hooks a lock storm's loss comes from

Interleaved (the workloads that note their own progress: ping-pong, the futex server, the
wake storm and the pipe storm):
the tracer's programs taken off their hooks and put back every 50 ms in one run, each
traced slice against the untraced ones beside it (`--only pingpong --interleaved`): what
a phase of the host moves cancels, and a tenth of a point can be resolved.

Workloads: our reproducers and two third-party benchmarks (stress-ng's mutex and switch
stressors). Then, under lockscoped alone: BPF ns per event per program against the floor's
program on the same hook (kernel.bpf_stats_enabled, in runs of their own: the statistics
cost time themselves), the highest kernel-lock event rate with no drop and its counts
against perf's count of the same tracepoint, the daemon's CPU and RSS idle, under load and
with ~100 k distinct stacks, `lockscope top -E 50` latency with that many keys
(each a row), and the
time to READY.
Usage: sudo make bench   (or: sudo bench/run.py [--pairs N] [--seconds S] [--force])
       sudo bench/run.py --only pingpong,stress_switch [--configs lockscope_default,floor]
         the paired runs of those workloads and configurations alone, printed, results
         left as they are: to see what one change costs before the whole bench is run
       sudo bench/run.py --only pingpong --define nowaker='--block-waits=1 --waker-min-rate=1000000' \
                         --define old@/tmp/old/lockscoped= --configs lockscope_default,nowaker,old
         with configurations of one's own: lockscoped's options, and another build's daemon
"""
import argparse
import bisect
import contextlib
import datetime
import json
import math
import os
import platform
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from lsbench import BUILD, ROOT, bpf_stats, call, cpu_seconds, lockscoped, pingpong, rss_bytes, workload

sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from perfref import PerfStat  # noqa: E402  the tests' perf reference, one for both

BENCH = os.path.join(BUILD, "bench")
PERF_BPF = os.path.join(BENCH, "perf")
FLOOR = os.path.join(BENCH, "floor")
HERE = os.path.dirname(os.path.abspath(__file__))

TRACED = ["lockscope_default", "perf_lock_bpf", "bpftrace", "floor", "floor_switch", "bound", "untraced"]
# the lock tracers: they time kernel lock waits, which only these workloads make
KERNEL_LOCK_ONLY = {"perf_lock_bpf", "bpftrace", "floor_lock_begin", "floor_lock_end"}
# the empty sched_switch program alone: where switches, not locks, make the load
SWITCH_ONLY = ("pingpong", "stress_switch")
ALL_ARGS = ["--stack-rate=1000000", "--cpu-stack-rate=1000000", "--stack-budget=1000000", "--user-dump-rate=1000000"]
# lockscoped's configurations and their options; those beyond the default only with --only
LOCKSCOPED_CONFIGS = {"lockscope_default": [], "lockscope_all": ALL_ARGS,
                      "lockscope_block_waits": ["--block-waits=1"]}
# the daemon a configuration runs where it is not this build's (--define NAME@PATH=...)
LOCKSCOPED_BINARIES = {}
BUSY_LOAD = 0.5		# 1-minute load average above which the machine is not quiet

# name: (what it is, its unit, whether it makes kernel-lock waits, how to run it for S s)
WORKLOADS = {
    "pingpong": ("pingpong: two threads, two pipes, one CPU (a switch per message)", "round trips/s", False, None),
    "futex_server": ("mutex_server: 8 workers, one mutex, short critical section", "messages/s", False,
                     ["mutex_server", "--workers", "8", "--fixed"]),
    "wake_storm": ("wake_storm: 16 threads woken at once, over and over", "rounds/s", False,
                   ["wake_storm", "--threads", "16"]),
    "kernel_locks": ("mmap_storm: 2 writers mmap/munmap, 2 readers madvise/mincore/fault (mmap_lock, page tables)",
                     "ops/s", True, ["mmap_storm", "--writers", "2", "--readers", "2"]),
    "pipe_storm": ("pipe_storm: 4 threads on one pipe (a kernel lock storm: pipe->mutex)", "messages/s", True,
                   ["pipe_storm", "--threads", "4"]),
    "stress_mutex": ("stress-ng --mutex 4: pthread mutex contention (third-party)", "bogo ops/s", True, "mutex"),
    "stress_switch": ("stress-ng --switch 4: context switches through pipes (third-party)", "bogo ops/s", True,
                      "switch"),
}
# loss at lockscope_default (all workloads): the always-on promise; the lock workloads are
# also held to perf lock contention -ab in the same run
LOSS_GOAL = 0.03
PERF_GOAL_WORKLOADS = ("kernel_locks", "pipe_storm")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---- one run of a workload: its rate, and the machine's CPU per operation ----

def machine_cpu_s():
    """CPU seconds every CPU spent busy so far (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]
    return busy / os.sysconf("SC_CLK_TCK")


def stress_ng(stressor, seconds):
    # stress-ng's timeout is whole seconds, and "0.5s" reads as 0: no timeout at all
    out = subprocess.run(["stress-ng", f"--{stressor}", "4", "--timeout", f"{max(1, math.ceil(seconds))}s",
                          "--metrics-brief"],
                         capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    for line in text.splitlines():
        fields = line.split()
        # "stress-ng: metrc: [pid] mutex  bogo-ops real-time usr-time sys-time bogo-ops/s(real) ..."
        if stressor in fields:
            nums = [x for x in fields[fields.index(stressor) + 1:] if re.match(r"^[\d.]+$", x)]
            if len(nums) >= 5:
                return float(nums[4])
    raise RuntimeError(f"no {stressor} metrics in stress-ng's output: {text[-500:]}")


def run_workload(name, seconds):
    """(operations per second, machine CPU seconds per operation) of one run."""
    cmd = WORKLOADS[name][3]
    c0, t0 = machine_cpu_s(), time.monotonic()
    ops = None
    if cmd is None:
        pp = pingpong(seconds)
        rate, ops = pp["per_s"], pp["rounds"]
    elif isinstance(cmd, str):
        rate = stress_ng(cmd, seconds)
    else:
        rate = workload(*cmd, "--seconds", str(seconds))["per_s"]
    cpu, elapsed = machine_cpu_s() - c0, time.monotonic() - t0
    if ops is None:
        ops = rate * elapsed
    return rate, cpu / ops if ops else None


# ---- configurations: each a context manager yielding a probe of its programs' stats ----

class Tracer:
    """A running configuration. stats(): {(source, hook): (run_cnt, run_time_ns)} of its
    programs so far, or None. toggle(on): its programs off their hooks or back (nothing
    to do without programs)."""
    def stats(self):
        return None

    def toggle(self, on):
        pass


class Daemon(Tracer):
    def __init__(self, sock):
        self.sock = sock
        self.pid = call(sock, {"cmd": "status"})["pid"]

    def status(self):
        return call(self.sock, {"cmd": "status"})

    def stats(self):
        out = {}
        for p in self.status()["programs"]:
            key = (p["source"], p["hook"])
            c, t = out.get(key, (0, 0))
            out[key] = (c + p["run_cnt"], t + p["run_time_ns"])
        return out

    def cpu(self):
        return cpu_seconds(self.pid)

    def toggle(self, on):
        r = call(self.sock, {"cmd": "resume" if on else "pause"})
        if "error" in r:
            raise RuntimeError(f"lockscoped: {r['error']}")


class Floor(Tracer):
    def __init__(self, proc):
        self.proc = proc

    def programs(self):
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def toggle(self, on):
        self.proc.stdin.write("on\n" if on else "off\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "ok":
            raise RuntimeError("floor: its programs would not attach again")

    def hooks(self):
        """(component, hook) of every program: each is named for the component it shadows."""
        return sorted((p["name"].split("_")[0], p["hook"]) for p in self.programs())

    def stats(self):
        out = {}
        for p in self.programs():
            key = (p["name"].split("_")[0], p["hook"])
            c, t = out.get(key, (0, 0))
            out[key] = (c + p["run_cnt"], t + p["run_time_ns"])
        return out


@contextlib.contextmanager
def process(cmd, ready, **kw):
    """A tracer process, up once ready(proc) returns; stopped with SIGINT like a user would."""
    p = subprocess.Popen(cmd, **kw)
    try:
        ready(p)
        if p.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited at start ({p.returncode})")
        yield p
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def first_line(p):
    p.stdout.readline()


# the floor's configurations: empty programs on the hooks (--all: and the on-demand ones;
# --switch: on sched_switch alone; --lock-begin, --lock-end: on one lock tracepoint alone),
# or the least exact work on them (--bound)
FLOOR_MODES = {"floor": [], "floor_all": ["--all"], "floor_switch": ["--switch"], "bound": ["--bound"],
               "floor_waking": ["--waking"], "floor_lock_begin": ["--lock-begin"], "floor_lock_end": ["--lock-end"],
               "floor_samplers": ["--samplers"]}


@contextlib.contextmanager
def tracer(config):
    if config in ("none", "untraced"):
        yield Tracer()
    elif config in LOCKSCOPED_CONFIGS:
        with lockscoped(*LOCKSCOPED_CONFIGS[config], binary=LOCKSCOPED_BINARIES.get(config)) as sock:
            yield Daemon(sock)
    elif config in FLOOR_MODES:
        with process([FLOOR, *FLOOR_MODES[config]], first_line,
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as p:
            yield Floor(p)
            p.stdin.close()
    elif config == "perf_lock_bpf":
        # no ready line: -ab loads its skeleton, then waits for SIGINT; 1 s is ample here
        with process([PERF_BPF, "lock", "contention", "-ab"], lambda p: time.sleep(1),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
            yield Tracer()
    elif config == "bpftrace":
        with process(["bpftrace", os.path.join(HERE, "lock_contention.bt")], first_line, stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, text=True):  # "Attaching N probes..." once attached
            yield Tracer()
    else:
        raise ValueError(config)


# ---- the paired matrix ----

def bootstrap_ci(values, reps=4000, seed=1):
    """95 % interval of the median of @values by resampling them (a fixed seed: the same
    figures give the same interval)."""
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(values, k=len(values))) for _ in range(reps))
    return meds[int(0.025 * reps)], meds[int(0.975 * reps) - 1]


def paired(name, config, args):
    """@args.pairs pairs of (untraced, traced) runs of workload @name, alternating which goes
    first; returns the per-pair throughput and CPU-per-op ratios and the raw figures."""
    ratios, cpu_ratios, base, traced = [], [], [], []
    for i in range(args.pairs):
        order = ["none", config] if i % 2 == 0 else [config, "none"]
        got = {}
        for c in order:
            with tracer(c):
                got[c] = run_workload(name, args.seconds)
        (r0, c0), (r1, c1) = got["none"], got[config]
        base.append(r0)
        traced.append(r1)
        ratios.append(r1 / r0)
        if c0 and c1:
            cpu_ratios.append(c1 / c0)
    return ratios, cpu_ratios, base, traced


def summarize_pairs(ratios, cpu_ratios, base, traced):
    lo, hi = bootstrap_ci(ratios)
    out = {"loss": round(1 - statistics.median(ratios), 4), "ci95": [round(1 - hi, 4), round(1 - lo, 4)],
           "pairs": [round(r, 4) for r in ratios], "median": round(statistics.median(traced)),
           "none_median": round(statistics.median(base))}
    if cpu_ratios:
        clo, chi = bootstrap_ci(cpu_ratios)
        out["cpu_per_op"] = round(statistics.median(cpu_ratios) - 1, 4)
        out["cpu_per_op_ci95"] = [round(clo - 1, 4), round(chi - 1, 4)]
    return out


def matrix(args, workloads=WORKLOADS, configs=TRACED):
    res = {}
    for name in workloads:
        klocks = WORKLOADS[name][2]
        res[name] = {}
        for config in configs:
            if (config in KERNEL_LOCK_ONLY and not klocks) or (config == "floor_switch" and name not in SWITCH_ONLY):
                continue
            log(f"{name}: {config} ({args.pairs} pairs of {args.seconds:g} s)")
            res[name][config] = summarize_pairs(*paired(name, config, args))
        res[name]["none"] = {"median": statistics.median(r["none_median"] for r in res[name].values())}
    return res


# ---- interleaved: traced and untraced tens of milliseconds apart, in one run ----

# The ping-pong's rate on this host swings by a third in phases of 0.25-2 s that a
# reference on the other CPU does not follow (docs/performance.md): runs of 3 s side by
# side straddle them. Slices of 50 ms, the tracer's programs taken off their hooks and put
# back between them (lockscoped's pause and resume), mostly fall inside one phase.
INTERLEAVE_CONFIGS = ("lockscope_default", "floor_switch", "untraced")
# the workloads that note their progress (--progress FILE, "ns count" lines): their
# command for S seconds, what their summary counts, and whether they wait for "exit"
INTERLEAVED = {
    "pingpong": (["pingpong", "--no-spinner"], "rounds", True),
    "futex_server": (WORKLOADS["futex_server"][3], "messages", False),
    "wake_storm": (WORKLOADS["wake_storm"][3], "rounds", False),
    "pipe_storm": (WORKLOADS["pipe_storm"][3], "messages", False),
}
INTERLEAVE_SLICE_S = 0.05
INTERLEAVE_GUARD_S = 0.01	# cut from both ends of a slice: the change settles within it
INTERLEAVE_SECONDS = 15	# a run; INTERLEAVE_RUNS of each configuration, by turns
INTERLEAVE_RUNS = 4


def slice_rates(marks, edges, guard):
    """The ping-pong's round trips/s in each slice between @edges ((asked_ns, done_ns, on):
    the toggle asked, done, and the state after it), @guard ns cut from both ends, from
    its progress @marks ((ns, rounds), increasing): [(on, rate)]."""
    ts = [m[0] for m in marks]

    def rounds_at(t):
        i = min(max(bisect.bisect_left(ts, t), 1), len(ts) - 1)
        (t0, n0), (t1, n1) = marks[i - 1], marks[i]
        return n0 + (n1 - n0) * (t - t0) / (t1 - t0)
    out = []
    for (_, done, on), (asked, _, _) in zip(edges, edges[1:]):
        a, b = done + guard, asked - guard
        if b - a > guard and ts[0] <= a and b <= ts[-1]:
            out.append((on, (rounds_at(b) - rounds_at(a)) * 1e9 / (b - a)))
    return out


def interleaved_run(config, seconds, slice_s=INTERLEAVE_SLICE_S, name="pingpong"):
    """One run of workload @name (INTERLEAVED) for @seconds under @config, its programs on
    and off by turns every @slice_s: each traced slice against the mean of the untraced
    slices on either side (what drifts over 0.1 s cancels, and neither order is favoured).
    Returns the slices' ratios, the work done, and the switch program's runs (None unless
    the kernel counts them)."""
    cmd, counted, waits_exit = INTERLEAVED[name]
    with tracer(config) as t, tempfile.NamedTemporaryFile("r", prefix=f"{name}-progress.") as progress:
        p = subprocess.Popen([os.path.join(BUILD, "workloads", cmd[0]), *cmd[1:], "--seconds", str(seconds),
                              "--progress", progress.name],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        edges, on, end, before = [], True, time.monotonic() + seconds, t.stats() or {}
        while time.monotonic() < end:
            on = not on
            asked = time.monotonic_ns()
            t.toggle(on)
            edges.append((asked, time.monotonic_ns(), on))
            time.sleep(slice_s)
        edges.append((time.monotonic_ns(), None, None))
        summary = json.loads(p.stdout.readline())
        after = t.stats() or {}
        t.toggle(True)
        if waits_exit:
            p.stdin.write("exit\n")
        p.stdin.close()
        p.wait()
        marks = [tuple(int(x) for x in line.split()) for line in progress]
    rates = slice_rates(marks, edges, INTERLEAVE_GUARD_S * 1e9)
    ratios = [r / ((a + b) / 2) for (ona, a), (on, r), (onb, b) in zip(rates, rates[1:], rates[2:])
              if on and not ona and not onb]
    # the switch program's runs over the whole run, about half the switches if it was
    # toggled: counted only while kernel.bpf_stats_enabled, which the bench leaves off here
    # (its clock reads would be part of the cost measured)
    hook = [k for k in after if k[1].endswith("sched_switch")]
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_on = f.read().strip() == "1"
    runs = sum(after[k][0] - before.get(k, (0, 0))[0] for k in hook) if hook and stats_on else None
    return ratios, summary[counted], runs


def bootstrap_ci_runs(runs, reps=2000, seed=1):
    """95 % interval of the median of the values of @runs (a list per run), resampling the
    runs and then the values within each: a loss in percent moves with the phases a run
    falls in, by more than one run's slices say."""
    rnd = random.Random(seed)
    meds = []
    for _ in range(reps):
        pool = []
        for r in rnd.choices(runs, k=len(runs)):
            pool.extend(rnd.choices(r, k=len(r)))
        meds.append(statistics.median(pool))
    meds.sort()
    return meds[int(0.025 * reps)], meds[int(0.975 * reps) - 1]


def interleaved(configs, runs=INTERLEAVE_RUNS, seconds=INTERLEAVE_SECONDS, name="pingpong"):
    """@runs interleaved runs of workload @name of @seconds per configuration, the
    configurations by turns (each round in another order): per configuration the loss over
    every slice, with an interval over runs and slices, and each run's own."""
    got = {c: [] for c in configs}
    for i in range(runs):
        order = configs[i % len(configs):] + configs[:i % len(configs)]
        for c in (order if i % 2 == 0 else order[::-1]):
            got[c].append(interleaved_run(c, seconds, name=name))
    out = {}
    for c, rs in got.items():
        ratios = [r for run in rs for r in run[0]]
        lo, hi = bootstrap_ci_runs([run[0] for run in rs])
        out[c] = {"loss": round(1 - statistics.median(ratios), 4), "ci95": [round(1 - hi, 4), round(1 - lo, 4)],
                  "runs": [round(1 - statistics.median(run[0]), 4) for run in rs], "slices": len(ratios),
                  "slice_s": INTERLEAVE_SLICE_S, "seconds": seconds, "rounds": sum(run[1] for run in rs),
                  "switch_runs": None if any(run[2] is None for run in rs) else sum(run[2] for run in rs)}
    return out


# ---- BPF cost per event, in runs of their own with the kernel's statistics on ----

def bpf_costs(seconds):
    """Each program's ns per event over every workload, and (by_workload) over each: an
    average over the bench weighs each workload by its events, and the workloads differ
    in what a program does per event (a switch that times a futex wait, or one that does not).
    Each workload under a tracer of its own, as in the paired runs: a hook attached on
    demand (sched_waking, while futex waits come) stays attached for a while after them,
    and would count the next workload's events, which attach nothing, as its own."""
    acc = {"lockscope_default": {}, "floor_all": {}, "bound": {}, "beside": {}}
    per = {}     # lockscope_default's (source, hook) -> {workload: (events, ns)}

    def add(config, before, after, name=None):
        for k, (cnt, ns) in after.items():
            b = before.get(k, (0, 0))
            a = acc[config].setdefault(k, [0, 0])
            a[0] += cnt - b[0]
            a[1] += ns - b[1]
            if name:
                per.setdefault(k, {})[name] = (cnt - b[0], ns - b[1])
    with bpf_stats():
        for config in ("lockscope_default", "floor_all", "bound"):
            for name in WORKLOADS:
                # beside lockscoped, the empty samplers (floor --samplers): where a program
                # runs 47 times a second, its ns are much what else ran since
                with tracer(config) as t, \
                        (tracer("floor_samplers") if config == "lockscope_default" else
                         contextlib.nullcontext(Tracer())) as beside:
                    before, before_beside = t.stats(), beside.stats() or {}
                    run_workload(name, seconds)
                    add(config, before, t.stats(), name if config == "lockscope_default" else None)
                    add("beside", before_beside, beside.stats() or {})
    out = {}
    for (source, hook), (cnt, ns) in sorted(acc["lockscope_default"].items()):
        if not cnt:
            continue
        f, b = acc["floor_all"].get((source, hook)), acc["bound"].get((source, hook))
        s = acc["beside"].get((source, hook))
        out[f"{source}:{hook}"] = {"ns": round(ns / cnt), "events": cnt,
                                   "floor_ns": round(f[1] / f[0]) if f and f[0] else None,
                                   "beside_ns": round(s[1] / s[0]) if s and s[0] else None,
                                   "bound_ns": round(b[1] / b[0]) if b and b[0] else None,
                                   "by_workload": {w: {"events": c, "ns": round(n / c)}
                                                   for w, (c, n) in per[(source, hook)].items() if c}}
    return out


# ---- what one helper call or map lookup costs here (bench/helpers.bpf.c) ----

def helper_costs(seconds):
    """Each operation's program on sched_switch (all attached at once) over one pingpong
    run: its ns per event, and that less the empty program's."""
    with bpf_stats(), process([FLOOR, "--helpers"], first_line, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) as p:
        t = Floor(p)
        before = {q["name"]: q for q in t.programs()}
        run_workload("pingpong", seconds)
        after = t.programs()
        p.stdin.close()
    ns = {}
    for q in after:
        b = before.get(q["name"], {"run_cnt": 0, "run_time_ns": 0})
        cnt = q["run_cnt"] - b["run_cnt"]
        ns[q["name"]] = (q["run_time_ns"] - b["run_time_ns"]) / cnt if cnt else None
    empty = ns.pop("empty_program")
    return {"empty_ns": round(empty), "events": after[0]["run_cnt"] - before[after[0]["name"]]["run_cnt"],
            "ops": {name: {"ns": round(v), "over_empty_ns": round(v - empty)} for name, v in ns.items() if v}}


# ---- capacity: kernel-lock events per second with nothing lost ----

# Status counters of waits lockscope saw and lost: the ring or a table was full, or the
# nesting too deep. A step with any of these is not exact.
WAIT_LOST = ("ringbuf_full", "wait_map_full", "nest_too_deep", "wait_table_full")
# Waits the kernel ran none of our programs for (nested in one of ours on a CPU): never
# seen by lockscope, not lost by it, and reported as such.
WAIT_SKIPPED = ("prog_recursion", "self_lock")
# The other half of a skipped wait: an end without its begin, a begin whose end never came.
WAIT_UNPAIRED = ("unmatched_end", "missed_end")


def kernel_waits(sock, pid):
    """The kernel-lock waits of @pid the daemon holds (a query drains the wait tables first)."""
    rows = call(sock, {"cmd": "top", "kind": "kernel", "pid": pid, "group": "thread", "window": "all"})["rows"]
    return sum(r["contended"] for r in rows)


def lossless(seconds):
    """pipe_storm at rising thread counts: the event rate, lockscope's count of the waits
    against perf's count of the same tracepoint, the drops and the daemon's CPU. A step is
    exact when nothing was dropped and perf counted no more waits than the kernel skipped
    our programs for (status: prog_recursion, self_lock)."""
    steps = []
    with lockscoped() as sock:
        d = Daemon(sock)
        for threads in (1, 2, 4, 8, 16):
            s0, c0, t0 = d.status(), d.cpu(), time.monotonic()
            # --hold: both counts are taken with the threads parked, before their exit
            w = subprocess.Popen([os.path.join(BUILD, "workloads", "pipe_storm"), "--threads", str(threads),
                                  "--seconds", str(seconds), "--wait", "--hold"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
            pid = int(w.stdout.readline().split()[1])
            perf = PerfStat(pid)  # counting from here
            base = kernel_waits(sock, pid)  # its start-up, before perf attached: ours only
            w.stdin.write("go\n")
            w.stdin.flush()
            if w.stdout.readline().strip() != "done":
                raise RuntimeError("pipe_storm did not finish")
            ref = perf.total()
            elapsed = time.monotonic() - t0
            ours = kernel_waits(sock, pid) - base
            w.communicate("exit\n", timeout=60)
            s1 = d.status()
            delta = {k: s1["dropped"][k] - s0["dropped"][k] for k in s1["dropped"]}
            steps.append({"threads": threads, "events_per_s": round(ref / seconds), "lockscope": ours,
                          "perf": ref, "dropped": sum(delta[k] for k in WAIT_LOST),
                          "skipped": sum(delta[k] for k in WAIT_SKIPPED),
                          "unpaired": sum(delta[k] for k in WAIT_UNPAIRED),
                          "daemon_cpu_pct": round(100 * (d.cpu() - c0) / elapsed, 2)})

    def exact(s):
        return not s["dropped"] and 0 <= s["perf"] - s["lockscope"] <= s["skipped"]
    clean = [s["events_per_s"] for s in steps if exact(s)]
    lossy = [s for s in steps if not exact(s)]
    return steps, max(clean) if clean else 0, lossy[0] if lossy else None


# ---- the daemon alone ----

def ready_ms(n=5):
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        with lockscoped():
            times.append((time.monotonic() - t0) * 1000)
    return statistics.median(times)


def idle(seconds):
    with lockscoped() as sock:
        d = Daemon(sock)
        time.sleep(2)  # past start-up: symbol tables loaded, first drain done
        c0, t0 = d.cpu(), time.monotonic()
        time.sleep(seconds)
        cpu = (d.cpu() - c0) / (time.monotonic() - t0)
        return cpu, rss_bytes(d.pid)


# the 1 s ring (10 slots) rolled over once, and a second for the last drain
WINDOW_MERGE_S = 12
CACHE_IDLE_S = 10	# lockscoped's cache-idle default


def many_stacks(queries):
    """More than 100 k distinct user stacks and keys (stack_fanout: 2^17 waits, each under
    a call path of its own, a stack taken on every one), then the daemon's RSS, now and at
    its peak, and `lockscope top -w 1m -E 50 -Y futex -p PID` latency over them (a window that
    holds them all). The waits are timed futex waits that no thread ends (futex:condvar, idle):
    `top` leaves those out unless -Y asks, and then it would time a filter over 100 k keys
    and nothing else (as it did from 7290a46 to c5622e3); with -Y futex every key makes a
    row, its caller's stack is symbolized for the first 50, and RSS is read after that, and
    again once the idle symbolizer let its files go and the view's cells and the query's
    arrays kept for the next one are given back (cache-idle).
    Frame-pointer stacks (no dumps: 100 k of them would need a ring buffer of dumps); the
    BPF stack map is sized so that few of the stacks collide in it (its buckets are a hash
    of the stack), and kept to 32 frames."""
    with lockscoped(*ALL_ARGS, "--user-stack-bytes=0", "--user-stack-entries=524288", "--max-stack=32",
                    "--max-stacks=200000") as sock:
        d = Daemon(sock)
        fanout = subprocess.Popen([os.path.join(BUILD, "workloads", "stack_fanout"), "--waits", "131072"],
                                  stdout=subprocess.DEVNULL)
        if fanout.wait():
            raise RuntimeError(f"stack_fanout exited {fanout.returncode}")
        # until the 1 s slots that hold the waits have been merged into a coarser one: the
        # daemon holds both for a while then, and that peak is what a host must have
        time.sleep(WINDOW_MERGE_S)
        st = d.status()
        # its keys only: the host's own idle waits are longer and would fill the table
        query = [os.path.join(BUILD, "lockscope"), "--socket", sock, "top", "-w", "1m", "-E", "50", "-Y", "futex",
                 "-p", str(fanout.pid)]
        rows = json.loads(subprocess.run([*query, "--json"], capture_output=True, check=True, text=True).stdout)["rows"]
        if len(rows) < 50:
            raise RuntimeError(f"top -Y futex showed {len(rows)} rows of stack_fanout's waits, not 50")
        lat = []
        for _ in range(queries):
            t0 = time.monotonic()
            subprocess.run(query, capture_output=True, check=True)
            lat.append((time.monotonic() - t0) * 1000)
        lat.sort()
        rss = rss_bytes(d.pid)
        released = d.status()["self"]["user_symbols"]["symbolizer_releases"]
        deadline = time.monotonic() + CACHE_IDLE_S + 5

        def given_back():
            s = d.status()
            return s["self"]["user_symbols"]["symbolizer_releases"] > released and \
                not s["aggregator"]["view_cache_bytes"] and not s["self"]["query_scratch_bytes"]
        while not given_back():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the query's caches were not given back {CACHE_IDLE_S + 5} s after the queries")
            time.sleep(0.5)
        return {"stacks": st["stacks"]["interned"], "keys": st["aggregator"]["keys"],
                "rss": rss, "settled": rss_bytes(d.pid), "peak": rss_bytes(d.pid, "VmHWM"),
                "p50": lat[len(lat) // 2], "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))]}


def daemon_cpu_under_load(seconds):
    """The daemon's CPU share while each workload runs, once."""
    out = {}
    with lockscoped() as sock:
        d = Daemon(sock)
        for name in WORKLOADS:
            c0, t0 = d.cpu(), time.monotonic()
            run_workload(name, seconds)
            out[name] = round(100 * (d.cpu() - c0) / (time.monotonic() - t0), 2)
    return out


# ---- output ----

def host_info():
    def out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[0]
        except (OSError, IndexError):
            return None
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), None)
    return {"hostname": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(), "cpu_model": model,
            "mem_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "lockscope_commit": out(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]),
            "perf_bpf": out([PERF_BPF, "--version"]), "perf": out(["perf", "--version"]),
            "bpftrace": out(["bpftrace", "--version"]), "stress_ng": out(["stress-ng", "--version"]),
            "load_avg_start": os.getloadavg()[0]}


def pct(x):
    return "–" if x is None else f"{-100 * x:+.1f} %"


def interval(r, key="ci95"):
    lo, hi = r[key]
    return f"[{-100 * hi:+.1f}, {-100 * lo:+.1f}]"


def empty_ns(v):
    """The empty program a program's ns/event is held to: the one run beside lockscoped
    where there is one (the samplers: floor --samplers), else the floor's own run's. For
    the samplers a low one: an empty sampler in lockscoped's own place costs 2-3x it
    (docs/performance.md), so their ratio errs high."""
    return v.get("beside_ns") or v["floor_ns"]


def goals(res):
    """Every goal of the always-on issue, measured in this run: (goal, measured, met)."""
    out = []
    for w, by in res["workloads"].items():
        ls, bound = by["lockscope_default"], by.get("bound")
        measured = f"{pct(ls['loss'])} {interval(ls)}"
        if bound:
            # the least exact work's own loss: past the goal at its interval's best end, no
            # exact tracer meets the goal on this host
            measured += f"; bound {pct(bound['loss'])} {interval(bound)}"
            if bound["ci95"][0] > LOSS_GOAL:
                measured += ": out of reach here"
        aa = by.get("untraced")
        if aa:
            measured += f"; A/A {pct(aa['loss'])} {interval(aa)}"
        # met when the whole interval is inside the goal: a median inside it with an
        # interval reaching past it shows nothing either way
        met = ls["ci95"][1] <= LOSS_GOAL
        if ls["loss"] <= LOSS_GOAL and not met:
            measured += "; undecided: the interval reaches past the goal"
        out.append((f"{w}: loss ≤ {100 * LOSS_GOAL:.0f} %", measured, met))
    for w, by in res.get("interleaved", {}).items():
        ls = by["lockscope_default"]
        measured = f"{pct(ls['loss'])} {interval(ls)}"
        for c, what in (("floor_switch", "the empty switch program"), ("untraced", "A/A")):
            if c in by:
                measured += f"; {what} {pct(by[c]['loss'])} {interval(by[c])}"
        met = ls["ci95"][1] <= LOSS_GOAL
        if ls["loss"] <= LOSS_GOAL and not met:
            measured += "; undecided: the interval reaches past the goal"
        out.append((f"{w}, interleaved ({1000 * ls['slice_s']:.0f} ms slices, {ls['slices']} of each): "
                    f"loss ≤ {100 * LOSS_GOAL:.0f} %", measured, met))
    for w in PERF_GOAL_WORKLOADS:
        ls, pf = res["workloads"][w]["lockscope_default"], res["workloads"][w]["perf_lock_bpf"]
        # no worse than perf within the noise: our interval reaches perf's median or better
        ok = ls["ci95"][0] <= max(pf["loss"], 0)
        out.append((f"{w}: no worse than perf lock contention -ab", f"{pct(ls['loss'])} vs {pct(pf['loss'])}", ok))
    bpf = res["bpf_ns_per_event"]
    worst = max(((k, v["ns"] / empty_ns(v)) for k, v in bpf.items() if empty_ns(v) and
                 "contention" not in k), key=lambda kv: kv[1], default=(None, None))
    if worst[0]:
        out.append(("BPF ns/event ≤ 2× the empty program (each)", f"worst {worst[0]} {worst[1]:.1f}×", worst[1] <= 2))
    b, e = bpf.get("klock:tp_btf/contention_begin"), bpf.get("klock:tp_btf/contention_end")
    if b and e and b["floor_ns"] and e["floor_ns"]:
        ratio = (b["ns"] + e["ns"]) / (b["floor_ns"] + e["floor_ns"])
        out.append(("contention_begin + end ≤ 3× their empty programs", f"{b['ns']} + {e['ns']} ns = {ratio:.1f}×",
                    ratio <= 3))
    cap = res["capacity"]
    top = max(s["events_per_s"] for s in cap["steps"])
    out.append(("no drop, exact counts at 10^6 lock events/s", f"lossless up to {res['max_lossless_events_per_s']:,}/s "
                f"(highest step {top:,}/s)", res["max_lossless_events_per_s"] >= min(1_000_000, top)))
    d = res["daemon"]
    out.append(("daemon CPU idle ≤ 0.5 %", f"{d['cpu_pct_idle']:.2f} %", d["cpu_pct_idle"] <= 0.5))
    busiest = max(s["daemon_cpu_pct"] for s in cap["steps"])
    out.append(("daemon CPU ≤ 2 % at 10^6 events/s", f"{busiest:.2f} % (busiest capacity step)", busiest <= 2))
    out.append(("daemon RSS ≤ 64 MB idle and with 100 k stacks",
                f"{d['rss_mb_idle']:.1f} / {d['rss_mb_100k_stacks']:.1f} MB, peak {d['rss_mb_100k_peak']:.1f} MB, "
                f"{d.get('rss_mb_100k_settled', float('nan')):.1f} MB once the symbolizer is let go "
                f"({d['stacks_100k']:,} stacks)",
                max(d["rss_mb_idle"], d["rss_mb_100k_stacks"], d["rss_mb_100k_peak"]) <= 64
                and d["stacks_100k"] >= 100_000))
    out.append(("`top -w 1m -E 50` over 100 k keys p99 ≤ 20 ms (-Y futex: each a row)", f"{res['query_ms']['p99']:.1f} ms ({res['query_ms']['keys']:,} keys)",
                res["query_ms"]["p99"] <= 20 and res["query_ms"]["keys"] >= 100_000))
    return out


def markdown(res, args):
    L = []
    h = res["host"]
    L.append("# lockscope benchmarks\n")
    L.append(f"`make bench` on {h['hostname']}: Linux {h['kernel']}, {h['cpus']} CPUs ({h['cpu_model']}), "
             f"{h['mem_gb']} GiB; lockscope {h['lockscope_commit']}, {h['date']}; load average at start "
             f"{h['load_avg_start']:.2f}. Each figure is the median of {args.pairs} pairs of {args.seconds:g} s runs "
             f"(traced, untraced, side by side, alternating which goes first) with its bootstrap 95 % interval.\n")
    L.append("## Goals\n")
    L.append("| goal | measured | met |")
    L.append("| --- | --- | --- |")
    for g, m, ok in goals(res):
        L.append(f"| {g} | {m} | {'yes' if ok else 'no'} |")
    L.append("\n## Throughput against no tracing\n")
    L.append("Loss is negative; a positive figure means the traced runs were faster. CPU/op: the whole "
             "machine's CPU time per operation against the untraced runs' (more is worse). `floor`: empty "
             "programs on lockscoped's hooks; `floor_switch`: the empty `sched_switch` program alone, the hook "
             "no futex timing does without here (switch-bound loads only); `bound`: the least work that counts "
             "and times every wait exactly on the same hooks (`bench/bound.bpf.c`). A goal the bound misses at "
             "the best end of its interval is out of reach for any exact tracer on this host. `untraced`: "
             "nothing traced in the traced runs either (A/A), the host's own noise: a loss inside its interval "
             "cannot be told from none here.\n")
    L.append("| workload | none | " + " | ".join(TRACED) + " |")
    L.append("| --- | --- | " + " | ".join("---" for _ in TRACED) + " |")
    for w, by in res["workloads"].items():
        cells = [f"{by['none']['median']:,.0f} {WORKLOADS[w][1]}"]
        for c in TRACED:
            r = by.get(c)
            if not r:
                cells.append("–")
                continue
            cpu = f"; CPU/op {100 * r['cpu_per_op']:+.1f} %" if "cpu_per_op" in r else ""
            cells.append(f"{pct(r['loss'])} {interval(r)}{cpu}")
        L.append(f"| {w} | " + " | ".join(cells) + " |")
    L.append("\nWorkloads: " + "; ".join(f"`{w}` {WORKLOADS[w][0]}" for w in WORKLOADS) + ".\n")
    for w, by in res.get("interleaved", {}).items():
        any_r = next(iter(by.values()))
        L.append(f"## {w}, interleaved\n")
        L.append(f"{len(any_r['runs'])} runs of {any_r['seconds']:g} s per configuration, by turns, the tracer's "
                 f"programs taken off their hooks and put back every {1000 * any_r['slice_s']:.0f} ms "
                 "(lockscoped's pause and resume; the floor's off and on): each traced slice against the mean "
                 f"of the untraced slices on either side, {1000 * INTERLEAVE_GUARD_S:.0f} ms cut from both ends "
                 "of each; the interval resamples runs, then slices. This host's rates swing in phases of 0.25-2 s "
                 "(the ping-pong's by a third), which runs of 3 s side by side straddle and slices this short "
                 "mostly do not; the workload notes its own progress (`--progress`).\n")
        L.append("| configuration | loss | each run | slices |")
        L.append("| --- | --- | --- | --- |")
        for c, r in by.items():
            L.append(f"| {c} | {pct(r['loss'])} {interval(r)} | {', '.join(pct(x) for x in r['runs'])} | "
                     f"{r['slices']} |")
        L.append("")
    L.append("## BPF cost per event (kernel.bpf_stats_enabled: run_time_ns / run_cnt)\n")
    L.append("lockscoped at defaults over every workload once (started for each), against the empty program on "
             "the same hook (floor: in a run of the empty programs; beside: the empty samplers run beside "
             "lockscoped, `floor --samplers`, the one a sampler's ratio is taken against: at 47 and 199 samples/s "
             "per CPU nothing stays cached between a program's runs, and what it costs is much what else ran "
             "since; an empty sampler in lockscoped's own place costs 2-3× it, so the samplers' ratio errs high) "
             "and the bound's (the least exact work, `bench/bound.bpf.c`; – where it has none).\n")
    L.append("| program (component:hook) | events | ns/event | floor ns/event | beside ns/event | ratio | "
             "bound ns/event |")
    L.append("| --- | --- | --- | --- | --- | --- | --- |")
    for k, v in res["bpf_ns_per_event"].items():
        ratio = f"{v['ns'] / empty_ns(v):.1f}×" if empty_ns(v) else "–"
        L.append(f"| {k} | {v['events']:,} | {v['ns']} | {v['floor_ns'] if v['floor_ns'] is not None else '–'} | "
                 f"{v.get('beside_ns') or '–'} | {ratio} | {v.get('bound_ns') or '–'} |")
    by = {k: v["by_workload"] for k, v in res["bpf_ns_per_event"].items() if v.get("by_workload")}
    if by:
        L.append("\nThe same runs, workload by workload: ns per event (events). Where a program's work per event "
                 "differs, its average above is its busiest workloads':\n")
        L.append("| program | " + " | ".join(WORKLOADS) + " |")
        L.append("| --- |" + " --- |" * len(WORKLOADS))
        for k, w in by.items():
            L.append(f"| {k} | " + " | ".join(f"{w[n]['ns']} ({w[n]['events']:,})" if n in w else "–"
                                              for n in WORKLOADS) + " |")
    h = res.get("helper_ns")
    if h:
        L.append("\n## What one operation costs here\n")
        L.append(f"One program per operation on `sched_switch`, all attached at once (`bench/helpers.bpf.c`), over "
                 f"one pingpong run ({h['events']:,} switches); the empty program: {h['empty_ns']} ns per event. "
                 "What lockscope's programs are built from, and why they read what they read:\n")
        L.append("| operation | ns/event | over the empty program |")
        L.append("| --- | --- | --- |")
        for name, v in h["ops"].items():
            L.append(f"| `{name}` | {v['ns']} | {v['over_empty_ns']:+d} |")
    L.append("\n## Capacity: kernel-lock events per second with nothing lost\n")
    L.append("pipe_storm at rising thread counts under lockscoped at defaults; waits counted by lockscope "
             "against `perf stat -e lock:contention_end` on the same process. *skipped*: waits inside "
             "one of our programs on the same CPU (an interrupt's, a map's lock), for which the kernel runs "
             "no program (status `prog_recursion`, `self_lock`); *unpaired*: their other halves "
             "(`unmatched_end`, `missed_end`); *dropped*: waits lockscope saw and lost (`ringbuf_full`, "
             "`wait_map_full`, `nest_too_deep`, `wait_table_full`). A step is exact when nothing was "
             "dropped and perf's count exceeds ours by no more than the skipped waits:\n")
    L.append("| threads | events/s | lockscope | perf | skipped | unpaired | dropped | daemon CPU |")
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in res["capacity"]["steps"]:
        L.append(f"| {s['threads']} | {s['events_per_s']:,} | {s['lockscope']:,} | {s['perf']:,} | {s['skipped']} | "
                 f"{s.get('unpaired', '–')} | {s['dropped']} | {s['daemon_cpu_pct']:.2f} % |")
    L.append(f"\nHighest lossless rate: {res['max_lossless_events_per_s']:,} events/s.\n")
    d = res["daemon"]
    L.append("## The daemon\n")
    L.append("| figure | value |")
    L.append("| --- | --- |")
    L.append(f"| time to READY (start to answering `status`, median of 5) | {d['ready_ms']:.0f} ms |")
    L.append(f"| CPU idle (10 s, % of one core) | {d['cpu_pct_idle']:.2f} % |")
    L.append("| CPU under load (per workload) | " +
             ", ".join(f"{w} {v:.1f} %" for w, v in d["cpu_pct_by_workload"].items()) + " |")
    L.append(f"| RSS idle | {d['rss_mb_idle']:.1f} MB |")
    L.append(f"| RSS with {d['stacks_100k']:,} stacks, {d['keys_100k']:,} keys: after the queries, its peak "
             f"(VmHWM: during a query, or the 1 s slots and the coarser one made of them, both held for a while), "
             f"and once the idle symbolizer let its files go | "
             f"{d['rss_mb_100k_stacks']:.1f} MB, peak {d['rss_mb_100k_peak']:.1f} MB, "
             f"{d.get('rss_mb_100k_settled', float('nan')):.1f} MB idle |")
    L.append(f"| `lockscope top -w 1m -E 50 -Y futex -p PID` over those keys (each a row), p50 / p99 ({args.queries} queries, CLI start included) | "
             f"{res['query_ms']['p50']:.1f} / {res['query_ms']['p99']:.1f} ms |")
    L.append("\nReproduce: `sudo make bench` (builds the anchors once into build/bench, then about "
             f"{res['elapsed_s'] / 60:.0f} min on a quiet machine).")
    return "\n".join(L) + "\n"


def check_floor():
    """The floor and the bound must stand on exactly lockscoped's hooks: its always-attached
    programs, and with --all those it attaches on demand too (but the precise scans' syscall
    tracepoints, which the bench never makes it attach)."""
    with lockscoped() as sock:
        progs = call(sock, {"cmd": "status"})["programs"]
    always = sorted((p["source"], p["hook"]) for p in progs if not p["on_demand"])
    every = sorted((p["source"], p["hook"]) for p in progs if not p["hook"].startswith("tracepoint/syscalls/"))
    for config, ours in (("floor", always), ("floor_all", every), ("bound", always)):
        with tracer(config) as f:
            floor = f.hooks()
        if ours != floor:
            sys.exit(f"bench/run.py: {config}'s hooks {floor} are not lockscoped's {ours}: update bench/floor.bpf.c")


def known_configs():
    """Every configuration --configs may name: the tracers, lockscoped's (those --define made too), the floors."""
    return TRACED + list(LOCKSCOPED_CONFIGS) + list(FLOOR_MODES)


def define(spec):
    """--define NAME[@PATH]=ARGS: a lockscoped configuration of one's own (its options, as
    shell words; the daemon at PATH: another build), for --only to measure beside the rest."""
    head, sep, words = spec.partition("=")
    name, at, path = head.partition("@")
    if not sep or not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name in known_configs() or name == "none":
        sys.exit(f"bench/run.py: --define {spec!r}: want NAME=ARGS or NAME@PATH=ARGS, NAME new "
                 "(letters, digits, _ . -)")
    if at and not os.access(path, os.X_OK):
        sys.exit(f"bench/run.py: --define {name}: {path} is not an executable lockscoped")
    try:
        LOCKSCOPED_CONFIGS[name] = shlex.split(words)
    except ValueError as e:
        sys.exit(f"bench/run.py: --define {name}: {e}")
    if at:
        LOCKSCOPED_BINARIES[name] = path


def only_tools(args):
    """What --only's workloads and configurations run (the floor: its hooks are checked)."""
    configs, names = args.configs.split(","), args.only.split(",")
    need = {FLOOR: True, PERF_BPF: "perf_lock_bpf" in configs, "bpftrace": "bpftrace" in configs,
            "stress-ng": any(n in WORKLOADS and isinstance(WORKLOADS[n][3], str) for n in names)}
    return [tool for tool, needed in need.items() if needed]


def only(args):
    """--only: the paired runs of some workloads and configurations, as a table."""
    names, configs = args.only.split(","), args.configs.split(",")
    bad = [n for n in names if n not in WORKLOADS] + \
          [c for c in configs if c not in known_configs()]
    if bad:
        sys.exit(f"bench/run.py: unknown workload or configuration: {', '.join(bad)}")
    if args.interleaved:
        if [n for n in names if n not in INTERLEAVED]:
            sys.exit(f"bench/run.py: --interleaved measures {' and '.join(INTERLEAVED)} only (they note their "
                     "progress)")
        print(f"{'workload':<14} {'config':<18} {'loss':>8} {'95 % interval':>18} {'slices':>7}  runs")
        for name in names:
            for config, r in interleaved(configs, args.pairs, args.seconds, name).items():
                lo, hi = r["ci95"]
                print(f"{name:<14} {config:<18} {-100 * r['loss']:+7.2f}% [{-100 * hi:+6.2f}, {-100 * lo:+6.2f}] "
                      f"{r['slices']:>7}  " + " ".join(f"{-100 * x:+.2f}" for x in r["runs"]))
        return
    res = matrix(args, names, configs)
    print(f"{'workload':<14} {'config':<18} {'loss':>8} {'95 % interval':>18} {'CPU/op':>8}")
    for name, by_config in res.items():
        for config, r in by_config.items():
            if config == "none":
                continue
            lo, hi = r["ci95"]
            print(f"{name:<14} {config:<18} {-100 * r['loss']:+7.1f}% [{-100 * hi:+6.1f}, {-100 * lo:+6.1f}] "
                  f"{100 * r.get('cpu_per_op', 0):+7.1f}%")


def main():
    ap = argparse.ArgumentParser(description="lockscope's cost and capacity against perf, bpftrace and the floor")
    ap.add_argument("--pairs", type=int, default=7, help="traced/untraced pairs per workload and tracer")
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", default=HERE, help="where results.md and results.json go")
    ap.add_argument("--force", action="store_true", help="run even when the machine looks busy")
    ap.add_argument("--check-floor", action="store_true", help="only check that the floor's hooks are lockscoped's")
    ap.add_argument("--only", metavar="W,W", help=f"only the paired runs of these workloads ({', '.join(WORKLOADS)}), "
                    "printed; results.md and results.json are left as they are")
    ap.add_argument("--configs", metavar="C,C", default=",".join(TRACED),
                    help="with --only: these configurations (lockscope_default, lockscope_all, "
                    "lockscope_block_waits, perf_lock_bpf, bpftrace, floor, floor_all, floor_switch, bound, untraced, "
                    "floor_waking, floor_lock_begin, floor_lock_end, and those --define names)")
    ap.add_argument("--interleaved", action="store_true",
                    help=f"with --only {' or '.join(INTERLEAVED)}: --pairs runs of --seconds per configuration, "
                    f"the tracer's programs on and off by turns every {INTERLEAVE_SLICE_S * 1000:.0f} ms "
                    "(lockscoped's pause and resume)")
    ap.add_argument("--render", metavar="JSON", help="write results.md (and the goals in results.json) again from "
                    "a results.json, measuring nothing: after a change to how the figures are judged or shown")
    ap.add_argument("--define", metavar="NAME[@PATH]=ARGS", action="append", default=[],
                    help="with --only: a lockscoped configuration named NAME, with options ARGS "
                    "(one argument, shell words), of the daemon at PATH if given (another build)")
    args = ap.parse_args()
    if args.define and not args.only:
        sys.exit("bench/run.py: --define names configurations for --only; the whole bench measures its own")
    for spec in args.define:
        define(spec)
    if args.render:
        render(args)
        return
    if os.geteuid() != 0:
        sys.exit("bench/run.py loads BPF programs and runs perf -a: run it as root (sudo make bench)")
    tools = [FLOOR] if args.check_floor else only_tools(args) if args.only else \
        [FLOOR, PERF_BPF, "perf", "bpftrace", "stress-ng"]
    for tool in tools:
        if not shutil.which(tool):
            sys.exit(f"bench/run.py: {tool} is missing: run 'make bench-tools' first")
    check_floor()
    if args.check_floor:
        print("the floor's hooks are lockscoped's")
        return
    load = os.getloadavg()[0]
    if load > BUSY_LOAD and not args.force:
        sys.exit(f"bench/run.py: load average {load:.2f} > {BUSY_LOAD}: the machine is busy and 3 % could not be "
                 "seen; stop what runs beside it (or --force, and read the intervals)")
    if args.only:
        only(args)
        return
    t_start = time.monotonic()
    res = {"host": host_info()}
    res["workloads"] = matrix(args)
    res["interleaved"] = {}
    for name in INTERLEAVED:
        log(f"{name} interleaved ({INTERLEAVE_RUNS} runs of {INTERLEAVE_SECONDS} s each, "
            f"{INTERLEAVE_SLICE_S * 1000:.0f} ms slices)")
        res["interleaved"][name] = interleaved(list(INTERLEAVE_CONFIGS), name=name)
    log("BPF cost per event")
    res["bpf_ns_per_event"] = bpf_costs(args.seconds)
    log("helper costs")
    res["helper_ns"] = helper_costs(args.seconds)
    log("capacity")
    steps, best, first = lossless(args.seconds)
    res["max_lossless_events_per_s"] = best
    res["capacity"] = {"steps": steps, "first_loss": first}
    log("daemon")
    idle_cpu, idle_rss = idle(10)
    ms = many_stacks(args.queries)
    res["daemon"] = {"rss_mb_idle": round(idle_rss / 2**20, 1), "rss_mb_100k_stacks": round(ms["rss"] / 2**20, 1),
                     "rss_mb_100k_peak": round(ms["peak"] / 2**20, 1),
                     "rss_mb_100k_settled": round(ms["settled"] / 2**20, 1),
                     "cpu_pct_idle": round(100 * idle_cpu, 3), "cpu_pct_by_workload": daemon_cpu_under_load(args.seconds),
                     "ready_ms": round(ready_ms(), 1), "stacks_100k": ms["stacks"], "keys_100k": ms["keys"]}
    res["query_ms"] = {"p50": round(ms["p50"], 2), "p99": round(ms["p99"], 2), "keys": ms["keys"]}
    res["elapsed_s"] = round(time.monotonic() - t_start)
    res["host"]["load_avg_end"] = os.getloadavg()[0]
    write_results(res, args)


def write_results(res, args):
    res["goals"] = [{"goal": g, "measured": m, "met": ok} for g, m, ok in goals(res)]
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    md = markdown(res, args)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    print(md)


def render(args):
    """results.md and the goals again from @args.render's figures, as they were run."""
    with open(args.render) as f:
        res = json.load(f)
    args.pairs = max(len(r.get("pairs", ())) for by in res["workloads"].values() for r in by.values())
    write_results(res, args)


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:	# a tracer that could not start, a workload that said nothing: one line
        sys.exit(f"bench/run.py: {e}")
