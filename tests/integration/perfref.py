"""The independent counts: `perf lock record` + `perf lock contention -t` (tracepoint mode),
and perf recordings of the tracepoints a test compares (yields, preempted switches).

perf reads the tracepoints itself and pairs them in user space; it shares no code with
lockscope. Recording starts disabled and is enabled through perf's control FIFO, so the
caller knows exactly when perf is counting: a perf that attached late, after a sleep
that was long enough elsewhere, missed a yield storm's first 119 yields in CI.
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile

ROW = re.compile(r"^\s*(\d+)\s+[\d.]+ \w+\s+[\d.]+ \w+\s+[\d.]+ \w+\s+(\d+)\s+(\S.*)$")


class PerfRecorder:
    """perf recording @args into its own directory (its output there, named @out), enabled
    through the control FIFO."""

    def __init__(self, *args, out="perf.data"):
        self.dir = tempfile.mkdtemp(prefix="lockscope-perf-")
        self.data = os.path.join(self.dir, out)
        self.ctl = os.path.join(self.dir, "ctl")
        self.ack = os.path.join(self.dir, "ack")
        os.mkfifo(self.ctl)
        os.mkfifo(self.ack)
        self.proc = subprocess.Popen(
            ["perf", *args, "-o", self.data, "-D", "-1", "--control", f"fifo:{self.ctl},{self.ack}"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "record.log"), "w"))
        self._command("enable")

    def _command(self, cmd):
        with open(self.ctl, "w") as ctl:
            ctl.write(cmd + "\n")
        with open(self.ack) as ack:
            assert ack.readline().strip() == "ack"

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        log = open(os.path.join(self.dir, "record.log")).read()
        assert "LOST" not in log, f"perf lost events, the reference is incomplete: {log}"


class PerfRecordAll(PerfRecorder):
    """@event recorded on every CPU and counted per process afterwards. Unlike a count
    attached to a process (perf stat -p, perf lock record -p), it also sees what an exiting
    thread waits for after perf's per-task events have left it (tasklist_lock and siglock
    in exit_notify): ~10 % of the waits of threads that live a few milliseconds."""

    def __init__(self, event="lock:contention_end"):
        # 8 MiB of buffer per CPU: the whole host's events, not only the process's
        super().__init__("record", "-a", "-m", "2048", "-e", event)

    def _fields(self, fields):
        """Stops perf: each event's @fields (perf script -F), one list per event."""
        self.stop()
        p = subprocess.run(["perf", "script", "-i", self.data, "-F", fields], capture_output=True,
                           text=True, timeout=120, check=True)
        # perf script warns "Processed N events and lost M chunks!" when the buffer overflowed
        assert "lost" not in p.stderr.lower(), f"perf lost events, the reference is incomplete: {p.stderr}"
        return [line.split() for line in p.stdout.splitlines() if line.strip()]

    def count(self, pid):
        """Stops perf and returns @pid's events."""
        return sum(1 for f in self._fields("pid") if f[0] == str(pid))

    def switches_out(self, pid):
        """Stops perf (recording sched:sched_switch): {tid: times switched out} of @pid's
        threads, by the event's prev_pid. Not by the sample's tid: perf writes -1 there
        once the kernel has released the dying thread, and lost one more switch a thread
        that way here."""
        counts = {}
        for f in self._fields("pid,trace"):
            prev = next(int(x.split("=")[1]) for x in f if x.startswith("prev_pid="))
            if f[0] == str(pid):
                counts[prev] = counts.get(prev, 0) + 1
        return counts


class PerfLock(PerfRecorder):
    def __init__(self, pid):
        super().__init__("lock", "record", "-p", str(pid))

    def per_thread(self):
        """{tid: contended} from perf lock contention -t."""
        # perf lock prints its table on stderr
        p = subprocess.run(["perf", "lock", "contention", "-i", self.data, "-t"],
                           capture_output=True, text=True, timeout=120, check=True)
        out = p.stdout + p.stderr
        counts = {}
        for line in out.splitlines():
            m = ROW.match(line)
            if m:
                counts[int(m.group(2))] = counts.get(int(m.group(2)), 0) + int(m.group(1))
        return counts


class PerfPreemptedIn(PerfRecorder):
    """A process's preempted switches (prev_state TASK_REPORT_MAX) with kernel stacks."""

    def __init__(self, pid):
        super().__init__("record", "-q", "-e", "sched:sched_switch", "--filter", "prev_state == 256", "-g",
                         "-p", str(pid))

    def counts(self, func):
        """Stops perf: {tid: preempted switches whose kernel stack passes through @func}."""
        self.stop()
        out = subprocess.run(["perf", "script", "-i", self.data, "-F", "tid,ip,sym"], capture_output=True,
                             text=True, timeout=120, check=True).stdout
        counts, tid, hit = {}, None, False
        for line in out.splitlines() + [""]:
            if not line.strip():  # a blank line ends each sample
                if tid is not None and hit:
                    counts[tid] = counts.get(tid, 0) + 1
                tid, hit = None, False
            elif tid is None:
                tid = int(line.split()[0])
            elif func in line:
                hit = True
        return counts


class PerfYields(PerfRecorder):
    """One thread's sched_yield() calls and its switches out. A yield switched when the
    thread's next event is a switch out while runnable (prev_state R, not preempted: R+).
    Enabled through the control FIFO like the others: a perf that attached late (its start
    can take longer than the workload's go) would miss the storm's first yields."""

    def __init__(self, tid):
        super().__init__("record", "-q", "-e", "syscalls:sys_enter_sched_yield", "-e", "sched:sched_switch",
                         "-t", str(tid))

    def counts(self):
        """Stops perf: {"yields": all sched_yield() calls, "switched": those that switched,
        "to": {tid: the switched yields that ran it}}."""
        self.stop()
        out = subprocess.run(["perf", "script", "-i", self.data, "-F", "event,trace"], capture_output=True,
                             text=True, check=True, timeout=120).stdout
        yields = switched = 0
        to = {}
        in_yield = False
        for line in out.splitlines():
            if "sys_enter_sched_yield" in line:
                yields += 1
                in_yield = True
            elif "sched_switch" in line and in_yield:
                if re.search(r"prev_state=R(?!\+)", line):
                    switched += 1
                    nxt = re.search(r"next_pid=(\d+)", line)
                    if nxt:
                        to[int(nxt.group(1))] = to.get(int(nxt.group(1)), 0) + 1
                in_yield = False
        assert yields, f"perf saw no sched_yield(): {out[:500]}"
        return {"yields": yields, "switched": switched, "to": to}


class PerfStat(PerfRecorder):
    """perf stat counting one process's @event (lock:contention_end: one per wait) in the
    kernel, without pairing anything: the exact number of waits. Counting when this
    returns (the control FIFO), not some time after perf's start. The bench uses it too."""

    def __init__(self, pid, event="lock:contention_end"):
        self.event = event.split(":")[-1]
        super().__init__("stat", "-x,", "-e", event, "-p", str(pid), out="stat.csv")

    def total(self):
        """Stops perf and returns its count."""
        self.stop()
        with open(self.data) as f:
            text = f.read()
        shutil.rmtree(self.dir, ignore_errors=True)
        for line in text.splitlines():
            fields = line.split(",")
            if len(fields) > 2 and self.event in fields[2] and fields[0].isdigit():
                return int(fields[0])
        raise RuntimeError(f"perf stat wrote no count: {text[:300]}")
