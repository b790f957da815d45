"""tests/layers.py, the check that the daemon's includes follow the data's path: it passes on
this tree, and fails on a copy with an include that points up a layer, a skeleton outside
collect/, a file in no layer, and an include cycle."""
import os
import shutil
import subprocess
import sys

from conftest import ROOT

LAYERS = os.path.join(ROOT, "tests", "layers.py")


def run(root):
    return subprocess.run([sys.executable, LAYERS, root], capture_output=True, text=True)


def copy_tree(tmp_path):
    for top in ("daemon", "cli", "bpf"):
        shutil.copytree(os.path.join(ROOT, top), tmp_path / top)
    return tmp_path


def add_include(path, inc):
    text = path.read_text()
    first = text.index("#include")
    path.write_text(text[:first] + f'#include "{inc}"\n' + text[first:])


def test_the_tree_follows_its_layers():
    r = run(ROOT)
    assert r.returncode == 0, r.stderr
    assert "no cycle" in r.stdout


def test_an_include_up_the_path_fails(tmp_path):
    root = copy_tree(tmp_path)
    add_include(root / "daemon" / "store" / "agg.c", "analyze/query.h")
    r = run(str(root))
    assert r.returncode == 1
    assert "daemon/store/agg.c: includes daemon/analyze/query.h: store may not depend on analyze" in r.stderr


def test_a_skeleton_outside_collect_and_a_stray_file_fail(tmp_path):
    root = copy_tree(tmp_path)
    add_include(root / "daemon" / "decode" / "dumps.c", "klock.skel.h")
    (root / "daemon" / "misc").mkdir()
    (root / "daemon" / "misc" / "x.c").write_text("int x;\n")
    r = run(str(root))
    assert r.returncode == 1
    assert "daemon/decode/dumps.c: includes the BPF skeleton klock.skel.h" in r.stderr
    assert "daemon/misc/x.c: in no layer" in r.stderr


def test_a_cycle_fails(tmp_path):
    root = copy_tree(tmp_path)
    # two headers of one layer that include each other: allowed by layer, refused as a cycle
    add_include(root / "daemon" / "store" / "agg.h", "store/stacks.h")
    add_include(root / "daemon" / "store" / "stacks.h", "store/agg.h")
    r = run(str(root))
    assert r.returncode == 1
    assert "include cycle: daemon/store/agg.h -> daemon/store/stacks.h -> daemon/store/agg.h" in r.stderr
