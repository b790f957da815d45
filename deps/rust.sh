#!/bin/sh
# Which cargo builds lockscope's Rust parts (blazesym, inferno, the tokio reproducer).
#   rust.sh min    the oldest Rust that builds them (blazesym's rust-version)
#   rust.sh find   the path of the first cargo at least that new, or exit 1:
#                  $CARGO, cargo on PATH, ~/.cargo/bin/cargo (rustup), Ubuntu's versioned
#                  /usr/lib/rust-1.NN/bin/cargo, newest first
set -eu

RUST_MIN=1.88

# "cargo 1.96.0 (...)" -> 1096: comparable as an integer
version_code() {
	"$1" --version 2>/dev/null | sed -n 's/^cargo \([0-9]*\)\.\([0-9]*\).*/\1 \2/p' |
		{ read -r major minor && echo $((major * 1000 + minor)); }
}

new_enough() {
	code=$(version_code "$1") || return 1
	[ -n "$code" ] && [ "$code" -ge "$(echo "$RUST_MIN" | { IFS=. read -r a b && echo $((a * 1000 + b)); })" ]
}

case "${1:-}" in
min)
	echo "$RUST_MIN"
	;;
find)
	for c in ${CARGO:-} "$(command -v cargo || true)" "$HOME/.cargo/bin/cargo" \
		 $(ls -d /usr/lib/rust-1.*/bin/cargo 2>/dev/null | sort -rV); do
		if [ -n "$c" ] && [ -x "$c" ] && new_enough "$c"; then
			echo "$c"
			exit 0
		fi
	done
	exit 1
	;;
*)
	echo "usage: $0 min|find" >&2
	exit 2
	;;
esac
