"""The kernel matrix: Debian's 6.1 kernels (generic, cloud, PREEMPT_RT) under qemu.

Each guest boots this build from an initramfs, runs the workloads and reports what
lockscoped saw (tests/kernels/matrix.sh). Checks the program variant chosen without the
bpf_task_from_pid kfunc (owner stacks off, owners still named) and the PREEMPT_RT layouts
of rwsem and mutex read through CO-RE.
"""
import json
import os
import subprocess

from conftest import KERNEL_MATRIX, KERNEL_MATRIX_TIMEOUT, ROOT, background_done, require_tool, skip_or_fail


def test_debian_61_kernels():
    require_tool("qemu-system-x86_64")
    if not os.path.exists("/bin/busybox"):
        skip_or_fail("busybox-static is not installed (make deps)")
    # booted while the other tests ran, or now when it was not started beside them
    ran = background_done("kernels", KERNEL_MATRIX_TIMEOUT, check=False)
    if ran is None:
        p = subprocess.run([os.path.join(ROOT, "tests/kernels/matrix.sh"), *KERNEL_MATRIX],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=KERNEL_MATRIX_TIMEOUT)
        ran = p.returncode, p.stdout
    rc, out = ran
    print(out)
    # matrix.sh prints one verdict a kernel, a JSON object on a line of its own
    verdicts = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(verdicts) == 3, out[-3000:]
    by_flavour = {v["kernel"].split("-", 2)[2]: v for v in verdicts}
    for v in verdicts:
        assert v["ok"], v
        # 6.1 has BTF tracepoints but no bpf_task_from_pid: the middle variant
        assert v["attach_mode"] == "tp_btf" and v["owner_stacks"] is False, v
        # the scheduler loads too, its switch program the one that reads registers by a helper
        assert v["sched"] and v["user_locks"] and v["switch_prog"] == ["sched_switch"], v
        assert not v["dropped"].get("ringbuf_full"), v
        # degraded mode: what 6.1 lacks is probed, named, and only it is off; --strict refuses
        assert v["missing"] == ["task_from_pid"], v
        assert {k for k, ok in v["check"].items() if ok == "missing"} == {"task_from_pid"}, v
        assert v["strict_rc"] == 1 and "task_from_pid missing: no bpf_task_from_pid kfunc (Linux 6.2+)" \
            in v["strict_log"], v
    assert by_flavour["amd64"]["mmap_lock_types"] == ["rwsem:R", "rwsem:W"]
    assert by_flavour["amd64"]["mutex_types"] == ["mutex"]
    # PREEMPT_RT: rwsem is an rwbase_rt and a mutex an rt_mutex, with their owners found
    assert by_flavour["rt-amd64"]["mmap_lock_types"] == ["rwlock-rt:R", "rwlock-rt:W"]
    assert "rt-mutex" in by_flavour["rt-amd64"]["mutex_types"]
    assert rc == 0
