#!/bin/bash
# Rewrites the fuzzers' seed corpora (tests/fuzz/corpus/) from real traffic:
#   records  what the rings and wait tables held while the workloads below ran
#   unwind   dumps of the fuzzer's own stack, taken as the BPF side takes them
#   request  the request lines the CLI sends for each command and option set below
#   render   the daemon's responses to them, with the workloads running
#   config   the shipped lockscoped.conf, and each setting alone
# seeds.sh FUZZ_OUTPUT BUILD (`make fuzz-seeds`, as root, after `make`).
set -euo pipefail
fout=$1 build=$2
corpus=tests/fuzz/corpus
tmp=$(mktemp -d)
pids=()
cleanup() {
	kill "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
[ -x "$build/lockscoped" ] || { echo "seeds.sh: no $build/lockscoped: run make first" >&2; exit 1; }

workloads() {	# the reproducers that make every record type: locks, spins, stops, waits
	local w=$build/workloads s=$1
	"$w/mutex_server" --seconds "$s" >/dev/null &
	"$w/spin_locks" --lock ttas --seconds "$s" >/dev/null 2>&1 &
	"$w/wake_storm" --seconds "$s" >/dev/null &
	"$w/pipe_storm" --seconds "$s" >/dev/null &
	"$w/busy_poll" --mode epoll --timeout-ms 0 --seconds "$s" >/dev/null &
	"$w/prio_inversion" --seconds "$s" >/dev/null &
	"$w/uv_async_spin" --senders 1 --seconds "$s" >/dev/null &
	"$w/tokio_tick" --seconds "$s" >/dev/null 2>&1 &
	# a stop and what runs after it (the resume records)
	sleep 1 && kill -STOP $! && sleep 1 && kill -CONT $!
	wait
}

for t in records unwind request render config; do
	rm -rf "${corpus:?}/$t"
	mkdir -p "$corpus/$t"
done

echo "  SEEDS    unwind"
LOCKSCOPE_FUZZ_SEEDS=$corpus/unwind "$fout/fuzz/fuzz_unwind" 2>&1 | tail -1

echo "  SEEDS    records"
LOCKSCOPE_FUZZ_SEEDS=$corpus/records LOCKSCOPE_FUZZ_SECONDS=8 "$fout/fuzz/fuzz_records" 2>&1 | tail -1 &
rec=$!
sleep 2	# the engine loads and attaches first
(workloads 4)
wait $rec

echo "  SEEDS    request, render"
"$build/lockscoped" -s "$tmp/sock" >"$tmp/daemon.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$tmp/sock" ] && break; sleep 0.1; done
workloads 3 &
pids+=($!)
sleep 2
# each command line: the table its response renders as (fuzz_render's first byte)
commands=(
	"0 top" "0 top -t --stacks -o --holders -E 20 -w all" "0 top -l --stacks -o -w 1m" "0 top --kind user -Y futex:mutex -k contended"
	"0 top -l -Y rwsem,mutex --max-stack 4" "0 scan -p $$ -d 1s" "0 scan -p $$ -d 1s --precise -t"
	"1 status" "2 threads" "2 threads -w 1m -E 5" "3 spin" "3 spin -w all --max-stack 12"
	"4 report" "4 report -p $$ -w 5m" "0 export -F json -w all" "0 export -F prometheus"
	"0 export -F folded --profile mutex"
)
n=0
for c in "${commands[@]}"; do
	table=${c%% *} args=${c#* }
	# what the CLI sends, taken from a socket that answers nothing useful
	/usr/bin/python3 - "$tmp/fake.sock" >"$tmp/req" <<-'PY' &
	import socket, sys
	s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1); s.settimeout(30)
	c, _ = s.accept(); line = c.makefile("rb").readline()
	sys.stdout.buffer.write(line.rstrip(b"\n"))
	c.sendall(b'{"schema_version":1,"error":"seed capture"}\n')
	PY
	for _ in $(seq 50); do [ -S "$tmp/fake.sock" ] && break; sleep 0.1; done
	# shellcheck disable=SC2086
	"$build/lockscope" -S "$tmp/fake.sock" $args >/dev/null 2>&1 || true
	wait $!
	rm -f "$tmp/fake.sock"
	[ -s "$tmp/req" ] || { echo "seeds.sh: lockscope $args sent no request" >&2; exit 1; }
	# peers alternate between root and a member without capabilities (fuzz_request.c)
	{ printf "\\x0$((1 + n % 2))"; cat "$tmp/req"; } >"$corpus/request/request-$(printf %04d $n)"
	# shellcheck disable=SC2086
	{ printf "\\x$(printf %02x $((table | 0xf8)))"; "$build/lockscope" -S "$tmp/sock" $args --json; } \
		>"$corpus/render/render-$(printf %04d $n)" 2>/dev/null || true
	n=$((n + 1))
done

echo "  SEEDS    config"
cp deploy/lockscoped.conf "$corpus/config/lockscoped.conf"
"$build/lockscoped" --dump-config | sed -n 's/^\([a-z][a-z0-9-]*\) *= *\(.*\)$/\1 = \2/p' |
	while IFS= read -r line; do
		echo "$line" >"$corpus/config/${line%% *}"
	done
for t in records unwind request render config; do
	printf '  %-8s %s: %d seeds\n' "" "$t" "$(ls "$corpus/$t" | wc -l)"
done
