#!/usr/bin/env bash
# Checks (and, as root, installs) the Debian packages jitgrad needs.
#   scripts/deps.sh build   compiler, cmake, OpenBLAS, cmocka  (make, make demo)
#   scripts/deps.sh test    build set + clang-format + Python bits (make test)
# As root, missing packages are installed with apt-get; otherwise the exact
# install command is printed and the script exits 1.
# python3-torch (the reference oracle for some tests, large) is optional: as
# root it is installed with the test set unless JITGRAD_NO_TORCH=1; as a normal
# user its absence is only reported.
set -euo pipefail

set_name=${1:-build}
build_pkgs=(gcc libc6-dev make cmake pkg-config libopenblas-dev libcmocka-dev)
test_pkgs=(clang-format valgrind python3-dev python3-numpy python3-pytest python3-venv python3-pip python3-setuptools python3-wheel
    libopenmpi-dev openmpi-bin) # (MPI: the data-parallel tests, docs/distributed.md)
optional_pkgs=(python3-torch)

case "$set_name" in
build) want=("${build_pkgs[@]}") ;;
test) want=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
*)
    echo "usage: $0 build|test" >&2
    exit 2
    ;;
esac

installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

missing=()
for p in "${want[@]}"; do
    installed "$p" || missing+=("$p")
done

optional_missing=()
if [ "$set_name" = test ]; then
    for p in "${optional_pkgs[@]}"; do
        installed "$p" || optional_missing+=("$p")
    done
fi

is_root=0
[ "$(id -u)" -eq 0 ] && is_root=1

to_install=("${missing[@]+"${missing[@]}"}")
if [ ${#optional_missing[@]} -gt 0 ]; then
    if [ $is_root -eq 1 ] && [ "${JITGRAD_NO_TORCH:-0}" != 1 ]; then
        to_install+=("${optional_missing[@]}")
    else
        echo "deps: optional ${optional_missing[*]} not installed; tests that compare" \
            "against PyTorch will be skipped (sudo apt-get install -y ${optional_missing[*]})" >&2
    fi
fi

if [ ${#to_install[@]} -eq 0 ]; then
    exit 0
fi

if [ $is_root -eq 1 ]; then
    echo "deps: installing ${to_install[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${to_install[@]}"
    exit 0
fi

if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: missing Debian packages for '$set_name': ${missing[*]}" >&2
    echo "deps: install them with:" >&2
    echo "sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi
