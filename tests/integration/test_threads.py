"""Per-thread scheduling (seed 002): switch counts against /proc, and the cost of a switch."""
import json
import os
import subprocess
import time

from conftest import WORKLOADS, require_tool
from perfref import PerfRecordAll

# Both sides count the same kernel events with the same rule; they may differ only by
# switches in flight while the two are read (none: the workload's threads are parked).
COUNT_TOLERANCE = 0.01
COUNT_SLACK = 2


def proc_switches(pid, tid):
    out = {}
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        for line in f:
            key, _, val = line.partition(":")
            if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                out[key] = int(val)
    return out["voluntary_ctxt_switches"], out["nonvoluntary_ctxt_switches"]


def close_enough(a, b):
    return abs(a - b) <= max(COUNT_SLACK, COUNT_TOLERANCE * b)


def test_switch_counts_match_proc(daemon):
    rounds = 20000
    p = subprocess.Popen([os.path.join(WORKLOADS, "pingpong"), "--wait", "--rounds", str(rounds)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline().split()[1])
        p.stdin.write("go\n")
        p.stdin.flush()
        res = json.loads(p.stdout.readline())  # the threads are parked from here on
        resp = daemon.cli_json("threads", "-p", str(pid))
        rows = {r["tid"]: r for r in resp["rows"]}
        assert set(rows) == set(res["tids"]) | {pid}, "one row per thread of the process"
        for tid in res["tids"] + [pid]:
            vol, invol = proc_switches(pid, tid)
            r = rows[tid]
            print(tid, (vol, invol), (r["voluntary"], r["involuntary"]))
            assert r["pid"] == pid and r["comm"] == "pingpong"
            assert close_enough(r["voluntary"], vol) and close_enough(r["involuntary"], invol)
            assert r["switch_cost_ns"] == (r["voluntary"] + r["involuntary"]) * resp["switch_cost_ns_per_switch"]
        ping, pong, spinner = (rows[t] for t in res["tids"])
        # every round trip blocks each side once (when the other had not written yet)
        assert ping["voluntary"] + pong["voluntary"] >= rounds
        # the spinner shares CPU 0 with them: it is preempted, it never blocks until parked
        assert spinner["involuntary"] > 0 and spinner["voluntary"] <= 2
        assert spinner["oncpu_ns"] > ping["oncpu_ns"] and spinner["runqueue_wait_ns"] > 0
        assert ping["offcpu_blocked_ns"] > 0
    finally:
        p.stdin.write("exit\n")
        p.stdin.flush()
        p.wait(timeout=30)


def test_switch_cost_is_measured(daemon):
    st = daemon.call({"cmd": "status"})
    assert st["features"]["sched"] is True
    # lat_ctx's figure on current hardware is 1-10 us; 0 or absurd means the method broke
    assert 100 <= st["switch_cost_ns"] <= 100000, st["switch_cost_ns"]
    again = daemon.cli_json("threads", "--measure", "-E", "1")
    assert 100 <= again["switch_cost_ns_per_switch"] <= 100000
    assert again["system_switches_per_s"] > 0 and len(again["rows"]) == 1


def test_threads_table_and_bad_flags(daemon):
    out = daemon.cli("threads", "-E", "3").stdout
    assert "one switch costs" in out and "cswch/s" in out and "nvcswch/s" in out
    p = daemon.cli("threads", "-l", check=False)
    assert p.returncode == 2 and "-l/--locks does not apply to threads (top, scan, waits take it)" in p.stderr
    p = daemon.cli("top", "--measure", check=False)
    assert p.returncode == 2 and "--measure does not apply to top (only threads takes it)" in p.stderr
    r = daemon.call({"cmd": "threads", "pid": -1})
    assert "pid" in r["error"]


def test_short_lived_threads_keep_their_last_counters(daemon):
    """Ten thousand threads that live a few milliseconds each, switching on mmap_lock: the
    once-a-second task iterator never sees them, so each one's figures are the counters the
    kernel held at its last switch out. One row per thread, and each thread's switches equal
    perf's count of sched_switch events it was switched out at (recorded on every CPU from
    before the process started) less that last one, which the kernel counts as the dying
    thread's own; never fewer than the threads counted themselves (getrusage(RUSAGE_THREAD)
    as each ended; its last switches, in exit, only the kernel sees)."""
    require_tool("perf")
    perf = PerfRecordAll("sched:sched_switch")
    try:
        out = subprocess.run([os.path.join(WORKLOADS, "thread_churn"), "--threads", "10000", "--batch", "50",
                              "--kernel"], capture_output=True, text=True, check=True).stdout
    except BaseException:
        perf.stop()
        raise
    res = json.loads(out)
    theirs = {tid: n - 1 for tid, n in perf.switches_out(res["pid"]).items() if tid != res["pid"]}
    rows = []
    for _ in range(20):  # the exits are read once a second
        rows = [r for r in daemon.cli_json("threads", "-p", str(res["pid"]), "-w", "all", "-E", "100000")["rows"]
                if r["tid"] != res["pid"]]
        if len(rows) >= res["threads"]:
            break
        time.sleep(0.5)
    ours = {r["tid"]: r["voluntary"] + r["involuntary"] for r in rows}
    status = daemon.cli_json("status")
    print(f"{len(rows)} rows of {res['threads']} threads; switches: lockscope {sum(ours.values())}, perf "
          f"{sum(theirs.values())}, the threads' own {res['switches']}; exits {status['events']['thread_exits']}, "
          f"dropped {status['dropped']['exited_thread_map_full']}")
    assert len(rows) == res["threads"] and len(ours) == len(rows)
    assert all(r["exited_ago_s"] is not None for r in rows)
    assert res["switches"] > 1000, "the threads switched too little to compare"
    assert status["events"]["thread_exits"] >= res["threads"]
    # compared here, not by pytest: its diff of two 10 000-key dicts takes minutes
    differ = {t: (ours.get(t), theirs.get(t)) for t in set(ours) | set(theirs) if ours.get(t) != theirs.get(t)}
    print(f"{len(differ)} threads differ (lockscope, perf): {sorted(differ.items())[:20]}")
    assert not differ
    assert res["switches"] <= sum(ours.values())
