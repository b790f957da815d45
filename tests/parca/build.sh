#!/bin/sh
# Builds the Parca server pinned by go.mod here into OUT (make parca: build/parca/parca),
# for the end-to-end push test. Takes ~6 minutes on 2 cores the first time (the modules
# download and compile); the Go caches make a rebuild a link.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
die() {
	echo "tests/parca/build.sh: $*" >&2
	exit 1
}

[ $# -eq 1 ] || die "usage: $0 OUT"
case $1 in
/*) out=$1 ;;
*) out=$PWD/$1 ;;	# the build runs in this script's directory
esac
go=$(sh "$here/../../deps/toolchain.sh" go find) ||
	die "needs Go $(sh "$here/../../deps/toolchain.sh" go min)+: run 'sudo LOCKSCOPE_TEST_PARCA=1 deps/install.sh' (or set GO=/path/to/go)"

# parquet-go's hash reaches into the runtime (runtime.aeskeysched) by go:linkname, which
# Go 1.23's linker refuses unless told; the flag does not exist before 1.23
ldflags=
[ "$(sh "$here/../../deps/toolchain.sh" go code "$go")" -ge 1023 ] && ldflags=-checklinkname=0

mkdir -p "$(dirname "$out")"
echo "tests/parca/build.sh: building Parca $(sed -n 's/^require github.com\/parca-dev\/parca //p' "$here/go.mod") with $("$go" version)"
# GOTOOLCHAIN=local: this Go builds it, no other is fetched; -mod=readonly: go.sum has
# every hash, nothing is resolved anew
cd "$here"
GOTOOLCHAIN=local GOFLAGS=-mod=readonly "$go" build -trimpath -ldflags="$ldflags" -o "$out.tmp" \
	github.com/parca-dev/parca/cmd/parca
mv "$out.tmp" "$out"
