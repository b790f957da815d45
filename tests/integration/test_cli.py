"""One option grammar across the CLI's commands (issue 20).

Every option given to every command either is taken or is refused in one line that names
the commands that take it; each command so named does take it. No daemon is needed: the
options are checked before the CLI connects (to a socket that does not exist here).
"""
import re
import subprocess

from conftest import LOCKSCOPE, Workload, require_tool

COMMANDS = ["status", "top", "scan", "threads", "spin", "report", "export", "flamegraph"]
# each option with a valid value
OPTIONS = [["-p", "1"], ["-t"], ["-l"], ["-Y", "mutex"], ["-E", "3"], ["-w", "1m"], ["-k", "contended"],
           ["--stacks"], ["--max-stack", "4"], ["--kind", "user"], ["--holders"], ["--precise"], ["--measure"],
           ["-d", "1s"], ["-F", "folded"], ["--profile", "block"], ["--output", "/nonexistent/x"],
           ["--title", "t"], ["-q"], ["--json"]]
REFUSED = re.compile(r"^lockscope: (\S+) does not apply to (\S+) \((only )?([a-z, ]+) takes? it\)$")


def run(*args):
    return subprocess.run([LOCKSCOPE, *args, "--socket", "/nonexistent/lockscope.sock"],
                          capture_output=True, text=True, timeout=10)


def refused(cmd, opt):
    """The commands named as taking @opt when @cmd refuses it, else None."""
    p = run(cmd, *opt)
    lines = p.stderr.strip().splitlines()
    m = REFUSED.match(lines[0]) if lines else None
    if not m:
        return None
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert m.group(2) == cmd
    return m.group(4).split(", ")


def test_every_option_is_taken_or_refused_naming_who_takes_it():
    takers_of = {}
    for opt in OPTIONS:
        for cmd in COMMANDS:
            takers = refused(cmd, opt)
            if takers is None:
                continue
            assert cmd not in takers
            assert takers_of.setdefault(opt[0], takers) == takers, f"{opt[0]}: the same takers everywhere"
    assert takers_of, "some options apply to some commands only"
    for opt in OPTIONS:
        for cmd in takers_of.get(opt[0], []):
            assert refused(cmd, opt) is None, f"{cmd} is named as taking {opt[0]} but refuses it"
    # the common options go with every command
    for cmd in COMMANDS:
        assert refused(cmd, ["--json"]) is None


def test_scan_shows_progress_on_a_terminal_only(daemon):
    """A scan redraws one line on stderr with its time and waits so far when stderr is a
    terminal (script(1) gives it one), and prints nothing of the kind into a pipe or with -q."""
    require_tool("script")
    w = Workload("mmap_storm", "--seconds", "6")
    w.go()
    try:
        def on_tty(*extra):
            cmd = " ".join([LOCKSCOPE, "scan", "--socket", daemon.sock, "-p", str(w.pid), "-d", "2500ms", *extra])
            return subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True,
                                  timeout=30).stdout
        out = on_tty()
        lines = re.findall(rf"scan of pid {w.pid}: (\d+) s of 2 s, (\d+) s left, (\d+) waits so far", out)
        print(lines)
        assert len(lines) >= 2, out[:500]
        assert [int(n) for _, _, n in lines] == sorted(int(n) for _, _, n in lines), "waits only grow"
        assert "contended" in out, "the table follows"
        assert "s left" not in on_tty("-q")
        piped = daemon.cli("scan", "-p", str(w.pid), "-d", "1s")
        assert "s left" not in piped.stderr and "s left" not in piped.stdout
    finally:
        w.wait()
