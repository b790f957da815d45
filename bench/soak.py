#!/usr/bin/env python3
"""make bench-soak: lockscoped's memory over a long mixed load.

An hour of the bench's mixed load, compressed: the workloads run back to back at their
highest rates (a lock-convoy server, a kernel-lock storm, a pipe storm and 10 000
short-lived threads every 10 s, each thread a new key), so the daemon sees in MINUTES what
a busy host sends it in an hour, while its windows roll at their real pace (the longest is
5 minutes, so the first 5 minutes fill them). RSS and the lock table are sampled every
SAMPLE seconds. The verdict compares the end with the fifth minute: within 10 % of the
fifth minute's RSS plus what the lock table's keys added since, at the memory per key
measured while it grew (from the first minute to the fifth). The table is bounded by
max-keys; once it is full this is the fifth minute's RSS itself. How fast it fills
depends on the host (a faster one sleeps less on the churn's mutex: fewer keys).
Usage: sudo make bench-soak [SOAK_MINUTES=15]   (or: sudo bench/soak.py --minutes N)
"""
import argparse
import contextlib
import os
import subprocess
import sys
import time

from lsbench import BUILD, call, lockscoped, rss_bytes

WARM_S = 300		# the 5-minute window is full: the reference point
LIMIT = 1.10
MIXED = [
    ("mutex_server", "--workers", "8", "--seconds", "30"),
    ("mmap_storm", "--writers", "2", "--readers", "2", "--seconds", "30"),
    ("pipe_storm", "--threads", "8", "--seconds", "30"),
]
CHURN = ("thread_churn", "--threads", "10000", "--batch", "50")
CHURN_EVERY_S = 10


def start(args):
    return subprocess.Popen([os.path.join(BUILD, "workloads", args[0]), *args[1:]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=15)
    ap.add_argument("--sample", type=float, default=30, help="seconds between samples")
    a = ap.parse_args()
    if a.minutes * 60 <= WARM_S:
        sys.exit(f"soak.py: --minutes must exceed {WARM_S // 60}: the first 5 minutes fill the windows")
    with contextlib.ExitStack() as stack:
        sock = stack.enter_context(lockscoped())
        pid = call(sock, {"cmd": "status"})["pid"]
        running = {w: start(w) for w in MIXED}
        t0 = time.time()
        next_churn = next_sample = t0
        samples = []
        print(f"{'min':>5} {'RSS MiB':>8} {'keys':>8} {'agg MiB':>8} {'records/s':>10}", flush=True)
        while time.time() - t0 < a.minutes * 60:
            now = time.time()
            for w, p in running.items():
                if p.poll() is not None:
                    running[w] = start(w)
            if now >= next_churn:
                subprocess.run([os.path.join(BUILD, "workloads", CHURN[0]), *CHURN[1:]],
                               stdout=subprocess.DEVNULL, check=True)
                next_churn = now + CHURN_EVERY_S
            if now >= next_sample:
                st = call(sock, {"cmd": "status"})
                samples.append((now - t0, rss_bytes(pid), st["aggregator"]["keys"],
                                st["aggregator"]["mem_bytes"], st["self"]["per_s"]["records"]))
                m, r, k, am, rec = samples[-1]
                print(f"{m / 60:5.1f} {r / 2**20:8.1f} {k:8d} {am / 2**20:8.1f} {rec:10.0f}", flush=True)
                next_sample = now + a.sample
            time.sleep(0.2)
        for p in running.values():
            p.terminate()
            p.wait()
        st = call(sock, {"cmd": "status"})
    expected, ratio, line = verdict(samples)
    dropped = {k: v for k, v in st["dropped"].items() if v}
    print(f"\n{line}; drops {dropped}")
    sys.exit(0 if ratio <= LIMIT else 1)


def verdict(samples):
    """(expected RSS at the end, end/expected, a line saying so) from the samples
    (seconds, RSS bytes, keys, ...): the fifth minute's RSS plus the keys added since at
    the memory per key of the first to the fifth minute."""
    warm = min(samples, key=lambda s: abs(s[0] - WARM_S))
    first = min(samples, key=lambda s: abs(s[0] - 60))
    end = samples[-1]
    grown = warm[2] - first[2]
    per_key = max(0.0, (warm[1] - first[1]) / grown) if grown > 0 else 0.0
    expected = warm[1] + max(0, end[2] - warm[2]) * per_key
    ratio = end[1] / expected
    line = (f"RSS at {warm[0] / 60:.1f} min {warm[1] / 2**20:.1f} MiB with {warm[2]} keys, at {end[0] / 60:.1f} min "
            f"{end[1] / 2**20:.1f} MiB with {end[2]} keys; expected {expected / 2**20:.1f} MiB "
            f"({per_key / 1024:.2f} KiB a key): x{ratio:.3f} (limit x{LIMIT:.2f})")
    return expected, ratio, line


if __name__ == "__main__":
    main()
