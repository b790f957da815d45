#!/usr/bin/env python3
"""What per-thread scheduling costs a switch-heavy workload (seed 002).

Runs tests/workloads/pingpong (two threads passing a byte through pipes on one CPU, a
spinner beside them: a context switch per message) untraced, under lockscoped with
per-thread scheduling off (--sched-threads=0) and at defaults, alternating, and prints the
round trips per second and, with kernel.bpf_stats_enabled=1, the schedstat programs'
ns per event.
Usage: sudo bench/switch_overhead.py [--runs N] [--rounds N]
"""
import argparse
import os
import statistics
import sys

from lsbench import bpf_stats, call, lockscoped, pingpong


def untraced(rounds):
    return pingpong(rounds), {}


def daemon(args):
    def run(rounds):
        with lockscoped(*args) as sock:
            rate = pingpong(rounds)
            st = call(sock, {"cmd": "status"})
        return rate, {p["name"]: p["run_time_ns"] / max(p["run_cnt"], 1)
                      for p in st["programs"] if p["source"] == "schedstat" and p["run_cnt"]}
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=200000)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("switch_overhead.py loads BPF programs: run it as root")
    methods = [("untraced", untraced),
               ("lockscoped, per-thread scheduling off", daemon(["--sched-threads=0"])),
               ("lockscoped defaults", daemon([]))]
    results = {name: [] for name, _ in methods}
    with bpf_stats():
        for _ in range(args.runs):  # alternate: this machine is shared and noisy
            for name, fn in methods:
                results[name].append(fn(args.rounds))
    print(f"pingpong: {args.rounds} round trips, median of {args.runs} alternated runs\n")
    print("| method | round trips/s | vs untraced | schedstat ns/event |")
    print("| --- | --- | --- | --- |")
    base = statistics.median(r[0] for r in results["untraced"])
    for name, _ in methods:
        rate = statistics.median(r[0] for r in results[name])
        costs = {}
        for r in results[name]:
            for k, v in r[1].items():
                costs.setdefault(k, []).append(v)
        cost = ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in sorted(costs.items()))
        print(f"| {name} | {rate:,.0f} | {100 * (rate / base - 1):+.1f} % | {cost or '-'} |")


if __name__ == "__main__":
    main()
