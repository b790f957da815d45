#!/usr/bin/env python3
"""Where lockscoped's BPF programs spend their time, by source line, under one of the
bench's workloads.

    sudo bench/profile.py pipe_storm contention_begin_btf_owner_stack,contention_end_btf
    sudo bench/profile.py stress_mutex spin_sample --seconds 10 -- --spin-freq=997

Starts the daemon (this build's, or LOCKSCOPED=path), records every CPU with perf while the
workload runs, and counts the samples that fell in the named programs by the source line
the JIT made each instruction from (bench/bpf_lines: the kernel's JIT line info). The
count of a line is where the CPU was when the timer interrupt came: a load that missed
the cache shows as its own line (or the next), a helper call's time is in the kernel
function it calls, not here.

Without a PMU (a VM: "software events only" in dmesg) perf samples on cpu-clock, a timer
interrupt, which cannot land where interrupts are off: programs on scheduler hooks and
in hardirq context (sched_switch, sched_waking from an interrupt, the cpu-clock samplers)
get few or no samples. `--event cycles` where there is a PMU (NMI sampling) sees them.
"""
import argparse
import bisect
import collections
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  the bench's workloads
from lsbench import BUILD, lockscoped  # noqa: E402

LINES = os.path.join(BUILD, "bench", "bpf_lines")


def loaded(names):
    """{id: name} of the loaded programs called @names."""
    out = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True, check=True).stdout
    return {p["id"]: p["name"] for p in json.loads(out) if p.get("name") in names}


def line_table(progs):
    """[(address, "program file:line: source")] of @progs' machine code, by address."""
    table = []
    for pid, name in progs.items():
        out = subprocess.run([LINES, str(pid)], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("#"):	# the functions' extents
                continue
            addr, where = line.split(" ", 1)
            table.append((int(addr, 16), f"{name} {where}"))
    return sorted(table)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload", choices=sorted(run.WORKLOADS))
    ap.add_argument("programs", help="program names, comma-separated (bpftool prog show lists them)")
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--event", default="cpu-clock", help="perf's event (cycles where there is a PMU)")
    ap.add_argument("--freq", type=int, default=20000, help="samples per second per CPU")
    ap.add_argument("--top", type=int, default=40, help="lines shown")
    ap.add_argument("daemon_args", nargs="*", help="lockscoped's options, after --")
    a = ap.parse_args()
    if not os.path.exists(LINES):
        sys.exit(f"profile: {LINES} is missing: run make bench-tools first")
    names = set(a.programs.split(","))
    data = os.path.join(BUILD, "bench", "profile.data")
    with lockscoped(*a.daemon_args):
        progs = loaded(names)
        if not progs:
            sys.exit(f"profile: lockscoped loaded none of {sorted(names)}: see bpftool prog show for its names")
        table = line_table(progs)
        rec = subprocess.Popen(["perf", "record", "-a", "-e", a.event, "-F", str(a.freq), "-o", data],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        rate, _ = run.run_workload(a.workload, a.seconds)
        rec.send_signal(signal.SIGINT)
        # perf writes its data, then dies of the signal it was stopped with
        if rec.wait() not in (0, -signal.SIGINT):
            sys.exit(f"profile: perf record failed ({rec.returncode}): try it by hand with -e {a.event}")
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"], capture_output=True, text=True,
                         check=True).stdout
    addrs = [addr for addr, _ in table]
    suffixes = tuple("_" + n for n in progs.values())
    by_line, by_prog, total = collections.Counter(), collections.Counter(), 0
    for line in out.splitlines():
        f = line.split()
        total += 1
        # the JIT's symbols: bpf_prog_<tag>_<name>
        if len(f) < 2 or not f[1].startswith("bpf_prog_") or not f[1].endswith(suffixes):
            continue
        i = bisect.bisect_right(addrs, int(f[0], 16)) - 1
        if i >= 0:
            by_line[table[i][1]] += 1
            by_prog[f[1]] += 1
    n = sum(by_line.values())
    print(f"{a.workload}: {rate:,.0f} ops/s; {total:,} samples, {n:,} in {', '.join(sorted(progs.values()))}")
    for prog, count in by_prog.most_common():
        print(f"  {count:7,} {prog}")
    for where, count in by_line.most_common(a.top):
        print(f"{count:7,} {100.0 * count / n:5.1f}%  {where[:160]}")


if __name__ == "__main__":
    main()
