#!/usr/bin/env bash
# Installs a built tree into a scratch prefix and compiles the header tutorial
# the way a user would: `cc prog.c $(pkg-config --cflags --libs jitgrad)`
# (shared) and with `pkg-config --static` against libjitgrad.a.
# Usage: scripts/install-check.sh [build-dir]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
prefix=$build/_install
tut=$build/tutorial/tutorial.c
work=$build/_install-check
cc=${CC:-cc}

[ -f "$tut" ] || { echo "install-check: $tut missing (build first)" >&2; exit 1; }
rm -rf "$prefix" "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/jitgrad.h lib/libjitgrad.a lib/libjitgrad.so lib/pkgconfig/jitgrad.pc; do
    [ -e "$prefix/$f" ] || { echo "install-check: $prefix/$f not installed" >&2; exit 1; }
done
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export JITGRAD_CACHE_DIR=$work/cache

# Shared: the .so carries its own dependencies.
# shellcheck disable=SC2046
"$cc" -o "$work/tutorial_shared" "$tut" $(pkg-config --cflags --libs jitgrad)
LD_LIBRARY_PATH=$prefix/lib "$work/tutorial_shared" >/dev/null

# Static: libjitgrad.a plus Libs.private / Requires.private.
libs=$(pkg-config --static --libs jitgrad | sed 's/-ljitgrad\b/-l:libjitgrad.a/')
# shellcheck disable=SC2046,SC2086
"$cc" -o "$work/tutorial_static" "$tut" $(pkg-config --cflags jitgrad) $libs
if readelf -d "$work/tutorial_static" | grep -q 'libjitgrad'; then
    echo "install-check: static link still needs libjitgrad.so" >&2
    exit 1
fi
"$work/tutorial_static" >/dev/null
echo "install-check: OK (shared and static links via pkg-config, prefix $prefix)"
