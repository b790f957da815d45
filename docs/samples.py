#!/usr/bin/env python3
"""The output samples in README.md and docs/: real responses, rendered by today's CLI.

A sample in a Markdown file is a fenced block right after a marker line

    <!-- sample NAME: COMMAND LINE -->

Its response, as the daemon gave it on a real run, is kept in docs/samples/NAME.json; the
block is `$ lockscope COMMAND LINE` and what `lockscope __render` prints for it, the very
code that prints it live. So a sample cannot go stale:

  docs/samples.py            re-render every block from its saved response (writes files)
  docs/samples.py --check    exit 1 if any block differs from its rendering (make test)
  sudo docs/samples.py --capture [--only NAME,NAME]
                             run the reproducers under a private lockscoped, save fresh
                             responses (of those samples only), then re-render (about 15 s)
"""
import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("OUTPUT", os.path.join(ROOT, "build"))
LOCKSCOPE = os.path.join(BUILD, "lockscope")
SAMPLES = os.path.join(ROOT, "docs", "samples")
DOCS = ["README.md"] + [os.path.join("docs", f) for f in sorted(os.listdir(os.path.join(ROOT, "docs")))
                        if f.endswith(".md")]
MARKER = re.compile(r"^<!-- sample ([a-z0-9-]+): (.+) -->$")
PIDOF = re.compile(r"\$\(pidof ([\w-]+)\)")
# how each reproducer a sample names runs for its capture (long enough for its samples),
# and for how long it is stopped (SIGSTOP) and continued before them: a burst after a stop
WORKLOADS = {
    "mutex_server": (["--workers", "8", "--seconds", "20"], 0),
    "mmap_storm": (["--seconds", "20"], 0),
    "pingpong": (["--rounds", "5000000"], 0),
    "uv_async_spin": (["--senders", "1", "--seconds", "20"], 0),
    "spin_locks": (["--lock", "pthread", "--threads", "3", "--seconds", "20"], 0),
    "tokio_tick": (["--seconds", "20"], 2.0),
    "file_writers": (["--seconds", "20"], 0),
    "busy_poll": (["--mode", "epoll", "--seconds", "20"], 0),
    "blocking_waits": (["--mode", "fsync", "--seconds", "20", "--dir", BUILD], 0),
}
# the daemon's settings for the captures: block-waits for blocking_waits' samples (the
# others' tables leave wait:* rows out by default)
DAEMON_ARGS = ["--block-waits", "1"]


def blocks(text):
    """(name, command line, start, end) of each sample: the fenced block after its marker."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            sys.exit(f"docs/samples.py: the sample {m.group(1)} has no fenced block after its marker")
        end = next(j for j in range(i + 2, len(lines)) if lines[j] == "```")
        yield m.group(1), m.group(2), i + 2, end


def render(name, cmdline):
    """`$ lockscope CMDLINE` and the CLI's rendering of the saved response."""
    with open(os.path.join(SAMPLES, name + ".json")) as f:
        resp = f.read()
    args = shlex.split(PIDOF.sub("1", cmdline))
    out = subprocess.run([LOCKSCOPE, "__render", *args], input=resp, capture_output=True, text=True, check=True)
    return [f"$ lockscope {cmdline}"] + out.stdout.rstrip("\n").split("\n")


def rerender(check):
    stale = []
    for doc in DOCS:
        path = os.path.join(ROOT, doc)
        with open(path) as f:
            text = f.read()
        lines = text.split("\n")
        for name, cmdline, start, end in reversed(list(blocks(text))):
            fresh = render(name, cmdline)
            if lines[start:end] != fresh:
                stale.append(f"{doc}: {name}")
                lines[start:end] = fresh
        if not check and "\n".join(lines) != text:
            with open(path, "w") as f:
                f.write("\n".join(lines))
    return stale


# ---- capture: the reproducers under a private daemon ----

def capture(only):
    """Fresh responses for every sample (or those in @only): each reproducer it names alone
    under the daemon."""
    names = {}
    for doc in DOCS:
        with open(os.path.join(ROOT, doc)) as f:
            for name, cmdline, _, _ in blocks(f.read()):
                if not only or name in only:
                    names[name] = cmdline
    if only and set(only) - set(names):
        sys.exit(f"docs/samples.py: no sample named {', '.join(sorted(set(only) - set(names)))}")
    with tempfile.TemporaryDirectory() as tmp:
        sock = os.path.join(tmp, "ls.sock")
        daemon = subprocess.Popen([os.path.join(BUILD, "lockscoped"), "--socket", sock, *DAEMON_ARGS], stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                if subprocess.run([LOCKSCOPE, "status", "--socket", sock], capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
            # each reproducer alone, its samples taken while it runs; the rest at the end
            by_workload = {}
            for name, cmdline in names.items():
                m = PIDOF.search(cmdline)
                by_workload.setdefault(m.group(1) if m else None, []).append(name)
            for w, samples in sorted(by_workload.items(), key=lambda kv: kv[0] is None):
                proc = subprocess.Popen([os.path.join(BUILD, "workloads", w), *WORKLOADS[w][0]],
                                        stdout=subprocess.DEVNULL) if w else None
                time.sleep(1.5 if w else 0)
                if w and WORKLOADS[w][1]:
                    os.kill(proc.pid, signal.SIGSTOP)
                    time.sleep(WORKLOADS[w][1])
                    os.kill(proc.pid, signal.SIGCONT)
                    time.sleep(1)
                for name in samples:
                    args = shlex.split(PIDOF.sub(str(proc.pid) if proc else "", names[name]))
                    quiet = ["--quiet"] if args[0] == "scan" else []
                    out = subprocess.run([LOCKSCOPE, *args, *quiet, "--json", "--socket", sock],
                                         capture_output=True, text=True, check=True).stdout
                    with open(os.path.join(SAMPLES, name + ".json"), "w") as f:
                        json.dump(json.loads(out), f, separators=(",", ":"))
                        f.write("\n")
                    print("captured", name)
                if proc:
                    proc.kill()
                    proc.wait()
        finally:
            daemon.terminate()
            daemon.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a sample differs from its rendering")
    ap.add_argument("--capture", action="store_true", help="run the reproducers and save fresh responses (root)")
    ap.add_argument("--only", metavar="NAME,NAME", help="--capture: only these samples")
    args = ap.parse_args()
    if args.only and not args.capture:
        ap.error("--only goes with --capture")
    if args.capture:
        capture(args.only.split(",") if args.only else None)
    stale = rerender(args.check)
    if args.check and stale:
        sys.exit("docs/samples.py: these samples are not what the CLI prints for their responses; run "
                 "docs/samples.py (or --capture) and commit:\n  " + "\n  ".join(stale))


if __name__ == "__main__":
    main()
