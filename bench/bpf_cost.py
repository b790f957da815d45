#!/usr/bin/env python3
"""BPF cost per event of lockscope's kernel-lock programs, by stack policy.

Runs lockscoped with stacks off, at the defaults (sampled), and with a stack on every
wait, under a kernel lock workload, with kernel.bpf_stats_enabled=1, and prints the
kernel's own run_time_ns / run_cnt per program plus the workload's throughput.
Usage: sudo bench/bpf_cost.py [--workload pipe_storm|mmap_storm] [--runs N]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("OUTPUT", os.path.join(ROOT, "build"))

POLICIES = {
    "no stacks": ["--stack-rate=0"],
    "defaults (sampled)": [],
    "stack every wait": ["--stack-rate=1000000", "--cpu-stack-rate=1000000"],
}
WORKLOADS = {
    "pipe_storm": ["--threads", "2", "--seconds", "2"],
    "mmap_storm": ["--seconds", "2"],
}


def call(sock, req):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(json.dumps(req).encode() + b"\n")
    buf = b""
    while not buf.endswith(b"\n"):
        buf += s.recv(1 << 20)
    s.close()
    return json.loads(buf)


def run_once(policy_args, workload):
    sock = os.path.join(tempfile.mkdtemp(), "ls.sock")
    d = subprocess.Popen([os.path.join(BUILD, "lockscoped"), "--socket", sock, *policy_args],
                         stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            if os.path.exists(sock):
                try:
                    call(sock, {"cmd": "status"})
                    break
                except OSError:
                    pass
            time.sleep(0.05)
        out = subprocess.run([os.path.join(BUILD, "workloads", workload), *WORKLOADS[workload]],
                             capture_output=True, text=True, check=True).stdout
        st = call(sock, {"cmd": "status"})
    finally:
        d.terminate()
        d.wait()
    progs = {p["name"]: p["run_time_ns"] / max(p["run_cnt"], 1) for p in st["programs"]}
    rate = json.loads(out.strip().splitlines()[-1])
    return progs, st["stacks"]["share"], rate.get("per_s") or 1 / rate["seconds"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="pipe_storm", choices=WORKLOADS)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bpf_cost.py loads BPF programs: run it as root")
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        old = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        print(f"workload {args.workload}, {args.runs} runs each, median\n")
        print("| stack policy | begin ns/event | end ns/event | waits with a stack | workload rate |")
        print("| --- | --- | --- | --- | --- |")
        for name, pargs in POLICIES.items():
            runs = [run_once(pargs, args.workload) for _ in range(args.runs)]
            begin = statistics.median(next(v for k, v in r[0].items() if "begin" in k) for r in runs)
            end = statistics.median(next(v for k, v in r[0].items() if "end" in k) for r in runs)
            share = statistics.median(r[1] for r in runs)
            rate = statistics.median(r[2] for r in runs)
            print(f"| {name} | {begin:.0f} | {end:.0f} | {100 * share:.1f} % | {rate:,.0f}/s |")
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)


if __name__ == "__main__":
    main()
