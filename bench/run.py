#!/usr/bin/env python3
"""make bench: lockscope's overhead and capacity, side by side with perf, bpftrace and the
empty-hook floor, in one run. Writes bench/results.md and bench/results.json.

Throughput: every workload runs under every configuration; the configurations alternate
(each repetition starts one further along the list) and the median of the repetitions is
reported with its spread, as a loss against `none` and against the `floor`. This machine
is shared and noisy: read the spread before the figures.

Configurations:
  none               nothing traced
  lockscope_default  lockscoped at its defaults (every source on, stacks sampled)
  lockscope_all      lockscoped with every sampling limit lifted: a stack on every wait
  floor              empty BPF programs on exactly the hooks lockscoped uses (bench/floor)
  perf_lock_bpf      perf lock contention -ab (perf 6.1 built with BPF skeletons, anchors.sh)
  perf_lock_record   perf lock record -a (Debian's perf; tracepoints to a file)
  bpftrace           bpftrace aggregating kernel lock waits per lock (bench/lock_contention.bt)
  syscall_tp_empty   empty programs on syscalls:sys_enter/exit_futex (the naive futex design)

Then, under lockscoped alone: BPF ns per event per program against the floor's program on
the same hook (kernel.bpf_stats_enabled), the highest event rate handled without a drop,
daemon CPU and RSS idle, under load and with ~100 k distinct stacks, `lockscope top -E 50`
latency with that many keys, and the time to READY.
Usage: sudo make bench   (or: sudo bench/run.py [--runs N] [--seconds S] [--quick])
"""
import argparse
import contextlib
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from lsbench import BUILD, ROOT, bpf_stats, call, cpu_seconds, lockscoped, pingpong, rss_bytes, workload

BENCH = os.path.join(BUILD, "bench")
PERF_BPF = os.path.join(BENCH, "perf")
FLOOR = os.path.join(BENCH, "floor")
HERE = os.path.dirname(os.path.abspath(__file__))

CONFIGS = ["none", "lockscope_default", "lockscope_all", "floor", "perf_lock_bpf",
           "perf_lock_record", "bpftrace", "syscall_tp_empty"]
ALL_ARGS = ["--stack-rate=1000000", "--cpu-stack-rate=1000000", "--user-dump-rate=1000000"]

# name: (what it is, its unit, the command minus --seconds; None: pingpong's rounds)
WORKLOADS = {
    "futex_server": ("mutex_server: 8 workers, one mutex, short critical section", "messages/s",
                     ["mutex_server", "--workers", "8", "--fixed"]),
    "kernel_locks": ("mmap_storm: 2 writers mmap/munmap, 2 readers madvise/mincore/fault (mmap_lock, page tables)",
                     "ops/s", ["mmap_storm", "--writers", "2", "--readers", "2"]),
    "pingpong": ("pingpong: two threads, two pipes, one CPU (a switch per message)", "round trips/s", None),
    "wake_storm": ("wake_storm: 16 threads woken at once, over and over", "rounds/s",
                   ["wake_storm", "--threads", "16"]),
    "pipe_storm": ("pipe_storm: 4 threads on one pipe (a kernel lock storm: pipe->mutex)", "messages/s",
                   ["pipe_storm", "--threads", "4"]),
}
GOALS = {  # loss at lockscope_default: what we aim for (reported, never asserted)
    "futex_server": 0.05, "kernel_locks": 0.01, "pingpong": 0.03,
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run_workload(name, seconds):
    cmd = WORKLOADS[name][2]
    if cmd is None:
        return pingpong(int(seconds * 90000))
    return workload(*cmd, "--seconds", str(seconds))["per_s"]


# ---- configurations: each a context manager yielding a probe of its programs' stats ----

class Tracer:
    """A running configuration. stats(): {hook: (run_cnt, run_time_ns)} of its programs so
    far, or None; drops(): its ring buffer drops so far."""
    def stats(self):
        return None

    def drops(self):
        return 0

    def cpu(self):
        return None


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

    def drops(self):
        return self.status()["dropped"]["ringbuf_full"]

    def cpu(self):
        return cpu_seconds(self.pid)


class Floor(Tracer):
    def __init__(self, proc):
        self.proc = proc

    def stats(self):
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        out = {}
        for p in json.loads(self.proc.stdout.readline()):
            # each floor program is named for the component it shadows: ulock_switch...
            out[(p["name"].split("_")[0], p["hook"])] = (p["run_cnt"], p["run_time_ns"])
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


@contextlib.contextmanager
def tracer(config, scratch):
    if config == "none":
        yield Tracer()
    elif config in ("lockscope_default", "lockscope_all"):
        with lockscoped(*(ALL_ARGS if config == "lockscope_all" else [])) as sock:
            yield Daemon(sock)
    elif config == "floor":
        with process([FLOOR], first_line, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as p:
            yield Floor(p)
            p.stdin.close()
    elif config == "perf_lock_bpf":
        # no ready line: -ab loads its skeleton, then waits for SIGINT; 1 s is ample here
        with process([PERF_BPF, "lock", "contention", "-ab"], lambda p: time.sleep(1),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
            yield Tracer()
    elif config == "perf_lock_record":
        data = os.path.join(scratch, "perf.data")
        with process(["perf", "lock", "record", "-a", "-o", data], lambda p: time.sleep(1),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
            yield Tracer()
        os.unlink(data)
    elif config in ("bpftrace", "syscall_tp_empty"):
        prog = ["-e", "tracepoint:syscalls:sys_enter_futex {} tracepoint:syscalls:sys_exit_futex {}"] \
            if config == "syscall_tp_empty" else [os.path.join(HERE, "lock_contention.bt")]
        with process(["bpftrace", *prog], first_line, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                     text=True):  # "Attaching N probes..." once attached
            yield Tracer()
    else:
        raise ValueError(config)


# ---- the throughput matrix ----

def matrix(args, scratch):
    runs = {w: {c: [] for c in CONFIGS} for w in WORKLOADS}
    prog = {}		# config -> {(source, hook): [run_cnt, run_time_ns]}
    daemon_cpu = {w: [] for w in WORKLOADS}
    drops = 0
    for rep in range(args.runs):
        order = CONFIGS[rep % len(CONFIGS):] + CONFIGS[:rep % len(CONFIGS)]
        for config in order:
            log(f"[{rep + 1}/{args.runs}] {config}")
            with tracer(config, scratch) as t:
                before = t.stats() or {}
                for w in WORKLOADS:
                    c0, t0 = t.cpu(), time.monotonic()
                    runs[w][config].append(run_workload(w, args.seconds))
                    if c0 is not None and config == "lockscope_default":
                        daemon_cpu[w].append((t.cpu() - c0) / (time.monotonic() - t0))
                after = t.stats() or {}
                drops += t.drops()
            acc = prog.setdefault(config, {})
            for k, (cnt, ns) in after.items():
                b = before.get(k, (0, 0))
                a = acc.setdefault(k, [0, 0])
                a[0] += cnt - b[0]
                a[1] += ns - b[1]
    return runs, prog, daemon_cpu, drops


def summarize(runs):
    out = {}
    for w, by_config in runs.items():
        base = statistics.median(by_config["none"]) if by_config["none"] else None
        floor = statistics.median(by_config["floor"]) if by_config["floor"] else None
        out[w] = {}
        for c, r in by_config.items():
            if not r:
                continue
            med = statistics.median(r)
            out[w][c] = {"median": round(med), "runs": [round(x) for x in r],
                         "spread": round((max(r) - min(r)) / med, 4),
                         "loss": round(1 - med / base, 4) if base else None,
                         "loss_vs_floor": round(1 - med / floor, 4) if floor else None}
    return out


def bpf_costs(prog):
    """ns per event of each lockscoped program (default config) and of the floor's on its hook."""
    out = {}
    ours, floor = prog.get("lockscope_default", {}), prog.get("floor", {})
    for (source, hook), (cnt, ns) in sorted(ours.items()):
        if not cnt:
            continue
        f = floor.get((source, hook))
        out[f"{source}:{hook}"] = {"ns": round(ns / cnt), "events": cnt,
                                   "floor_ns": round(f[1] / f[0]) if f and f[0] else None}
    return out


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


def lossless(seconds):
    """The event rate at each load step, and whether the ring buffers dropped any."""
    steps = []
    with lockscoped() as sock:
        d = Daemon(sock)
        for threads in (1, 2, 4, 8, 16):
            s0 = d.status()
            t0 = time.monotonic()
            subprocess.run([os.path.join(BUILD, "workloads", "pipe_storm"), "--threads", str(threads),
                            "--seconds", str(seconds)], capture_output=True, check=True)
            s1 = d.status()
            elapsed = time.monotonic() - t0
            events = sum(s1["events"][k] - s0["events"][k] for k in ("waits", "futex_waits"))
            dropped = s1["dropped"]["ringbuf_full"] - s0["dropped"]["ringbuf_full"]
            steps.append({"threads": threads, "events_per_s": round(events / elapsed), "ringbuf_full": dropped})
    clean = [s["events_per_s"] for s in steps if not s["ringbuf_full"]]
    lossy = [s for s in steps if s["ringbuf_full"]]
    return steps, max(clean) if clean else 0, lossy[0] if lossy else None


def many_stacks(queries):
    """~100 k distinct user stacks and keys (stack_fanout, a stack on every wait), then the
    daemon's RSS and `lockscope top -E 50` latency over them. Frame-pointer stacks (no
    dumps: 100 k of them would need a ring buffer of dumps), and maps and tables sized for
    that many stacks."""
    with lockscoped(*ALL_ARGS, "--user-stack-bytes=0", "--user-stack-entries=131072",
                    "--max-stacks=150000") as sock:
        d = Daemon(sock)
        subprocess.run([os.path.join(BUILD, "workloads", "stack_fanout"), "--waits", "100000"],
                       capture_output=True, check=True)
        time.sleep(1)  # the last drain
        st = d.status()
        lat = []
        for _ in range(queries):
            t0 = time.monotonic()
            subprocess.run([os.path.join(BUILD, "lockscope"), "--socket", sock, "top", "-E", "50"],
                           capture_output=True, check=True)
            lat.append((time.monotonic() - t0) * 1000)
        lat.sort()
        return {"stacks": st["stacks"]["interned"], "keys": st["aggregator"]["keys"],
                "rss": rss_bytes(d.pid), "p50": lat[len(lat) // 2], "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))]}


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
            "bpftrace": out(["bpftrace", "--version"])}


def pct(x):
    return "–" if x is None else f"{-100 * x:+.1f} %"


def markdown(res, args):
    L = []
    h = res["host"]
    L.append("# lockscope benchmarks\n")
    L.append(f"`make bench` on {h['hostname']}: Linux {h['kernel']}, {h['cpus']} CPUs ({h['cpu_model']}), "
             f"{h['mem_gb']} GiB; lockscope {h['lockscope_commit']}, {h['date']}. {args.runs} runs of "
             f"{args.seconds:g} s per workload and configuration, alternating; median, spread = (max − min) / median.\n")
    L.append("## Throughput against no tracing (and against the empty-hook floor)\n")
    L.append("Loss is negative; a positive figure means the traced run was faster (tracing a contended "
             "lock can slow its waiters enough to cut the contention).\n")
    L.append("| workload | " + " | ".join(CONFIGS) + " |")
    L.append("| --- | " + " | ".join("---" for _ in CONFIGS) + " |")
    for w, by in res["workloads"].items():
        cells = []
        for c in CONFIGS:
            r = by.get(c)
            if not r:
                cells.append("–")
            elif c == "none":
                cells.append(f"{r['median']:,} {WORKLOADS[w][1]} (±{50 * r['spread']:.0f} %)")
            else:
                cells.append(f"{pct(r['loss'])} (±{50 * r['spread']:.0f} %)")
        L.append(f"| {w} | " + " | ".join(cells) + " |")
    L.append("\nAgainst the floor (empty programs on lockscoped's hooks):\n")
    L.append("| workload | " + " | ".join(c for c in CONFIGS if c not in ("none", "floor")) + " |")
    L.append("| --- | " + " | ".join("---" for c in CONFIGS if c not in ("none", "floor")) + " |")
    for w, by in res["workloads"].items():
        L.append(f"| {w} | " + " | ".join(pct(by[c]["loss_vs_floor"]) if by.get(c) else "–"
                                          for c in CONFIGS if c not in ("none", "floor")) + " |")
    L.append("\nWorkloads: " + "; ".join(f"`{w}` {WORKLOADS[w][0]}" for w in WORKLOADS) + ".\n")
    L.append("## Goals at defaults\n")
    L.append("| goal | measured | met |")
    L.append("| --- | --- | --- |")
    for w, g in GOALS.items():
        loss = res["workloads"][w]["lockscope_default"]["loss"]
        L.append(f"| {w}: loss ≤ {100 * g:.0f} % | {pct(loss)} | {'yes' if loss <= g else 'no'} |")
    kl = res["workloads"]["kernel_locks"]
    if kl.get("perf_lock_bpf"):
        ok = kl["lockscope_default"]["loss"] <= max(kl["perf_lock_bpf"]["loss"], 0) + 0.01
        L.append(f"| kernel_locks: no worse than perf lock contention -ab | {pct(kl['lockscope_default']['loss'])} vs "
                 f"{pct(kl['perf_lock_bpf']['loss'])} | {'yes' if ok else 'no'} |")
    ps = res["workloads"]["pipe_storm"]
    gap = ps["lockscope_default"]["loss_vs_floor"]
    L.append(f"| pipe_storm: within 10 points of the floor | {pct(gap)} vs floor | {'yes' if gap <= 0.10 else 'no'} |")
    worst = max((v["ns"] / v["floor_ns"] for v in res["bpf_ns_per_event"].values() if v["floor_ns"]), default=None)
    if worst:
        L.append(f"| BPF ns/event ≤ 2× the floor | worst {worst:.1f}× | {'yes' if worst <= 2 else 'no'} |")
    d = res["daemon"]
    L.append(f"| daemon CPU idle ≤ 0.5 % | {d['cpu_pct_idle']:.2f} % | {'yes' if d['cpu_pct_idle'] <= 0.5 else 'no'} |")
    L.append(f"| daemon RSS ≤ 64 MB | idle {d['rss_mb_idle']:.1f}, 100 k stacks {d['rss_mb_100k_stacks']:.1f} MB | "
             f"{'yes' if max(d['rss_mb_idle'], d['rss_mb_100k_stacks']) <= 64 else 'no'} |")
    L.append(f"| `top -E 50` p99 ≤ 20 ms | {res['query_ms']['p99']:.1f} ms | {'yes' if res['query_ms']['p99'] <= 20 else 'no'} |")
    L.append("\n## BPF cost per event (kernel.bpf_stats_enabled: run_time_ns / run_cnt)\n")
    L.append("lockscoped at defaults over the whole matrix, against the empty program on the same hook.\n")
    L.append("| program (component:hook) | events | ns/event | floor ns/event | ratio |")
    L.append("| --- | --- | --- | --- | --- |")
    for k, v in res["bpf_ns_per_event"].items():
        ratio = f"{v['ns'] / v['floor_ns']:.1f}×" if v["floor_ns"] else "–"
        L.append(f"| {k} | {v['events']:,} | {v['ns']} | {v['floor_ns'] if v['floor_ns'] is not None else '–'} | {ratio} |")
    L.append("\n## Capacity: events per second without a drop\n")
    L.append("pipe_storm at rising thread counts under lockscoped at defaults (per-CPU ring buffers of "
             "`ringbuf-kb` 256):\n")
    L.append("| threads | events/s | ring buffer drops |")
    L.append("| --- | --- | --- |")
    for s in res["capacity"]["steps"]:
        L.append(f"| {s['threads']} | {s['events_per_s']:,} | {s['ringbuf_full']} |")
    cap = res["capacity"]
    first = "none at any step" if cap["first_drop_events_per_s"] is None else \
        f"at {cap['first_drop_threads']} threads ({cap['first_drop_events_per_s']:,} events/s)"
    L.append(f"\nHighest lossless rate: {res['max_lossless_events_per_s']:,} events/s; first drop: {first}. "
             f"Ring buffer drops in the whole matrix (lockscoped configs, counted in ringbuf_full): "
             f"{cap['matrix_ringbuf_drops']}.\n")
    L.append("## The daemon\n")
    L.append("| figure | value |")
    L.append("| --- | --- |")
    L.append(f"| time to READY (start to answering `status`, median of 5) | {d['ready_ms']:.0f} ms |")
    L.append(f"| CPU idle (10 s, % of one core) | {d['cpu_pct_idle']:.2f} % |")
    L.append("| CPU under load (lockscope_default, per workload) | " +
             ", ".join(f"{w} {v:.1f} %" for w, v in d["cpu_pct_by_workload"].items()) + " |")
    L.append(f"| RSS idle | {d['rss_mb_idle']:.1f} MB |")
    L.append(f"| RSS with {d['stacks_100k']:,} stacks, {d['keys_100k']:,} keys | {d['rss_mb_100k_stacks']:.1f} MB |")
    L.append(f"| `lockscope top -E 50` over those keys, p50 / p99 ({args.queries} queries, CLI start included) | "
             f"{res['query_ms']['p50']:.1f} / {res['query_ms']['p99']:.1f} ms |")
    L.append("\nReproduce: `sudo make bench` (builds the anchors once into build/bench, then about "
             f"{res['elapsed_s'] / 60:.0f} min).")
    return "\n".join(L) + "\n"


def check_floor():
    """The floor must stand on exactly lockscoped's hooks (its always-attached programs)."""
    with lockscoped() as sock:
        ours = sorted((p["source"], p["hook"]) for p in call(sock, {"cmd": "status"})["programs"]
                      if not p["on_demand"])
    with tracer("floor", None) as f:
        floor = sorted(f.stats())
    if ours != floor:
        sys.exit(f"bench/run.py: the floor's hooks {floor} are not lockscoped's {ours}: update bench/floor.bpf.c")


def main():
    ap = argparse.ArgumentParser(description="lockscope's overhead and capacity against perf, bpftrace and the floor")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", default=HERE, help="where results.md and results.json go")
    ap.add_argument("--check-floor", action="store_true", help="only check that the floor's hooks are lockscoped's")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/run.py loads BPF programs and runs perf -a: run it as root (sudo make bench)")
    tools = [FLOOR] if args.check_floor else [FLOOR, PERF_BPF, "perf", "bpftrace"]
    for tool in tools:
        if not shutil.which(tool):
            sys.exit(f"bench/run.py: {tool} is missing: run 'make bench-tools' first")
    check_floor()
    if args.check_floor:
        print("the floor's hooks are lockscoped's")
        return
    t_start = time.monotonic()
    res = {"host": host_info()}
    with bpf_stats(), tempfile.TemporaryDirectory(dir=BENCH) as scratch:
        runs, prog, cpu, drops = matrix(args, scratch)
    res["workloads"] = summarize(runs)
    res["bpf_ns_per_event"] = bpf_costs(prog)
    log("capacity")
    steps, best, first = lossless(args.seconds)
    res["max_lossless_events_per_s"] = best
    res["capacity"] = {"steps": steps, "first_drop_events_per_s": first and first["events_per_s"],
                       "first_drop_threads": first and first["threads"], "matrix_ringbuf_drops": drops}
    log("daemon")
    idle_cpu, idle_rss = idle(10)
    ms = many_stacks(args.queries)
    res["daemon"] = {"rss_mb_idle": round(idle_rss / 2**20, 1), "rss_mb_100k_stacks": round(ms["rss"] / 2**20, 1),
                     "cpu_pct_idle": round(100 * idle_cpu, 3),
                     "cpu_pct_load": round(100 * max(statistics.median(v) for v in cpu.values() if v), 2),
                     "cpu_pct_by_workload": {w: round(100 * statistics.median(v), 2) for w, v in cpu.items() if v},
                     "ready_ms": round(ready_ms(), 1), "stacks_100k": ms["stacks"], "keys_100k": ms["keys"]}
    res["query_ms"] = {"p50": round(ms["p50"], 2), "p99": round(ms["p99"], 2), "keys": ms["keys"]}
    res["elapsed_s"] = round(time.monotonic() - t_start)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    md = markdown(res, args)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
