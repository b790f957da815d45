#!/bin/sh
# Which compiler of a language lockscope's build and tests use: the first one new enough.
#   toolchain.sh rust min    the oldest Rust that builds our Rust parts (blazesym's rust-version)
#   toolchain.sh rust find   the first cargo at least that new: $CARGO, cargo on PATH,
#                            ~/.cargo/bin/cargo (rustup), Ubuntu's /usr/lib/rust-1.NN/bin/cargo
#   toolchain.sh go min      the oldest Go that builds the pinned Parca (tests/parca/go.mod)
#   toolchain.sh go find     the first go at least that new: $GO, go on PATH, Debian's and
#                            Ubuntu's /usr/lib/go-1.NN/bin/go
#   toolchain.sh LANG code T T's version as MAJOR * 1000 + MINOR (1.23 -> 1023)
# Versioned directories are tried newest first; `find` exits 1 when none is new enough.
set -eu

usage() {
	echo "usage: $0 rust|go min|find|code TOOL" >&2
	exit 2
}

case $#:${2:-} in
2:min | 2:find | 3:code) ;;
*) usage ;;
esac
case "$1" in
rust)
	MIN=1.88
	# "cargo 1.96.0 (...)"
	VERSION_ARGS=--version PATTERN='s/^cargo \([0-9]*\)\.\([0-9]*\).*/\1 \2/p'
	CANDIDATES="${CARGO:-} $(command -v cargo || true) $HOME/.cargo/bin/cargo
		    $(ls -d /usr/lib/rust-1.*/bin/cargo 2>/dev/null | sort -rV)"
	;;
go)
	MIN=1.21
	# "go version go1.22.12 linux/amd64"
	VERSION_ARGS=version PATTERN='s/^go version go\([0-9]*\)\.\([0-9]*\).*/\1 \2/p'
	CANDIDATES="${GO:-} $(command -v go || true) $(ls -d /usr/lib/go-1.*/bin/go 2>/dev/null | sort -rV)"
	;;
*)
	usage
	;;
esac

# "1.88" or a tool's version line -> 1088: comparable as an integer
code() {
	read -r major minor && echo $((major * 1000 + minor))
}

case "$2" in
min)
	echo "$MIN"
	;;
code)
	"$3" $VERSION_ARGS 2>/dev/null | sed -n "$PATTERN" | head -1 | code
	;;
find)
	min=$(echo "$MIN" | tr . ' ' | code)
	for t in $CANDIDATES; do
		[ -x "$t" ] || continue
		v=$("$t" $VERSION_ARGS 2>/dev/null | sed -n "$PATTERN" | head -1 | code 2>/dev/null) || continue
		if [ -n "$v" ] && [ "$v" -ge "$min" ]; then
			echo "$t"
			exit 0
		fi
	done
	exit 1
	;;
*)
	usage
	;;
esac
