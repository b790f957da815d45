"""Fleet deployment: the Prometheus metrics listener and the Kubernetes DaemonSet.

The metrics come from the status response, so the scrape and `lockscope status` agree;
the exposition is parsed with the Prometheus client library's own parser. The DaemonSet is
decoded strictly into k8s.io/api's types by a Go test (tests/k8s), which also runs the
container's arguments through lockscoped's option parser.
"""
import os
import socket
import subprocess
import urllib.error
import urllib.request

import pytest

from conftest import BUILD, LOCKSCOPED, ROOT, Workload, require_bpf, require_tool, skip_or_fail, start_daemon, stop_daemon

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # make deps installs python3-prometheus-client
    text_string_to_metric_families = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def metrics_daemon():
    require_bpf()
    port = free_port()
    d = start_daemon((f"--metrics-listen=127.0.0.1:{port}",))
    d.url = f"http://127.0.0.1:{port}"
    yield d
    rc, log = stop_daemon(d)
    assert rc == 0, log


def scrape(d):
    with urllib.request.urlopen(d.url + "/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        return r.read().decode()


def test_metrics_agree_with_status(metrics_daemon):
    if text_string_to_metric_families is None:
        skip_or_fail("python3-prometheus-client is not installed (make deps)")
    d = metrics_daemon
    w = Workload("mutex_server", "--seconds", "1")
    w.go()
    w.wait()
    text = scrape(d)
    st = d.call({"cmd": "status"})
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    # the parser strips _total from counter family names
    for name in ("lockscope_events", "lockscope_events_dropped", "lockscope_program_attached",
                 "lockscope_feature_available", "lockscope_cpu_seconds", "lockscope_resident_memory_bytes",
                 "lockscope_user_frames", "lockscope_config_reloads", "lockscope_build_info"):
        assert name in fams, name
    dropped = {s.labels["reason"]: s.value for s in fams["lockscope_events_dropped"].samples}
    assert dropped.keys() == st["dropped"].keys()
    attached = {s.labels["program"]: s.value for s in fams["lockscope_program_attached"].samples}
    assert attached == {p["name"]: float(p["attached"]) for p in st["programs"]}
    events = {s.labels["source"]: s.value for s in fams["lockscope_events"].samples}
    # counters only grow: the scrape came first
    assert 0 < events["futex_waits"] <= st["events"]["futex_waits"]
    assert all(s.value == 1 for s in fams["lockscope_feature_available"].samples)
    # the lock metrics follow the health ones
    mutex = [s for s in fams["lockscope_contentions"].samples
             if s.labels.get("type") == "futex:mutex" and s.labels.get("comm") == "mutex_server"]
    assert mutex and mutex[0].value > 0
    assert fams["lockscope_wait_duration_seconds"].type == "histogram"
    # no stack or address labels, ever
    labels = {k for f in fams.values() for s in f.samples for k in s.labels}
    assert labels <= {"source", "reason", "program", "feature", "result", "version",
                      "kind", "type", "comm", "unit", "backend", "le"}, labels


def test_metrics_listener_answers_only_metrics(metrics_daemon):
    d = metrics_daemon
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(d.url + "/", timeout=10)
    assert e.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(d.url + "/metrics", data=b"x", method="POST"), timeout=10)
    assert e.value.code == 405
    # a client that connects and says nothing does not stop the others
    idle = [socket.create_connection(("127.0.0.1", int(d.url.rsplit(":", 1)[1]))) for _ in range(20)]
    try:
        assert "lockscope_build_info" in scrape(d)
        assert d.call({"cmd": "status"})["cmd"] == "status"
    finally:
        for s in idle:
            s.close()


def test_bad_metrics_listen_is_one_line():
    p = subprocess.run([LOCKSCOPED, "--metrics-listen=9464"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert p.stderr == "lockscoped: --metrics-listen: '9464' is not ADDR:PORT (127.0.0.1:9464, [::1]:9464)\n"


def test_kubernetes_daemonset_decodes_strictly():
    """k8s.io/api apps/v1 and core/v1, case-sensitive, unknown fields rejected (tests/k8s),
    compiled by `make test-build` (`go test -c`), run where `go test` would run it."""
    require_tool("go")
    exe = os.path.join(BUILD, "tests", "k8s.test")
    if not os.access(exe, os.X_OK):
        skip_or_fail(f"no {exe}: build it with `make test-build`")
    p = subprocess.run([exe, "-test.count=1", "-test.v"], cwd=os.path.join(ROOT, "tests/k8s"),
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, LOCKSCOPED=LOCKSCOPED))
    print(p.stdout[-4000:], p.stderr[-4000:])
    assert p.returncode == 0
    assert "--- PASS: TestDaemonSet" in p.stdout
    assert "--- PASS: TestStrictDecodeRejectsUnknownFields" in p.stdout
    assert "LOCKSCOPED unset" not in p.stdout
