#!/usr/bin/env python3
"""What tracing user-space locks costs a futex-heavy server, by method.

Runs tests/workloads/mutex_server (8 workers on one pthread mutex, seed 004) untraced,
under lockscoped with kernel locks only, under lockscoped's default (futex waits read off
sched_switch, releasers from sched_waking, holder sampling, user stacks as dumps unwound
with CFI), the same with frame-pointer stacks instead of dumps, without holder sampling,
during a precise scan (the futex syscall tracepoints), and under bpftrace with empty
programs on the same syscall tracepoints (the floor of any syscall-based method). Prints
the server's throughput per method, the daemon's CPU while the server ran and, with
kernel.bpf_stats_enabled=1, the ulock programs' ns per event.
--server mutex_server_nofp runs the server built without frame pointers, as distros
build code: the case DWARF unwinding exists for.
Usage: sudo bench/futex_overhead.py [--runs N] [--seconds S] [--server NAME]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

from lsbench import BUILD, bpf_stats, call, cpu_seconds, lockscoped, workload

SERVER = "mutex_server"


def server(seconds):
    return workload(SERVER, "--seconds", str(seconds))["per_s"]


def untraced(seconds):
    return server(seconds), {}, None


def ulock_costs(st):
    return {p["name"]: p["run_time_ns"] / max(p["run_cnt"], 1)
            for p in st["programs"] if p["source"] == "ulock" and p["run_cnt"]}


def daemon(args):
    def run(seconds):
        with lockscoped(*args) as sock:
            pid = call(sock, {"cmd": "status"})["pid"]
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            rate = server(seconds)
            cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
            st = call(sock, {"cmd": "status"})
        return rate, ulock_costs(st), cpu
    return run


def precise(seconds):
    with lockscoped() as sock:
        w = subprocess.Popen([os.path.join(BUILD, "workloads", SERVER), "--wait", "--seconds", str(seconds)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        pid = int(w.stdout.readline().split()[1])
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock)
        s.sendall(json.dumps({"cmd": "scan", "pid": pid, "duration_ms": 600000, "precise": True,
                              "kind": "user", "group": "lock"}).encode() + b"\n")
        time.sleep(0.5)  # the scan attaches the syscall tracepoints before the run starts
        w.stdin.write("go\n")
        w.stdin.flush()
        rate = json.loads(w.stdout.read().strip().splitlines()[-1])["per_s"]
        w.wait()
        s.recv(1 << 20)
        s.close()
        st = call(sock, {"cmd": "status"})
    return rate, ulock_costs(st), None


def bpftrace_empty(seconds):
    prog = "tracepoint:syscalls:sys_enter_futex {} tracepoint:syscalls:sys_exit_futex {}"
    bt = subprocess.Popen(["bpftrace", "-e", prog], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        bt.stdout.readline()  # "Attaching 2 probes..."
        return server(seconds), {}, None
    finally:
        bt.terminate()
        bt.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--server", default="mutex_server", choices=["mutex_server", "mutex_server_nofp"])
    args = ap.parse_args()
    global SERVER
    SERVER = args.server
    if os.geteuid() != 0:
        sys.exit("futex_overhead.py loads BPF programs: run it as root")
    methods = [
        ("untraced", untraced),
        ("lockscoped, kernel locks only", daemon(["--user-locks=0"])),
        ("lockscoped default (sched_switch, DWARF stacks)", daemon([])),
        ("lockscoped, frame-pointer stacks (no dumps)", daemon(["--user-stack-bytes=0"])),
        ("lockscoped, sched_switch, no holder sampling", daemon(["--hold-freq=0"])),
        ("precise scan (futex syscall tracepoints)", precise),
    ]
    if shutil.which("bpftrace"):
        methods.append(("bpftrace, empty sys_enter/exit_futex", bpftrace_empty))
    with bpf_stats():
        print(f"{SERVER}: 8 workers, {args.seconds:g} s, median of {args.runs} runs\n")
        print("| method | messages/s | vs untraced | lockscoped CPU | ulock ns/event |")
        print("| --- | --- | --- | --- | --- |")
        base = None
        for name, fn in methods:
            runs = [fn(args.seconds) for _ in range(args.runs)]
            rate = statistics.median(r[0] for r in runs)
            base = base or rate
            costs = {}
            for r in runs:
                for k, v in r[1].items():
                    costs.setdefault(k, []).append(v)
            cost = ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in sorted(costs.items()))
            cpus = [r[2] for r in runs if r[2] is not None]
            cpu = f"{100 * statistics.median(cpus):.1f} %" if cpus else "-"
            print(f"| {name} | {rate:,.0f} | {100 * (rate / base - 1):+.1f} % | {cpu} | {cost or '-'} |")


if __name__ == "__main__":
    main()
