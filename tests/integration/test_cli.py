"""The CLI as a person meets it (issue 20): one option grammar, progress, man pages, completion.

Every option given to every command either is taken or is refused in one line that names
the commands that take it; each command so named does take it. No daemon is needed: the
options are checked before the CLI connects (to a socket that does not exist here).
"""
import os
import re
import subprocess

from conftest import BUILD, LOCKSCOPE, LOCKSCOPED, ROOT, Workload, require_tool

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


def help_options(binary):
    """Every long option the program's --help lists."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    return sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", out)))


def rendered(page):
    env = dict(os.environ, MANWIDTH="100", MAN_KEEP_FORMATTING="0")
    p = subprocess.run(["man", "-l", page], capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode == 0, p.stderr
    return re.sub(r".\x08", "", p.stdout)  # overstrike bold/underline, if any


def test_man_pages_render_and_carry_every_option_of_help():
    """lockscope(1) and lockscoped(8) are made from the programs' own --help (help2man), so
    every option --help lists is in the page man renders."""
    require_tool("man")
    for binary, page, section in ((LOCKSCOPE, "lockscope.1", "1"), (LOCKSCOPED, "lockscoped.8", "8")):
        text = rendered(os.path.join(BUILD, "man", page))
        name = os.path.basename(binary)
        assert text.lstrip().startswith(f"{name.upper()}({section})"), text[:200]
        opts = help_options(binary)
        assert len(opts) > 10
        missing = [o for o in opts if o not in text]
        assert not missing, f"{page} lacks {missing}"


def test_shell_completion_offers_what_each_command_takes():
    """bash and zsh complete the commands, and after one its options only (from the CLI's own
    table: `lockscope __complete CMD`), and the values of -w."""
    require_tool("bash")
    require_tool("zsh")
    env = dict(os.environ, PATH=os.path.dirname(LOCKSCOPE) + ":" + os.environ["PATH"])
    bash = os.path.join(ROOT, "deploy", "completion", "lockscope.bash")
    zsh = os.path.join(ROOT, "deploy", "completion", "_lockscope")

    def with_bash(*words):
        script = (f"source {bash}; COMP_WORDS=({' '.join(repr(w) for w in words)}); "
                  f"COMP_CWORD={len(words) - 1}; _lockscope; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                              check=True).stdout.split()

    def with_zsh(*words):
        # compadd prints what it would offer; the file runs as the completion function would
        script = (f"compadd() {{ shift $(( ${{@[(i)--]}} )); print -l -- \"$@\"; }}; _files() {{ :; }}; "
                  f"words=({' '.join(repr(w) for w in words)}); CURRENT={len(words)}; source {zsh}")
        return subprocess.run(["zsh", "-fc", script], capture_output=True, text=True, env=env,
                              check=True).stdout.split()

    for complete in (with_bash, with_zsh):
        assert "threads" in complete("lockscope", "")
        spin = complete("lockscope", "spin", "-p", "1", "")
        assert {"-p", "-w", "--max-stack", "--json"} <= set(spin) and "-t" not in spin, spin
        assert "--measure" in complete("lockscope", "threads", "")
        assert complete("lockscope", "top", "-w", "") == ["10s", "1m", "5m", "all"]


def test_doc_samples_are_what_the_cli_prints():
    """The output samples in README.md and docs/ are rendered from saved real responses by
    the CLI itself (docs/samples.py): a change to the CLI's output that was not rendered
    into the docs fails here."""
    p = subprocess.run([os.path.join(ROOT, "docs", "samples.py"), "--check"], capture_output=True, text=True,
                       env=dict(os.environ, OUTPUT=BUILD))
    assert p.returncode == 0, p.stderr
