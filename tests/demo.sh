#!/bin/sh
# make demo: start lockscoped on a private socket, run three bundled reproducers, and show
# what lockscope sees in them. Needs root; about 15 s.
#   mutex_server  seed 004: eight workers on one mutex whose holder formats a log line
#   mmap_storm    kernel lock contention: mmap/munmap against madvise/mincore on mmap_lock
#   uv_async_spin seed 000: libuv's loop thread yielding while its sender is preempted
set -eu
OUTPUT=${1:-build}
LS="$OUTPUT/lockscope"
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
until "$LS" status --socket "$sock" >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 $daemon 2>/dev/null; then
		cat "$dir/daemon.log" >&2
		exit 1
	fi
	sleep 0.1
done
echo "== lockscoped is up. uv_async_spin for 3 s (libuv 1.44's yield spin, seed 000), then 4 s of"
echo "   mutex_server (seed 004: 8 workers, one mutex, a log line formatted under it) beside"
echo "   mmap_storm (2 writers, 2 readers on one mmap_lock)"
"$OUTPUT/workloads/uv_async_spin" --senders 1 --seconds 3 >/dev/null &
spin=$!
wait $spin
"$OUTPUT/workloads/mutex_server" --workers 8 --seconds 4 >/dev/null &
server=$!
"$OUTPUT/workloads/mmap_storm" --seconds 4 >/dev/null &
storm=$!
wait $server $storm
sleep 1.5	# the wait tables' next drain
echo
echo "== lockscope top -E 8 -w 1m      (kernel and user locks, per caller)"
"$LS" top --socket "$sock" -E 8 -w 1m
echo
echo "== lockscope top --kind user -l --holders -E 1 -w 1m   (what the holder did while others waited)"
"$LS" top --socket "$sock" --kind user -l --holders -E 1 -w 1m --max-stack 6
echo
echo "== lockscope spin -p $spin -w 1m   (CPU burnt while nothing useful ran; uv_async_spin has exited)"
"$LS" spin --socket "$sock" -p $spin -w 1m --max-stack 8
echo
echo "== lockscope report -w 1m        (the diagnosis: finding, evidence, fix)"
"$LS" report --socket "$sock" -w 1m
echo
echo "== lockscope status"
"$LS" status --socket "$sock"
