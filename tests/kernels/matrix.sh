#!/bin/bash
# Kernel matrix: boot Debian's kernels under qemu (software emulation) with an initramfs
# holding this build, and check that lockscoped loads, picks the right program variant
# and names mmap_lock with owners on each, and that kernel mutexes (pipe->mutex, an
# rt-mutex on PREEMPT_RT) show with their owners, and that the scheduler's largest variant
# (block-waits) loads too. Usage: tests/kernels/matrix.sh [--fetch] [SERIES:FLAVOUR...]
# (flavours: amd64 cloud-amd64 rt-amd64; default: 6.1:cloud-amd64 6.1:rt-amd64). Needs
# root for apt-get download; prints one JSON line per kernel and exits non-zero on any
# failure. --fetch only downloads the kernels not here yet (the test suite does that in
# the background, the network's time, while other tests run).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUTPUT=${OUTPUT:-$ROOT/build}
WORK=${WORK:-$OUTPUT/kernels}
FETCH_ONLY=0
if [ "${1:-}" = --fetch ]; then
	FETCH_ONLY=1
	shift
fi
KERNELS=("${@:-6.1:cloud-amd64 6.1:rt-amd64}")
read -r -a KERNELS <<<"${KERNELS[*]}"
mkdir -p "$WORK"

# apt options for a series: bookworm's own lists for 6.1, backports for 6.12
apt_opts() {
	local bp=$WORK/apt-backports
	[ "$1" = 6.1 ] && return
	if [ ! -d "$bp/lists" ]; then
		mkdir -p "$bp/lists/partial" "$bp/cache/archives/partial"
		echo "deb http://deb.debian.org/debian bookworm-backports main" >"$bp/sources.list"
	fi
	echo "-o Dir::Etc::SourceList=$bp/sources.list -o Dir::Etc::SourceParts=/dev/null" \
	     "-o Dir::State::Lists=$bp/lists -o Dir::Cache=$bp/cache"
}

# the newest unsigned image package of a series and flavour (exact: amd64 is not cloud-amd64)
kernel_package() {
	local series=$1 flavour=$2 opts version
	case $series in
	6.1) version='6\.1\.0-[0-9]+' ;;
	6.12) version='6\.12\.[0-9]+\+deb12' ;;
	*) echo "unknown series $series (6.1 or 6.12)" >&2; return 1 ;;
	esac
	opts=$(apt_opts "$series")
	# shellcheck disable=SC2086
	if [ -n "$opts" ] && [ ! -f "$WORK/apt-backports/updated" ]; then
		apt-get $opts update -qq >/dev/null && touch "$WORK/apt-backports/updated"
	fi
	# shellcheck disable=SC2086
	apt-cache $opts search --names-only "^linux-image-$version-$flavour-unsigned\$" |
		cut -d' ' -f1 | sort -V | tail -1
}

build_initramfs() {
	local dir=$WORK/initramfs bin lib
	rm -rf "$dir" && mkdir -p "$dir"/{bin,sbin,proc,sys,dev,run,tmp,lib64,usr/lib}
	cp /bin/busybox "$dir/bin/busybox"
	for bin in sh mount mkdir sleep cat poweroff echo grep ls tr kill; do
		ln -s busybox "$dir/bin/$bin"
	done
	for bin in "$OUTPUT/lockscoped" "$OUTPUT/lockscope" "$OUTPUT/workloads/mmap_storm" \
		   "$OUTPUT/workloads/pipe_storm" "$OUTPUT/workloads/mutex_server"; do
		cp "$bin" "$dir/bin/"
		for lib in $(ldd "$bin" | grep -o '/[^ ]*\.so[^ ]*'); do
			mkdir -p "$dir$(dirname "$lib")"
			cp -L "$lib" "$dir$lib"
		done
	done
	cat >"$dir/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tracefs nodev /sys/kernel/tracing
# A step that has not finished in STEP_S seconds prints what every task is doing (its
# state, where it sleeps, its kernel stack), then every CPU's and every blocked task's
# backtrace, and ends the boot: a hang names itself rather than running out the host's
# timeout in silence. If even this does not print, the guest's kernel itself is stuck.
STEP_S=240
watch_step() {
	(sleep $STEP_S
	 echo "LOCKSCOPE-HANG $1"
	 for t in /proc/[0-9]*/task/[0-9]*; do
		echo "task $t $(cat $t/comm) $(grep State: $t/status | tr -s '\t ' ' ') wchan=$(cat $t/wchan)"
		cat $t/stack
	 done
	 echo 8 >/proc/sys/kernel/printk
	 echo l >/proc/sysrq-trigger
	 echo w >/proc/sysrq-trigger
	 poweroff -f) &
	WATCHDOG=$!
}
step_done() { kill $WATCHDOG; }
# no client call waits on a stuck daemon for long: it says so and exits
export LOCKSCOPE_TIMEOUT=20
status() { /bin/lockscope status --socket "$@"; }
# until the daemon on socket $1 answers (60 s at most: the verifier is slow under emulation)
wait_ready() {
	i=0
	while ! status "$1" >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -gt 300 ] && break; sleep 0.2
	done
}
watch_step check
echo "LOCKSCOPE-CHECK $(/bin/lockscoped --check | tr '\n' '|')"
/bin/lockscoped --strict --socket /run/strict.sock 2>/tmp/strict.log
echo "LOCKSCOPE-STRICT $? $(tr '\n' '|' </tmp/strict.log)"
step_done
watch_step block-waits
# block-waits: the largest variant of sched_switch (126 k instructions verified on 6.18)
/bin/lockscoped --block-waits 1 --socket /run/bw.sock 2>/tmp/bw.log &
BW=$!
wait_ready /run/bw.sock
echo "LOCKSCOPE-BLOCKWAITS $(status /run/bw.sock --json | tr -d '\n\t')"
kill $BW; wait $BW
echo "LOCKSCOPE-BWLOG $(tr '\n' '|' </tmp/bw.log)"
step_done
watch_step default
# emulated CPUs drain slowly: a larger ring than the default keeps every record
/bin/lockscoped --socket /run/ls.sock --ringbuf-kb=2048 2>/tmp/daemon.log &
LS=$!
wait_ready /run/ls.sock
/bin/mmap_storm --iterations 1500 >/dev/null
/bin/pipe_storm --threads 2 --messages 20000 >/dev/null
sleep 0.5
echo "LOCKSCOPE-STATUS $(status /run/ls.sock --json | tr -d '\n\t')"
echo "LOCKSCOPE-TOP $(/bin/lockscope top --socket /run/ls.sock -l -o -w all --json | tr -d '\n\t')"
echo "LOCKSCOPE-MUTEX $(/bin/lockscope top --socket /run/ls.sock -l -o -w all -Y mutex,rt-mutex --json | tr -d '\n\t')"
echo "LOCKSCOPE-LOG $(cat /tmp/daemon.log | tr '\n' ' ')"
kill $LS; wait $LS
step_done
watch_step futex
# futex waits, found by their sleep's TASK_FREEZABLE (6.1+) before the syscall is read:
# counted exactly. Frame-pointer stacks (no dumps): an emulated daemon drains the ring slowly
/bin/lockscoped --socket /run/fx.sock --user-stack-bytes 0 2>/tmp/fx.log &
FX=$!
wait_ready /run/fx.sock
/bin/mutex_server --workers 4 --until 1000 >/tmp/ms.json
sleep 0.5
echo "LOCKSCOPE-FUTEX $(tr -d '\n' </tmp/ms.json) $(/bin/lockscope top --socket /run/fx.sock -l -w all --kind user -Y futex:mutex --json | tr -d '\n\t')"
kill $FX; wait $FX
step_done
poweroff -f
INIT
	chmod +x "$dir/init"
	(cd "$dir" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$WORK/initramfs.gz"
}

# the kernel of SERIES:FLAVOUR in its directory, downloaded once (a failure leaves no vmlinuz)
fetch_kernel() {
	local series=${1%%:*} flavour=${1#*:}
	local kdir=$WORK/$series-$flavour pkg opts
	mkdir -p "$kdir"
	[ -f "$kdir/vmlinuz" ] && return
	pkg=$(kernel_package "$series" "$flavour")
	[ -n "$pkg" ] || { echo "matrix.sh: $1: no package in the apt lists" >&2; return 1; }
	opts=$(apt_opts "$series")
	# shellcheck disable=SC2086
	(cd "$kdir" && rm -rf x ./*.deb vmlinuz.tmp && apt-get $opts download -q "$pkg" >/dev/null 2>&1 &&
	 dpkg-deb -x ./*.deb x && cp x/boot/vmlinuz-* vmlinuz.tmp && rm -rf x ./*.deb &&
	 echo "${pkg#linux-image-}" | sed 's/-unsigned$//' >release && mv vmlinuz.tmp vmlinuz) ||
		{ echo "matrix.sh: $1: downloading $pkg failed" >&2; return 1; }
}

check_kernel() {
	local series=${1%%:*} flavour=${1#*:}
	local kdir=$WORK/$series-$flavour

	fetch_kernel "$1" || { echo "{\"kernel\": \"$1\", \"ok\": false, \"error\": \"no kernel\"}"; return 1; }
	timeout 600 qemu-system-x86_64 -m 1024 -smp 2 -nographic -no-reboot \
		-kernel "$kdir/vmlinuz" -initrd "$WORK/initramfs.gz" \
		-append "console=ttyS0 quiet panic=-1" >"$kdir/console.log" 2>&1 || true
	python3 "$ROOT/tests/kernels/verdict.py" "$(cat "$kdir/release" 2>/dev/null || echo "$1")" \
		"$kdir/console.log"
}

rc=0
if [ $FETCH_ONLY = 1 ]; then
	for k in "${KERNELS[@]}"; do
		fetch_kernel "$k" || rc=1
	done
	exit $rc
fi
build_initramfs
for k in "${KERNELS[@]}"; do
	check_kernel "$k" || rc=1
done
exit $rc
