#!/usr/bin/env python3
"""make bench-push: lockscoped's memory while its push backends are down.

Parca and Pyroscope both configured at loopback ports nothing listens on, a profile every
second (15 times the default rate), 16 queued at most per backend: every profile is tried
5 times with backoff, the queue fills, and the oldest are dropped. The run starts once both
queues are full (their bounded cost paid, ~20 s) and lasts MINUTES; RSS is sampled every
SAMPLE seconds. A second lockscoped without push runs beside it: both see every wait on the
host (the programs are host-wide), so what the host does grows both alike, and the control
tells that apart from what pushing costs. The verdict: RSS at the end within 5 MiB of the
start beyond the control's own growth, the queues at their bound, and failed attempts and
dropped profiles counted. On a quiet machine the control stays within a few hundred KiB.
Usage: sudo make bench-push [PUSH_MINUTES=5]   (or: sudo bench/push_dead.py --minutes N)
"""
import argparse
import socket
import sys
import time

from lsbench import call, lockscoped, rss_bytes

LIMIT_BYTES = 5 * 2**20
QUEUE = 16


def dead_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--sample", type=float, default=30, help="seconds between samples")
    a = ap.parse_args()
    args = (f"--push-parca=http://127.0.0.1:{dead_port()}", f"--push-pyroscope=http://127.0.0.1:{dead_port()}",
            "--push-interval=1", f"--push-queue={QUEUE}", "--push-timeout=2")
    with lockscoped(*args) as sock, lockscoped() as control:
        pid = call(sock, {"cmd": "status"})["pid"]
        cpid = call(control, {"cmd": "status"})["pid"]
        while min(b["queued"] for b in call(sock, {"cmd": "status"})["push"].values()) < QUEUE:
            time.sleep(1)
        t0 = time.time()
        samples = []
        print(f"{'min':>5} {'RSS MiB':>8} {'control':>8} {'failed':>8} {'dropped':>8} {'queued':>7}", flush=True)
        while True:
            st = call(sock, {"cmd": "status"})["push"]
            failed = sum(b["attempts_failed"] for b in st.values())
            dropped = sum(b["dropped_queue_full"] + b["dropped_retries"] + b["dropped_rejected"] for b in st.values())
            queued = max(b["queued"] for b in st.values())
            samples.append((time.time() - t0, rss_bytes(pid), rss_bytes(cpid)))
            print(f"{samples[-1][0] / 60:5.1f} {samples[-1][1] / 2**20:8.1f} {samples[-1][2] / 2**20:8.1f} "
                  f"{failed:8d} {dropped:8d} {queued:7d}", flush=True)
            if time.time() - t0 >= a.minutes * 60:
                break
            time.sleep(a.sample)
    growth = samples[-1][1] - samples[0][1]
    control = samples[-1][2] - samples[0][2]
    ok = growth - max(control, 0) <= LIMIT_BYTES and queued <= QUEUE and failed > 0 and dropped > 0
    print(f"\nRSS {samples[0][1] / 2**20:.1f} -> {samples[-1][1] / 2**20:.1f} MiB ({growth / 2**20:+.2f}; the "
          f"control {control / 2**20:+.2f}; limit +{LIMIT_BYTES / 2**20:.0f} beyond it) over "
          f"{samples[-1][0] / 60:.1f} min; {failed} failed attempts, {dropped} dropped, {queued} queued at most "
          f"{QUEUE}: {'ok' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
