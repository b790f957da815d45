"""End to end with a real Parca: lockscoped pushes a profile a second while the seed-004
server runs in a unit of its own; Parca's own query API then gives back the server's
contentions, under the labels we sent, with the waits' stacks, and TTAS spinners' CPU
samples in the spin profile.

Parca is the version tests/parca/go.mod pins, built from the Go module proxy by
`make parca` (~6 minutes the first time; `make test` builds it beside the other tests when
LOCKSCOPE_TEST_PARCA=1 or CI=true, and runs these last: conftest.parca_binary()). It runs
on a loopback port with its data in the test's directory."""
import os
import subprocess
import time

import grpcweb
from conftest import parca_binary, require_tool, stop_daemon
from test_push import SPIN_UNIT, UNIT, free_port, push_daemon, run_server_in_unit, run_spinners_in_unit

QUERY = "parca.query.v1alpha1.QueryService"
HOST = "node-7"
# Parca names a profile type NAME:SAMPLE_TYPE:SAMPLE_UNIT:PERIOD_TYPE:PERIOD_UNIT[:delta]
CONTENTIONS = "lockscope:contentions:count:contentions:count:delta"
SPIN = "lockscope_spin:samples:count:samples:count:delta"
# the query's REPORT_TYPE_PPROF and MODE_MERGE (parca/query/v1alpha1/query.proto)
REPORT_PPROF, MODE_MERGE = 1, 2


class Parca:
    def __init__(self, tmp):
        parca = parca_binary()
        (tmp / "parca.yaml").write_text(
            f'object_storage:\n  bucket:\n    type: "FILESYSTEM"\n    config:\n      directory: "{tmp}/data"\n')
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = open(tmp / "parca.log", "w+")
        # no debuginfod upstream: nothing leaves the machine, and our frames come named
        self.proc = subprocess.Popen([parca, f"--config-path={tmp}/parca.yaml", f"--http-address={self.url[7:]}",
                                      "--debuginfod-upstream-servers=", f"--debuginfo-cache-dir={tmp}/debuginfo",
                                      f"--storage-path={tmp}/storage"],
                                     stdout=self.log, stderr=subprocess.STDOUT, cwd=tmp)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.call("ProfileTypes", b"")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    self.log.seek(0)
                    raise AssertionError(f"Parca did not start:\n{self.log.read()[-3000:]}")
                time.sleep(0.2)

    def call(self, method, msg):
        return grpcweb.call(self.url, f"{QUERY}/{method}", msg)

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def profile_types(parca):
    reply = grpcweb.parse(parca.call("ProfileTypes", b"")[0])
    return {":".join(t[k][0].decode() for k in (1, 2, 3, 4, 5)) + (":delta" if t.get(6, [0])[0] else "")
            for t in map(grpcweb.parse, reply.get(1, []))}


def label_values(parca, name, start, end):
    reply = parca.call("Values", grpcweb.field(1, name) + grpcweb.timestamp(3, start) + grpcweb.timestamp(4, end))
    return {v.decode() for v in grpcweb.parse(reply[0]).get(1, [])}


def merged_pprof(parca, query, start, end):
    merge = grpcweb.field(1, query) + grpcweb.timestamp(2, start) + grpcweb.timestamp(3, end)
    reply = parca.call("Query", grpcweb.field(1, MODE_MERGE) + grpcweb.field(3, merge) +
                       grpcweb.field(5, REPORT_PPROF))
    return grpcweb.parse(reply[0])[6][0]


def go_pprof(path, *args):
    return subprocess.run(["go", "tool", "pprof", *args, str(path)], capture_output=True, text=True, timeout=120,
                          check=True).stdout


def contentions(parca, selector, start, end, path, profile=CONTENTIONS):
    """The first values (contentions; samples) Parca holds for @selector: its merged
    profile's samples summed (a merge has one value per sample and no labels: the selector
    chose them)."""
    path.write_bytes(merged_pprof(parca, f"{profile}{selector}", start, end))
    raw = go_pprof(path, "-raw")
    lines = raw[raw.index("Samples:"):raw.index("Locations")].splitlines()
    assert lines[1].split() == [profile.split(":")[1] + "/" + profile.split(":")[2]], lines[:2]
    return sum(int(line.split(":")[0]) for line in lines[2:] if ":" in line)


def test_parca_end_to_end(tmp_path):
    require_tool("go")  # go tool pprof reads what Parca answers
    parca = Parca(tmp_path)
    try:
        start = time.time() - 5
        d = push_daemon(f"--push-parca={parca.url}", f"--push-host={HOST}")
        try:
            contended = run_server_in_unit(d)
            spun = run_spinners_in_unit(d)
            status = d.call({"cmd": "status"})
            st = status["push"]["parca"]
            period_ns = 10**9 // status["config"]["settings"]["spin-freq"]  # each spin sample's CPU time
        finally:
            rc, log = stop_daemon(d)
        end = time.time() + 5
        assert rc == 0, log
        assert st["sent"] >= 3 and st["queued"] == 0 and st["last_error"] is None, st
        assert st["dropped_rejected"] + st["dropped_retries"] + st["dropped_queue_full"] == 0, st

        # the series as Parca made them: our profile types, the host label we sent
        types = profile_types(parca)
        assert {CONTENTIONS, "lockscope:delay:nanoseconds:contentions:count:delta"} <= types, types
        assert HOST in label_values(parca, "host", start, end)

        # the server's user-lock waits, selected by the samples' own labels (kind, type,
        # unit): what Parca holds is what top counted; a unit that does not exist holds none
        path = tmp_path / "merged.pb.gz"
        pushed = contentions(parca, f'{{host="{HOST}",unit="{UNIT}",kind="user",type="futex:mutex"}}', start, end, path)
        print(f"Parca holds {pushed} contentions of {UNIT}; top counted {contended}")
        assert abs(pushed - contended) <= max(5, 0.01 * contended), (pushed, contended)
        assert contentions(parca, f'{{host="{HOST}",unit="none.service"}}', start, end, tmp_path / "none.pb.gz") == 0

        # the waits' stacks: the server's lock_counted() above pthread_mutex_lock in nearly
        # all that have one (the rest of the count is shared among the sampled stacks as
        # "[stack missing]" until the stratum has a stack of its own)
        top = go_pprof(path, "-top", "-cum")
        cum = {" ".join(row.split()[5:]): float(row.split()[4].rstrip("%")) for row in top.splitlines()
               if len(row.split()) >= 6 and row.split()[4].endswith("%")}
        stacked = 100 - cum.get("[stack missing]", 0)
        assert stacked >= 50, top
        for frame in ("lock_counted", "___pthread_mutex_lock"):
            assert cum.get(frame, 0) >= 0.9 * stacked, (frame, top)

        # the spin profile: the spinners' samples, as many as the daemon counted, in their
        # loop. Parca answers a samples/count type as samples times the period (CPU time,
        # as for its own agent's CPU profiles)
        assert {SPIN, "lockscope_spin:cpu:nanoseconds:samples:count:delta"} <= profile_types(parca)
        path = tmp_path / "spin.pb.gz"
        samples = contentions(parca, f'{{host="{HOST}",unit="{SPIN_UNIT}",kind="pause_spin"}}', start, end, path,
                              profile=SPIN) / period_ns
        print(f"Parca holds {samples} spin samples of {SPIN_UNIT}; the daemon counted {spun}")
        assert abs(samples - spun) <= max(5, 0.01 * spun), (samples, spun)
        assert "ttas_spin" in go_pprof(path, "-top"), go_pprof(path, "-top")
    finally:
        parca.close()
