"""The benchmark's own pieces, checked without timing anything (make bench measures; make
test never asserts a speed).

- the floor (bench/floor.bpf.c) builds, loads, and stands on exactly the hooks lockscoped
  attaches: a program added to lockscoped without its empty twin fails here
"""
import os
import subprocess
import sys

from conftest import BUILD, ROOT


def test_floor_stands_on_lockscopeds_hooks():
    subprocess.run(["make", "-s", f"OUTPUT={BUILD}", os.path.join(BUILD, "bench", "floor")], cwd=ROOT, check=True)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--check-floor"],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "OUTPUT": BUILD})
    print(r.stdout, r.stderr)
    assert r.returncode == 0 and "the floor's hooks are lockscoped's" in r.stdout
