"""The config file: every key documented at its default, errors by line and key, SIGHUP.

SIGHUP re-reads the file: what changes without reattaching (thresholds, socket-group,
expose-kernel-addresses) changes at once; other keys are logged and listed in status as
pending a restart; a bad file changes nothing and the daemon keeps serving.
"""
import os
import signal
import subprocess
import time

from conftest import LOCKSCOPED, ROOT, Workload, start_daemon, stop_daemon
from test_spin import findings


def dump_config(*args):
    p = subprocess.run([LOCKSCOPED, "--dump-config", *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def settings(text, commented=False):
    """KEY = VALUE lines of a config file (with commented=True, the '#key = value' ones)."""
    out = {}
    for line in text.splitlines():
        if commented and line.startswith("#") and "=" in line and not line.startswith("# "):
            line = line[1:]
        if line and not line.startswith("#") and "=" in line:
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def test_shipped_config_lists_every_key_at_its_default():
    """deploy/lockscoped.conf is the daemon's own table; `make config` regenerates it."""
    with open(os.path.join(ROOT, "deploy/lockscoped.conf")) as f:
        shipped = f.read()
    defaults = settings(dump_config())
    helptext = subprocess.run([LOCKSCOPED, "--help"], capture_output=True, text=True).stdout
    keys = [line.split()[0][2:] for line in helptext.split("Settings")[1].splitlines() if line.startswith("      --")]
    assert sorted(keys) == sorted(defaults)
    assert settings(shipped, commented=True) == defaults, "run `make config`"
    # each key has its help line above it
    lines = shipped.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("#") and not line.startswith("# ") and "=" in line:
            assert lines[i - 1].startswith("# "), line


def test_bad_config_is_refused_at_start_with_line_and_key(tmp_path):
    conf = tmp_path / "lockscoped.conf"
    conf.write_text("# ok so far\nstack-rate = 50\nspin-freq = lots\n")
    p = subprocess.run([LOCKSCOPED, "-c", str(conf), "--socket", str(tmp_path / "s")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert p.stderr.strip() == f"lockscoped: {conf}:3: spin-freq: 'lots' is not an integer from 0 to 10000"
    p = subprocess.run([LOCKSCOPED, "-c", str(tmp_path / "missing.conf")], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "missing.conf: No such file or directory" in p.stderr
    # the command line wins over the file
    conf.write_text("stack-rate = 50\nsocket-group = ops\n")
    got = settings(dump_config("-c", str(conf), "--stack-rate=7"))
    assert got["stack-rate"] == "7" and got["socket-group"] == "ops"


def reload(d):
    d.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    return d.call({"cmd": "status"})["config"]


def test_sighup_reloads_what_can_change(tmp_path):
    conf = tmp_path / "lockscoped.conf"
    conf.write_text("yield-min-rate = 100\nstack-rate = 200\n")
    d = start_daemon(("-c", str(conf)))
    try:
        cfg = d.call({"cmd": "status"})["config"]
        assert cfg["path"] == str(conf) and cfg["reloads"] == 0 and cfg["pending_restart"] == []
        assert cfg["settings"]["yield-min-rate"] == 100 and cfg["settings"]["ringbuf-kb"] == 256
        # a nanosleep(0) storm (~14k/s) is a finding at the default threshold...
        w = Workload("busy_poll", "--mode", "nanosleep", "--seconds", "4")
        w.go()
        time.sleep(1.5)
        assert len(findings(d, w.pid, "yield_spin")) == 1
        # ...and not once the threshold is raised; stack-rate needs a restart
        conf.write_text("yield-min-rate = 1000000\nstack-rate = 10\n")
        cfg = reload(d)
        assert cfg["reloads"] == 1 and cfg["reload_error"] is None
        assert cfg["settings"]["yield-min-rate"] == 1000000
        assert cfg["settings"]["stack-rate"] == 200 and cfg["pending_restart"] == ["stack-rate"]
        assert findings(d, w.pid, "yield_spin") == []
        # a bad file changes nothing, says where, and the daemon serves on
        conf.write_text("yield-min-rate = 100\nno-such-key = 1\n")
        cfg = reload(d)
        assert cfg["reloads"] == 1
        assert cfg["reload_error"] == f"{conf}:2: unknown setting 'no-such-key' (see lockscoped --help)"
        assert cfg["settings"]["yield-min-rate"] == 1000000
        assert findings(d, w.pid, "yield_spin") == []
        w.wait()
    finally:
        rc, log = stop_daemon(d)
    print(log)
    assert rc == 0
    assert "reload: yield-min-rate = 1000000 (was 100)" in log
    assert "reload: stack-rate = 10 needs a restart; 200 stays in force" in log
    assert f"reload: {conf}:2: unknown setting 'no-such-key'" in log
