#!/usr/bin/env python3
"""Reads a guest's console log from matrix.sh and prints one JSON verdict line."""
import json
import sys

HANG_REPORT_CHARS = 30000	# every task's stack on a small guest, with the CPUs' backtraces

def main():
    kernel, log = sys.argv[1], sys.argv[2]
    lines = {}
    for line in open(log, errors="replace").read().replace("\r", "").splitlines():
        at = line.find("LOCKSCOPE-")  # the firmware's escape codes may precede it
        if at >= 0:
            tag, _, rest = line[at:].partition(" ")
            lines[tag] = rest
    res = {"kernel": kernel, "ok": False}
    try:
        st = json.loads(lines["LOCKSCOPE-STATUS"])
        top = json.loads(lines["LOCKSCOPE-TOP"])
        mm = [r for r in top["rows"] if (r.get("lock") or {}).get("name") == "mmap_lock"]
        mutex = json.loads(lines["LOCKSCOPE-MUTEX"])["rows"]
        bw = json.loads(lines["LOCKSCOPE-BLOCKWAITS"])
        # mutex_server's own count of its futex sleeps, then lockscope's rows of its mutex
        own, end = json.JSONDecoder().raw_decode(lines["LOCKSCOPE-FUTEX"])
        futex_rows = json.loads(lines["LOCKSCOPE-FUTEX"][end:])["rows"]
        res["futex"] = {"sleeps": own["sleeps"], "counted": sum(r["contended"] for r in futex_rows
                                                                   if r.get("uaddr") == own["mutex"])}
        res.update(attach_mode=st["features"]["attach_mode"], owner_stacks=st["features"]["owner_stacks"],
                   waits=st["events"]["waits"], mmap_lock_types=sorted({r["type"] for r in mm}),
                   owners=sorted({r["owner"]["comm"] for r in mm if r.get("owner")}),
                   mutex_types=sorted({r["type"] for r in mutex}),
                   mutex_owners=sorted({r["owner"]["comm"] for r in mutex if r.get("owner")}),
                   dropped={k: v for k, v in st["dropped"].items() if v},
                   # --check's table (feature: ok|missing) and --strict's exit code and log
                   check={f.split()[0]: f.split()[1] for f in lines["LOCKSCOPE-CHECK"].split("|")[:-2] if f.strip()},
                   strict_rc=int(lines["LOCKSCOPE-STRICT"].split()[0]),
                   strict_log=lines["LOCKSCOPE-STRICT"].partition(" ")[2],
                   missing=sorted(p["name"] for p in st["probes"] if not p["ok"]),
                   switch_prog=[p["name"] for p in st["programs"] if p["hook"] == "tp_btf/sched_switch"],
                   degraded=st["degraded"], sched=st["features"]["sched"], user_locks=st["features"]["user_locks"],
                   block_waits_degraded=bw["degraded"])
        # every component loads: a kernel without a kfunc degrades a feature, not a component
        # every futex sleep counted (a sleeper that runs again unseen by the switch is
        # dropped: a few in a hundred, at most, in the suite)
        lost = res["futex"]["sleeps"] - res["futex"]["counted"]
        res["ok"] = (bool(mm) and "mmap_storm" in res["owners"] and "pipe_storm" in res["mutex_owners"]
                     and res["futex"]["sleeps"] >= 1000 and 0 <= lost <= res["futex"]["sleeps"] // 100
                     and not st["degraded"] and res["sched"] and res["user_locks"] and not bw["degraded"]
                     and bw["features"]["sched"]
                     and all(p["attached"] or p["on_demand"] for p in st["programs"]))
    except (KeyError, ValueError) as e:
        res["error"] = f"{type(e).__name__}: {e}"
        text = open(log, errors="replace").read()
        if "LOCKSCOPE-HANG" in lines:
            # the guest's watchdog: the step that hung, then every task's state and stack
            res["hang"] = lines["LOCKSCOPE-HANG"]
            res["log"] = text[text.find("LOCKSCOPE-HANG"):][:HANG_REPORT_CHARS]
        else:
            res["log"] = lines.get("LOCKSCOPE-LOG", text[-3000:])
        if "LOCKSCOPE-BWLOG" in lines:
            res["block_waits_log"] = lines["LOCKSCOPE-BWLOG"]
    print(json.dumps(res))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
