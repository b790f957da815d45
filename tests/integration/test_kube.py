"""Kubernetes pods named: lockscoped fetches a pod list (the kubelet's /pods answer in
tests/data, served on loopback with a bearer token) while seed 004's server runs in a
cgroup shaped as the kubelet's systemd driver makes them; the pod's namespace and name then
show in `top --by pod`, `threads --by pod`, -G NAMESPACE/NAME, the JSON rows, Prometheus and
the pushed profiles. A pod the list lacks makes the daemon fetch it again at once; a server
that refuses leaves the pods unnamed, counted, and the daemon serving."""
import json
import os
import re
import subprocess
import tempfile
import time

from conftest import DATA_DIR, LOCKSCOPED, Workload, require_bpf, start_daemon, stop_daemon, wait_for
from test_cgroups import Cgroup
from test_push import Receiver, pprof_raw, pushed_through

POD_LIST = os.path.join(DATA_DIR, "kubelet-pods.json")
UID = "1f6c2a3e-5b7d-4c8e-9f00-112233445566"
CID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
NS, NAME = "shop", "checkout-7d9f8b6c4d-x2x8q"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.lockscope-test-token"
MIN_SLEEPS = 2000


class Kubelet(Receiver):
    """GET /pods on loopback, as the kubelet answers it: the list when the bearer token is
    right, 401 otherwise. @pods is what it lists (swapped by the test)."""

    def __init__(self):
        with open(POD_LIST) as f:
            self.full = f.read()
        self.pods = self.full
        super().__init__(answer=self.answer)
        self.url += "/pods"

    def answer(self, n):
        if self.requests[n]["headers"].get("Authorization") != f"Bearer {TOKEN}":
            return 401, {}, b"Unauthorized"
        return 200, {"Content-Type": "application/json"}, self.pods.encode()


def token_file(token):
    fd, path = tempfile.mkstemp(prefix="lockscope-token-")
    os.write(fd, (token + "\n").encode())
    os.close(fd)
    return path


def pod_cgroup():
    # the kubelet's systemd driver: a pod slice and a container scope (under a test parent)
    return Cgroup(f"/lockscope-test-k8s/kubepods-burstable-pod{UID.replace('-', '_')}.slice/"
                  f"cri-containerd-{CID}.scope")


def test_pods_are_named():
    require_bpf()
    kubelet, pyroscope = Kubelet(), Receiver()
    # an empty list first: the pod's cgroup, once seen, must make the daemon ask again
    kubelet.pods = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []})
    token = token_file(TOKEN)
    d = start_daemon((f"--kube-pods-url={kubelet.url}", f"--kube-token-file={token}", "--kube-pods-interval=3600",
                      f"--push-pyroscope={pyroscope.url}", "--push-interval=1"))
    cg = pod_cgroup()
    try:
        wait_for("the first fetch", lambda: d.call({"cmd": "status"})["kubernetes"]["fetches"] >= 1)
        first = kubelet.requests[0]
        assert (first["method"], first["path"], first["headers"].get("Authorization")) == ("GET", "/pods", f"Bearer {TOKEN}")
        kubelet.pods = kubelet.full
        w = Workload("mutex_server", "--until", str(MIN_SLEEPS), "--workers", "4", cgroup=cg.dir)
        w.go()
        w.wait()
        # the pod was not in the list: fetched again within seconds, not the hour's interval
        st = wait_for("a fetch after the new pod", lambda: (lambda s: s if s["fetches"] >= 2 else None)(
            d.call({"cmd": "status"})["kubernetes"]))
        assert st["pods"] == 3 and st["failed"] == 0 and st["last_error"] is None, st
        assert f"kubernetes {kubelet.url}: 3 pods named" in d.cli("status").stdout
        time.sleep(1.5)  # one tick: the list handed to the tables

        rows = d.cli_json("top", "-w", "all", "--kind", "user", "-p", str(w.pid), "-t")["rows"]
        mine = sum(r["contended"] for r in rows)
        assert mine >= MIN_SLEEPS * 0.9
        assert all(r["cgroup"]["pod"] == UID and r["cgroup"]["namespace"] == NS and r["cgroup"]["pod_name"] == NAME
                   and r["cgroup"]["container"] == CID for r in rows), rows

        # --by pod: the pod's row holds exactly its process's waits, named
        by_pod = [r for r in d.cli_json("top", "-w", "all", "--kind", "user", "--by", "pod")["rows"]
                  if r["cgroup"] and r["cgroup"]["pod"] == UID]
        assert len(by_pod) == 1 and by_pod[0]["contended"] == mine, by_pod
        assert by_pod[0]["cgroup"]["namespace"] == NS and by_pod[0]["cgroup"]["pod_name"] == NAME
        out = d.cli("top", "-w", "all", "--kind", "user", "--by", "pod").stdout
        assert re.search(rf"\b{NS}/{NAME}\b", out), out

        # -G NAMESPACE/NAME keeps the pod's process only; the UID does the same
        for g in (f"{NS}/{NAME}", UID):
            assert {r["pid"] for r in d.cli_json("top", "-w", "all", "--kind", "user", "-t", "-G", g)["rows"]} == {w.pid}
        assert d.cli_json("top", "-w", "all", "-G", f"{NS}/no-such-pod")["rows"] == []

        # threads --by pod: one row adding up the pod's threads, as the per-thread rows count them
        threads = d.cli_json("threads", "-w", "all", "-p", str(w.pid))["rows"]
        grouped = [r for r in d.cli_json("threads", "-w", "all", "--by", "pod")["rows"]
                   if r["cgroup"]["pod"] == UID]
        assert len(grouped) == 1, grouped
        g = grouped[0]
        assert g["threads"] == len(threads) and g["pid"] == w.pid
        for field in ("voluntary", "involuntary", "oncpu_ns"):
            assert g[field] == sum(t[field] for t in threads), field
        assert g["cgroup"]["pod_name"] == NAME
        out = d.cli("threads", "-w", "all", "--by", "pod").stdout
        assert re.search(rf"\b{NS}/{NAME}\b", out), out

        # Prometheus: the pod's series carry its namespace and name
        prom = d.cli("export", "-F", "prometheus", "-w", "all").stdout
        lines = [ln for ln in prom.splitlines() if ln.startswith("lockscope_contentions_total{")
                 and f'namespace="{NS}",pod="{NAME}"' in ln and 'type="futex:mutex"' in ln]
        assert lines and sum(int(ln.rsplit(" ", 1)[1]) for ln in lines) == mine, lines

        # the pushed profiles: each interval's samples carry the pod's names once the list has
        # them (the first run's waits were mostly pushed before: their samples have the unit only)
        w2 = Workload("mutex_server", "--until", "1000", "--workers", "2", cgroup=cg.dir)
        w2.go()
        w2.wait()
        mine2 = sum(r["contended"] for r in d.cli_json("top", "-w", "all", "--kind", "user", "-p", str(w2.pid), "-t")["rows"])
        pushed_through(d, time.time_ns())  # every interval holding what was counted up to now
        in_unit = named = 0
        seen = set()
        for req in pyroscope.requests:
            if "_spin" in req["path"]:
                continue
            _, samples = pprof_raw(req["body"])
            for n, _, labels in samples:
                seen.add(tuple(sorted(labels.items())))
                if labels.get("unit") != f"cri-containerd-{CID}.scope" or labels.get("type") != "futex:mutex":
                    continue
                in_unit += n
                if "pod" in labels:
                    assert labels["pod"] == NAME and labels["namespace"] == NS, labels
                    named += n
        assert in_unit == mine + mine2, (in_unit, mine, mine2, d.call({"cmd": "status"})["push"], seen)
        assert mine2 <= named <= in_unit, (named, mine2)
    finally:
        cg.remove()
        rc, log = stop_daemon(d)
        kubelet.close()
        pyroscope.close()
        os.unlink(token)
    assert rc == 0, log


def test_a_refusing_server_is_counted_and_pods_keep_their_uid():
    require_bpf()
    kubelet = Kubelet()
    token = token_file("not-the-token")
    d = start_daemon((f"--kube-pods-url={kubelet.url}", f"--kube-token-file={token}", "--kube-pods-interval=5"))
    cg = pod_cgroup()
    try:
        st = wait_for("a refused fetch", lambda: (lambda s: s if s["failed"] >= 1 else None)(
            d.call({"cmd": "status"})["kubernetes"]))
        assert st["fetches"] == 0 and st["pods"] == 0
        assert "HTTP 401" in st["last_error"] and "list" in st["last_error"], st
        assert "last error: HTTP 401" in d.cli("status").stdout
        w = Workload("mutex_server", "--until", "500", "--workers", "2", cgroup=cg.dir)
        w.go()
        w.wait()
        rows = d.cli_json("top", "-w", "all", "--kind", "user", "--by", "pod")["rows"]
        mine = [r for r in rows if r["cgroup"] and r["cgroup"]["pod"] == UID]
        assert len(mine) == 1 and mine[0]["cgroup"]["namespace"] is None and mine[0]["cgroup"]["pod_name"] is None
        assert UID in d.cli("top", "-w", "all", "--kind", "user", "--by", "pod").stdout
    finally:
        cg.remove()
        rc, log = stop_daemon(d)
        kubelet.close()
        os.unlink(token)
    assert rc == 0, log
    assert "HTTP 401" in log and log.count("cannot read the pod list") == 1, log  # said once, not every fetch


def test_kube_flags_say_what_to_do():
    for args, msg in ((("--kube-pods-url=kubelet:10250/pods",), "is not an http:// or https:// URL"),
                      (("--kube-token-file=token",), "not an absolute path"),
                      (("--kube-pods-interval=1",), "kube-pods-interval")):
        r = subprocess.run([LOCKSCOPED, "--check", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and msg in r.stderr, (args, r.stderr)
