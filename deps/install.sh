#!/bin/sh
# Installs everything lockscope's build, demo and tests need, on a machine that has nothing
# but this checkout: Debian 12, Ubuntu 22.04 or 24.04, as root. `make deps` runs it too.
#
# A script rather than a make target alone: minimal and cloud images ship neither make nor
# a compiler, so the first command on a fresh machine must need only sh and apt.
#
# Rust: blazesym (symbolization) needs Rust 1.88 or newer. A cargo that new on PATH (rustup's
# ~/.cargo/bin included) is used as it is; otherwise Debian 12 gets cargo-web/rustc-web from
# bookworm-security, and Ubuntu the newest versioned cargo-1.NN its archive has. deps/toolchain.sh
# finds the same cargo again for the Makefile.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
RUST_MIN=$(sh "$here/toolchain.sh" rust min)

die() {
	echo "deps/install.sh: $*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "installs packages: run it as root (sudo $0)"
command -v apt-get >/dev/null || die "needs apt-get (Debian 12, Ubuntu 22.04/24.04); see the README's Dependencies for the package list"
[ -r /etc/os-release ] || die "no /etc/os-release: cannot tell the distribution"
# shellcheck disable=SC1091
. /etc/os-release

export DEBIAN_FRONTEND=noninteractive
apt_install() {
	apt-get install -y -qq --no-install-recommends "$@"
}

# What every supported distribution calls the same:
#   build       make gcc clang llvm libbpf-dev libelf-dev libdw-dev zlib1g-dev pkg-config
#               libcjson-dev libprotobuf-c-dev protobuf-c-compiler libdebuginfod-dev
#               libcurl4-openssl-dev (the profile push to Parca and Pyroscope)
#               libuv1-dev (the libuv reproducers) git ca-certificates help2man (man pages)
#   symbols     libc6-dbg: glibc's internal names (__lll_lock_wait, start_thread) that the
#               lock slow path and every thread's root frame have; without it they are
#               unnamed (or fetch them with DEBUGINFOD_URLS, see the README)
#   tests       libcmocka-dev python3 python3-pytest python3-jsonschema
#               python3-pydot (parses the DOT graph export) python3-prometheus-client prometheus (promtool) curl binutils (readelf)
#               util-linux (setpriv) passwd (useradd) procps systemd (systemd-analyze)
#               debuginfod (a local server for the debuginfod test) iproute2 (its netns)
#               qemu-system-x86 busybox-static cpio (the kernel matrix) man-db (man -l)
#               zsh (the zsh completion) bpftrace (times kernel-lock waits beside the
#               daemon) postgresql (the real-server test: a private cluster under
#               pgbench; no main cluster is created, none is started)
#   fuzzing     libclang-rt-NN-dev (libFuzzer, where it is not in clang's own packages)
COMMON="make gcc clang llvm libbpf-dev libelf-dev libdw-dev zlib1g-dev pkg-config
	libcjson-dev libprotobuf-c-dev protobuf-c-compiler libdebuginfod-dev libcurl4-openssl-dev libuv1-dev git
	ca-certificates libc6-dbg libcmocka-dev python3 python3-pytest python3-jsonschema python3-pydot
	python3-prometheus-client prometheus curl binutils util-linux passwd procps systemd
	debuginfod iproute2 qemu-system-x86 busybox-static cpio help2man man-db zsh bpftrace"

# bpftool and perf: their own packages on Debian and on Ubuntu 24.04; Ubuntu 22.04 has them
# only in linux-tools, per kernel
case "${ID:-}:${VERSION_ID:-}" in
debian:*)
	TOOLS="bpftool linux-perf"
	;;
ubuntu:22.04)
	TOOLS="linux-tools-common linux-tools-generic linux-tools-$(uname -r)"
	;;
ubuntu:*)
	TOOLS="bpftool linux-tools-common linux-tools-generic linux-tools-$(uname -r)"
	;;
*)
	die "${PRETTY_NAME:-this distribution} is not one this script knows (Debian 12, Ubuntu 22.04/24.04): install the packages it lists by hand"
	;;
esac

apt-get update -qq
# shellcheck disable=SC2086
apt_install $COMMON $TOOLS

# postgresql: the server's package creates a "main" cluster on its first install unless
# postgresql-common's createcluster.conf says not to (a machine that has one keeps it);
# the test runs a private cluster of its own
apt_install postgresql-common
if ! ls /etc/postgresql/*/*/postgresql.conf >/dev/null 2>&1; then
	sed -i 's/^#*[[:space:]]*create_main_cluster[[:space:]]*=.*/create_main_cluster = off/' \
		/etc/postgresql-common/createcluster.conf
fi
apt_install postgresql

# `make fuzz`: libFuzzer is in the clang runtime, its own package (libclang-rt-NN-dev)
# since LLVM 15's packaging and Debian 12's clang 14, inside libclang-common-NN-dev before
clang_major=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
if apt-cache show "libclang-rt-$clang_major-dev" >/dev/null 2>&1; then
	apt_install "libclang-rt-$clang_major-dev"
fi

# The Kubernetes manifest test decodes into k8s.io/api with Go, and the pprof test runs
# `go tool pprof`: any Go will do, the distribution's is the fallback.
command -v go >/dev/null || apt_install golang-go

# The Parca end-to-end test (LOCKSCOPE_TEST_PARCA=1; on by default under CI=true, as
# `make test` decides) builds Parca with a Go 1.21 or newer: Debian 12's own is 1.19, its
# backports suite has golang-1.22 (a versioned package beside the default go, not replacing
# it); Ubuntu has versioned golang-1.NN.
test_parca=${LOCKSCOPE_TEST_PARCA:-$([ "${CI:-}" = true ] && echo 1 || echo 0)}
if [ "$test_parca" = 1 ] && ! sh "$here/toolchain.sh" go find >/dev/null; then
	case "$ID" in
	debian)
		if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
			mirror=$(sed -n 's/^deb \(http[^ ]*\) bookworm main.*/\1/p' /etc/apt/sources.list 2>/dev/null | head -1)
			echo "deb ${mirror:-http://deb.debian.org/debian} bookworm-backports main" \
				>/etc/apt/sources.list.d/bookworm-backports.list
			apt-get update -qq
		fi
		apt_install golang-1.22-go
		;;
	ubuntu)
		pkg=$(apt-cache search --names-only '^golang-1\.[0-9]+-go$' | cut -d' ' -f1 | sort -V | tail -1)
		[ -n "$pkg" ] && apt_install "$pkg"
		;;
	esac
	sh "$here/toolchain.sh" go find >/dev/null ||
		die "no Go $(sh "$here/toolchain.sh" go min)+ for the Parca test: install one (GO=/path/to/go) or leave LOCKSCOPE_TEST_PARCA unset"
fi

# A Rust new enough for the lock files and blazesym.
if ! sh "$here/toolchain.sh" rust find >/dev/null; then
	case "$ID" in
	debian)
		# cargo-web replaces the distribution's cargo 0.66; its 1.88+ builds are in
		# bookworm-security, which every installed Debian 12 has in its sources
		apt_install cargo-web rustc-web
		;;
	ubuntu)
		pkg=$(apt-cache search --names-only '^cargo-1\.[0-9]+$' | cut -d' ' -f1 | sort -V | tail -1)
		[ -n "$pkg" ] || die "no versioned cargo-1.NN package: install Rust $RUST_MIN+ with rustup (https://rustup.rs)"
		apt_install "$pkg" "rustc-${pkg#cargo-}"
		;;
	esac
	sh "$here/toolchain.sh" rust find >/dev/null ||
		die "the distribution's newest Rust is older than $RUST_MIN: install a newer one with rustup (https://rustup.rs), or enable ${VERSION_CODENAME:-its}-security"
fi
echo "deps/install.sh: done; cargo is $(sh "$here/toolchain.sh" rust find)"
