#!/bin/bash
# Kernel matrix: boot Debian's kernels under qemu (software emulation) with an initramfs
# holding this build, and check that lockscoped loads, picks the right program variant
# and names mmap_lock with owners on each, and that kernel mutexes (pipe->mutex, an
# rt-mutex on PREEMPT_RT) show with their owners. Usage: tests/kernels/matrix.sh [FLAVOUR...]
# (flavours: amd64 cloud-amd64 rt-amd64; default: cloud-amd64 rt-amd64). Needs root for
# apt-get download; prints one JSON line per kernel and exits non-zero on any failure.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUTPUT=${OUTPUT:-$ROOT/build}
WORK=${WORK:-$OUTPUT/kernels}
FLAVOURS=("${@:-cloud-amd64 rt-amd64}")
read -r -a FLAVOURS <<<"${FLAVOURS[*]}"
mkdir -p "$WORK"

# the newest Debian 6.1 ABI that has every flavour we want
abi=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-rt-amd64-unsigned$' |
      sed 's/^linux-image-\(6\.1\.0-[0-9]*\)-.*/\1/' | sort -V | tail -1)
[ -n "$abi" ] || { echo "no Debian 6.1 kernel packages found: run apt-get update" >&2; exit 1; }

build_initramfs() {
	local dir=$WORK/initramfs bin lib
	rm -rf "$dir" && mkdir -p "$dir"/{bin,sbin,proc,sys,dev,run,tmp,lib64,usr/lib}
	cp /bin/busybox "$dir/bin/busybox"
	for bin in sh mount mkdir sleep cat poweroff echo grep ls; do ln -s busybox "$dir/bin/$bin"; done
	for bin in "$OUTPUT/lockscoped" "$OUTPUT/lockscope" "$OUTPUT/workloads/mmap_storm" \
		   "$OUTPUT/workloads/pipe_storm"; do
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
/bin/lockscoped --socket /run/ls.sock 2>/tmp/daemon.log &
i=0
while ! /bin/lockscope status --socket /run/ls.sock >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 300 ] && break; sleep 0.2
done
/bin/mmap_storm --iterations 1500 >/dev/null
/bin/pipe_storm --threads 2 --messages 20000 >/dev/null
sleep 0.5
echo "LOCKSCOPE-STATUS $(/bin/lockscope status --socket /run/ls.sock --json | tr -d '\n\t')"
echo "LOCKSCOPE-TOP $(/bin/lockscope top --socket /run/ls.sock -l -o -w all --json | tr -d '\n\t')"
echo "LOCKSCOPE-MUTEX $(/bin/lockscope top --socket /run/ls.sock -l -o -w all -Y mutex,rt-mutex --json | tr -d '\n\t')"
echo "LOCKSCOPE-LOG $(cat /tmp/daemon.log | tr '\n' ' ')"
poweroff -f
INIT
	chmod +x "$dir/init"
	(cd "$dir" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$WORK/initramfs.gz"
}

check_kernel() {
	local flavour=$1
	local kdir=$WORK/$flavour
	mkdir -p "$kdir"
	if [ ! -f "$kdir/vmlinuz" ]; then
		(cd "$kdir" && apt-get download -q "linux-image-$abi-$flavour-unsigned" >/dev/null 2>&1 &&
		 dpkg-deb -x ./*.deb x && cp x/boot/vmlinuz-* vmlinuz && rm -rf x ./*.deb)
	fi
	timeout 600 qemu-system-x86_64 -m 1024 -smp 2 -nographic -no-reboot \
		-kernel "$kdir/vmlinuz" -initrd "$WORK/initramfs.gz" \
		-append "console=ttyS0 quiet panic=-1" >"$kdir/console.log" 2>&1 || true
	python3 "$ROOT/tests/kernels/verdict.py" "$abi-$flavour" "$kdir/console.log"
}

build_initramfs
rc=0
for f in "${FLAVOURS[@]}"; do
	check_kernel "$f" || rc=1
done
exit $rc
