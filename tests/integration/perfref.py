"""The independent count: `perf lock record` + `perf lock contention -t` (tracepoint mode).

perf reads lock:contention_begin/end itself and pairs them in user space; it shares no
code with lockscope. Recording starts disabled and is enabled through perf's control
FIFO, so the caller knows exactly when perf is counting.
"""
import os
import re
import signal
import subprocess
import tempfile

ROW = re.compile(r"^\s*(\d+)\s+[\d.]+ \w+\s+[\d.]+ \w+\s+[\d.]+ \w+\s+(\d+)\s+(\S.*)$")


class _Recorder:
    """perf recording @args into its own directory, enabled through the control FIFO."""

    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="lockscope-perf-")
        self.data = os.path.join(self.dir, "perf.data")
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


class PerfRecordAll(_Recorder):
    """@event recorded on every CPU and counted per process afterwards. Unlike a count
    attached to a process (perf stat -p, perf lock record -p), it also sees what an exiting
    thread waits for after perf's per-task events have left it (tasklist_lock and siglock
    in exit_notify): ~10 % of the waits of threads that live a few milliseconds."""

    def __init__(self, event="lock:contention_end"):
        # 8 MiB of buffer per CPU: the whole host's events, not only the process's
        super().__init__("record", "-a", "-m", "2048", "-e", event)

    def count(self, pid):
        """Stops perf and returns @pid's events."""
        self.stop()
        p = subprocess.run(["perf", "script", "-i", self.data, "-F", "pid"], capture_output=True,
                           text=True, timeout=120, check=True)
        # perf script warns "Processed N events and lost M chunks!" when the buffer overflowed
        assert "lost" not in p.stderr.lower(), f"perf lost events, the reference is incomplete: {p.stderr}"
        return sum(1 for line in p.stdout.split() if line == str(pid))


class PerfLock(_Recorder):
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


class PerfStat:
    """perf stat counting one process's @event (lock:contention_end: one per wait) in the
    kernel, without pairing anything: the exact number of waits. The bench uses it too."""

    def __init__(self, pid, event="lock:contention_end"):
        self.event = event.split(":")[-1]
        self.out = tempfile.mktemp(prefix="lockscope-perfstat-", suffix=".csv")
        self.proc = subprocess.Popen(["perf", "stat", "-x,", "-o", self.out, "-e", event, "-p", str(pid)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def total(self):
        """Stops perf and returns its count."""
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        with open(self.out) as f:
            text = f.read()
        os.unlink(self.out)
        for line in text.splitlines():
            fields = line.split(",")
            if len(fields) > 2 and self.event in fields[2] and fields[0].isdigit():
                return int(fields[0])
        raise RuntimeError(f"perf stat wrote no count: {text[:300]}")
