"""Who may use the daemon, with real users created for the test.

The socket is 0660 root:lockscope and every peer is checked with SO_PEERCRED: root and
members of the group may query, others are refused. A member may scan only processes that
ptrace would let it trace (same uids and gids, or CAP_SYS_PTRACE), and sees kernel
addresses only with CAP_SYSLOG unless the daemon sets expose-kernel-addresses.
"""
import grp
import json
import os
import pwd
import stat
import subprocess
import time

import pytest

from conftest import (LOCKSCOPE, LOCKSCOPED, Workload, check_response, for_other_users, require_bpf, require_tool,
                      start_daemon, stop_daemon)
from test_klock import STORM_ARGS

GROUP = "lockscope"
MEMBER = "lstest-member"
OTHER = "lstest-other"


def _run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def users():
    """The group and two users: one a member of it, one not. Removed afterwards."""
    require_bpf()
    require_tool("useradd")
    made_group = False
    try:
        grp.getgrnam(GROUP)
    except KeyError:
        _run("groupadd", "--system", GROUP)
        made_group = True
    for name in (MEMBER, OTHER):
        subprocess.run(["userdel", name], capture_output=True)
    _run("useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--groups", GROUP, MEMBER)
    _run("useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER)
    yield {name: pwd.getpwnam(name) for name in (MEMBER, OTHER)}
    for name in (MEMBER, OTHER):
        subprocess.run(["userdel", name], capture_output=True)
    if made_group:
        subprocess.run(["groupdel", GROUP], capture_output=True)


def as_user(user, *args, caps=()):
    """Runs the CLI as @user with its real groups (--init-groups), plus @caps if any."""
    if args and args[0] == LOCKSCOPE:
        args = (for_other_users(LOCKSCOPE), *args[1:])
    cmd = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups"]
    if caps:
        cmd += [f"--inh-caps={','.join('+' + c for c in caps)}",
                f"--ambient-caps={','.join('+' + c for c in caps)}"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=120)


def start_shared_daemon(*extra):
    """A daemon whose socket directory others may enter, as /run/lockscope is."""
    d = start_daemon(extra)
    os.chmod(os.path.dirname(d.sock), 0o755)
    return d


@pytest.fixture
def daemon(users):
    d = start_shared_daemon()
    yield d
    rc, log = stop_daemon(d)
    assert rc == 0, log


def test_socket_mode_and_who_may_query(daemon, users):
    st = os.stat(daemon.sock)
    assert stat.S_IMODE(st.st_mode) == 0o660
    assert st.st_uid == 0 and st.st_gid == grp.getgrnam(GROUP).gr_gid
    p = as_user(users[MEMBER], LOCKSCOPE, "status", "--json", "--socket", daemon.sock)
    assert p.returncode == 0, p.stderr
    check_response(json.loads(p.stdout))
    # the mode keeps a non-member out; the CLI says which group lets one in
    p = as_user(users[OTHER], LOCKSCOPE, "status", "--socket", daemon.sock)
    print(p.stderr)
    assert p.returncode == 1
    assert f"permission denied on {daemon.sock}: join group {GROUP}" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    # and with the mode opened, SO_PEERCRED still refuses, in one line, and the daemon serves on
    os.chmod(daemon.sock, 0o666)
    p = as_user(users[OTHER], LOCKSCOPE, "status", "--socket", daemon.sock)
    print(p.stderr)
    assert p.returncode == 1
    assert f"permission denied: run as root or join group {GROUP}" in p.stderr
    assert daemon.call({"cmd": "status"})["cmd"] == "status"


def test_scan_follows_ptrace_rules(daemon, users):
    """A member scans its own processes; another user's needs CAP_SYS_PTRACE."""
    member = users[MEMBER]
    theirs = subprocess.Popen(["sleep", "60"])
    mine = subprocess.Popen(["setpriv", f"--reuid={member.pw_uid}", f"--regid={member.pw_gid}",
                             "--init-groups", "sleep", "60"])
    try:
        time.sleep(0.2)
        scan = (LOCKSCOPE, "scan", "-d", "300ms", "--json", "--socket", daemon.sock, "-p")
        p = as_user(member, *scan, str(theirs.pid))
        print(p.stderr)
        assert p.returncode == 1
        assert f"permission denied: pid {theirs.pid} belongs to another user" in p.stderr
        assert "CAP_SYS_PTRACE" in p.stderr
        p = as_user(member, *scan, str(mine.pid))
        assert p.returncode == 0, p.stderr
        assert check_response(json.loads(p.stdout))["cmd"] == "scan"
        p = as_user(member, *scan, str(theirs.pid), caps=("sys_ptrace",))
        assert p.returncode == 0, p.stderr
        assert check_response(json.loads(p.stdout))["cmd"] == "scan"
    finally:
        for proc in (theirs, mine):
            proc.kill()
            proc.wait()


def kernel_addresses(resp):
    """The addresses of kernel locks and kernel frames in a top response."""
    out = []
    for r in resp["rows"]:
        if r.get("kind") == "kernel" and r.get("lock"):
            out.append(r["lock"]["addr"])
        for role in ("stack", "owner_stack"):
            for f in r.get(role) or []:
                if f["module"] == "kernel":
                    out.append(f["addr"])
    return out


def member_top(d, users, pid, caps=()):
    p = as_user(users[MEMBER], LOCKSCOPE, "top", "--kind", "kernel", "-p", str(pid), "-w", "all",
                "--stacks", "-l", "-o", "--json", "--socket", d.sock, caps=caps)
    assert p.returncode == 0, p.stderr
    return check_response(json.loads(p.stdout))


def test_kernel_addresses_need_cap_syslog(users):
    d = start_shared_daemon()
    try:
        w = Workload("mmap_storm", *STORM_ARGS)
        w.go()
        w.wait()
        time.sleep(0.5)
        root = kernel_addresses(d.cli_json("top", "--kind", "kernel", "-p", str(w.pid), "-w", "all",
                                           "--stacks", "-l", "-o"))
        assert root and all(a and a.startswith("0xffff") for a in root), root[:5]
        hidden = member_top(d, users, w.pid)
        assert kernel_addresses(hidden) and all(a is None for a in kernel_addresses(hidden))
        # names stay: the lock and the kernel frames are still named
        assert any((r["lock"] or {}).get("name") == "mmap_lock" for r in hidden["rows"])
        assert all(f["sym"] for r in hidden["rows"] for f in (r.get("stack") or [])[:3])
        text = as_user(users[MEMBER], LOCKSCOPE, "top", "--kind", "kernel", "-p", str(w.pid), "-w", "all",
                       "-l", "--socket", d.sock).stdout
        assert "[hidden]" in text and "0xffff" not in text, text
        # CAP_SYSLOG is kptr_restrict=1's rule
        assert all(a for a in kernel_addresses(member_top(d, users, w.pid, caps=("syslog",))))
        # every other command that shows kernel locks or frames follows the same rule
        for args in (("report", "-w", "all", "--json"), ("export", "-F", "json", "-w", "all"),
                     ("export", "-F", "folded", "-w", "all"), ("export", "-F", "prometheus", "-w", "all"),
                     ("spin", "-w", "all", "--json"), ("threads", "-w", "all", "--json"),
                     ("top", "--by", "unit", "-w", "all", "--json"),
                     ("scan", "-p", str(os.getpid()), "-d", "200ms", "--json")):
            shown = d.cli(*args).stdout
            member = as_user(users[MEMBER], LOCKSCOPE, *args, "--socket", d.sock)
            print(args, "0xffff" in shown, member.returncode, member.stderr[-300:])
            assert "0xffff" not in member.stdout, args
            assert member.returncode == (1 if args[0] == "scan" else 0), member.stderr
    finally:
        rc, log = stop_daemon(d)
        assert rc == 0, log
    d = start_shared_daemon("--expose-kernel-addresses=1")
    try:
        w = Workload("mmap_storm", *STORM_ARGS)
        w.go()
        w.wait()
        time.sleep(0.5)
        shown = kernel_addresses(member_top(d, users, w.pid))
        assert shown and all(a and a.startswith("0xffff") for a in shown)
    finally:
        rc, log = stop_daemon(d)
        assert rc == 0, log


def test_directories_others_may_write_are_refused(tmp_path):
    """A socket directory another user may write lets them replace the socket: the daemon
    will not serve there (a sticky one, like /tmp, is safe); a debuginfod cache they may
    write would feed root's parser their files: fetching stays off, and the log says why."""
    require_bpf()
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    p = subprocess.run([LOCKSCOPED, "--socket", str(open_dir / "ls.sock")], capture_output=True, text=True,
                       timeout=60)
    print(p.stderr)
    assert p.returncode == 1 and not (open_dir / "ls.sock").exists()
    assert "may be written by other users, who could replace the socket" in p.stderr
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    d = start_daemon(["--debuginfod-cache", str(cache)], sock=str(sticky / "ls.sock"),
                     env=dict(os.environ, DEBUGINFOD_URLS="http://127.0.0.1:9"))
    try:
        assert d.call({"cmd": "status"})["cmd"] == "status"
    finally:
        rc, log = stop_daemon(d)
    assert rc == 0, log
    assert f"debuginfod: {cache} (mode 0777, uid 0) may be written by other users" in log, log
