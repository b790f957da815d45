#!/bin/sh
# The anchors of `make bench` that Debian does not ship ready to use, built once into
# $OUTPUT/bench and kept there (never committed):
#   perf   `perf lock contention -b` needs perf built with BUILD_BPF_SKEL=1; Debian's
#          linux-perf 6.1 is built without it. This builds tools/perf from Debian's own
#          linux-source-6.1 package, which works on newer kernels (its BPF program is CO-RE).
# bpftrace (Debian's 0.17) and perf's tracepoint mode (Debian's linux-perf) are packages.
set -eu
OUTPUT=${OUTPUT:-build}
B=$(realpath -m "$OUTPUT/bench")
PERF="$B/perf"
SRC_VER=6.1

need_pkgs() {
	missing=
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	echo "anchors: installing$missing" >&2
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
}

need_pkgs bpftrace linux-perf stress-ng

if [ -x "$PERF" ] && "$PERF" lock contention -h 2>&1 | grep -q -- "--use-bpf"; then
	exit 0
fi
need_pkgs linux-source-$SRC_VER libtraceevent-dev libelf-dev libdw-dev libcap-dev libzstd-dev \
	flex bison clang llvm bpftool pkg-config
mkdir -p "$B"
tarball=$(ls /usr/src/linux-source-$SRC_VER.tar.* | head -1)
tree="$B/linux-source-$SRC_VER"
if [ ! -d "$tree/tools/perf" ]; then
	echo "anchors: unpacking tools/perf from $tarball" >&2
	tar -C "$B" -xf "$tarball" "linux-source-$SRC_VER/tools" "linux-source-$SRC_VER/include" \
		"linux-source-$SRC_VER/arch/x86" "linux-source-$SRC_VER/lib" "linux-source-$SRC_VER/scripts" \
		"linux-source-$SRC_VER/Makefile" "linux-source-$SRC_VER/kernel"
fi
echo "anchors: building perf with BPF skeletons (a few minutes, once)" >&2
mkdir -p "$B/perf-build"
make -s -C "$tree/tools/perf" O="$B/perf-build" BUILD_BPF_SKEL=1 NO_LIBPYTHON=1 NO_LIBPERL=1 \
	NO_SLANG=1 NO_GTK2=1 NO_JVMTI=1 NO_LIBBABELTRACE=1 NO_LIBUNWIND=1 NO_LIBNUMA=1 \
	NO_LIBCRYPTO=1 NO_SDT=1 NO_DEMANGLE=1 WERROR=0 -j"$(nproc)" >"$B/perf-build.log" 2>&1 || {
	echo "anchors: the perf build failed; the log: $B/perf-build.log" >&2
	tail -20 "$B/perf-build.log" >&2
	exit 1
}
cp "$B/perf-build/perf" "$PERF"
"$PERF" lock contention -h 2>&1 | grep -q -- "--use-bpf" || {
	echo "anchors: the perf built has no 'lock contention -b'" >&2
	exit 1
}
echo "anchors: $PERF" >&2
