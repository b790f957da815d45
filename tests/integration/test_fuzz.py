"""The fuzz targets' seed corpora and every input that once crashed one, replayed.

`make fuzz` runs the libFuzzer targets (tests/fuzz); this replays what they start from and
what they found on the build under test (the sanitizer build under `make test SAN=1`),
through the same target code linked with a plain main (tests/fuzz/replay.c). The request
and record targets drive a real engine, BPF attached, so they need what the daemon needs.
"""
import os
import subprocess

import pytest

from conftest import BUILD, ROOT, require_bpf

FUZZ = os.path.join(ROOT, "tests", "fuzz")
TARGETS = sorted(f[len("fuzz_"):-2] for f in os.listdir(FUZZ) if f.startswith("fuzz_") and f.endswith(".c"))
NEEDS_BPF = {"request", "records"}


def test_every_target_has_seeds():
    assert TARGETS == ["config", "records", "render", "request", "unwind"]
    for t in TARGETS:
        assert len(os.listdir(os.path.join(FUZZ, "corpus", t))) >= 10, t


@pytest.mark.parametrize("target", TARGETS)
def test_corpus_and_regressions_replay_clean(target):
    if target in NEEDS_BPF:
        require_bpf()
    dirs = [d for d in (os.path.join(FUZZ, "corpus", target), os.path.join(FUZZ, "regress", target))
            if os.path.isdir(d)]
    files = sum(len(os.listdir(d)) for d in dirs)
    p = subprocess.run([os.path.join(BUILD, "tests", f"replay_{target}"), *dirs], capture_output=True,
                       text=True, timeout=600)
    print(p.stdout[-2000:], p.stderr[-4000:])
    assert p.returncode == 0
    assert p.stdout.splitlines()[-1] == f"replayed {files} inputs"
