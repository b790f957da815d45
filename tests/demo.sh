#!/bin/sh
# make demo: start lockscoped on a private socket, make kernel lock contention with the
# bundled mmap_storm workload, and show what `lockscope top` sees. Needs root.
set -eu
OUTPUT=${1:-build}
if [ "$(id -u)" -ne 0 ]; then
	echo "make demo loads BPF programs: run it as root (sudo make demo)" >&2
	exit 1
fi
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
dir=$(mktemp -d)
sock=$dir/lockscope.sock
"$OUTPUT/lockscoped" --socket "$sock" 2>"$dir/daemon.log" &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$dir"' EXIT
i=0
until "$OUTPUT/lockscope" status --socket "$sock" >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 $daemon 2>/dev/null; then
		cat "$dir/daemon.log" >&2
		exit 1
	fi
	sleep 0.1
done
echo "== lockscoped is up; running mmap_storm (2 writers, 2 readers) for 3 s"
"$OUTPUT/workloads/mmap_storm" --seconds 3 >/dev/null
sleep 0.5
echo
echo "== lockscope top -E 8            (per caller, last 10 s)"
"$OUTPUT/lockscope" top --socket "$sock" -E 8
echo
echo "== lockscope top -l -o -E 4      (per lock, with the owner waited for most)"
"$OUTPUT/lockscope" top --socket "$sock" -l -o -E 4
echo
echo "== lockscope top -t -E 6         (per thread)"
"$OUTPUT/lockscope" top --socket "$sock" -t -E 6
echo
echo "== lockscope status"
"$OUTPUT/lockscope" status --socket "$sock"
