#!/usr/bin/env python3
"""BPF cost per event of lockscope's kernel-lock programs, by stack policy.

Runs lockscoped with stacks off, at the defaults (sampled), and with a stack on every
wait, under a kernel lock workload, with kernel.bpf_stats_enabled=1, and prints the
kernel's own run_time_ns / run_cnt per program plus the workload's throughput.
Usage: sudo bench/bpf_cost.py [--workload pipe_storm|mmap_storm] [--runs N]
"""
import argparse
import os
import statistics
import sys

from lsbench import bpf_stats, call, lockscoped, workload

POLICIES = {
    "no stacks": ["--stack-rate=0"],
    "defaults (sampled)": [],
    "stack every wait": ["--stack-rate=1000000", "--cpu-stack-rate=1000000"],
}
WORKLOADS = {
    "pipe_storm": ["--threads", "2", "--seconds", "2"],
    "mmap_storm": ["--seconds", "2"],
}

def run_once(policy_args, name):
    with lockscoped(*policy_args) as sock:
        rate = workload(name, *WORKLOADS[name])
        st = call(sock, {"cmd": "status"})
    progs = {p["name"]: p["run_time_ns"] / max(p["run_cnt"], 1) for p in st["programs"]}
    return progs, st["stacks"]["share"], rate.get("per_s") or 1 / rate["seconds"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="pipe_storm", choices=WORKLOADS)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bpf_cost.py loads BPF programs: run it as root")
    with bpf_stats():
        print(f"workload {args.workload}, {args.runs} runs each, median\n")
        print("| stack policy | begin ns/event | end ns/event | waits with a stack | workload rate |")
        print("| --- | --- | --- | --- | --- |")
        for name, pargs in POLICIES.items():
            runs = [run_once(pargs, args.workload) for _ in range(args.runs)]
            begin = statistics.median(next(v for k, v in r[0].items() if "contention_begin" in k) for r in runs)
            end = statistics.median(next(v for k, v in r[0].items() if "contention_end" in k) for r in runs)
            share = statistics.median(r[1] for r in runs)
            rate = statistics.median(r[2] for r in runs)
            print(f"| {name} | {begin:.0f} | {end:.0f} | {100 * share:.1f} % | {rate:,.0f}/s |")


if __name__ == "__main__":
    main()
