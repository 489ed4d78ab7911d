#!/usr/bin/env bash
# Fresh-machine check: runs `make demo` and `.ci/run` (= make test, CI=true) as
# root inside a minimal Debian bookworm chroot that starts with only gcc, make
# and cmake, so scripts/deps.sh has to install everything else.
#
# Usage (as root):  scripts/fresh-check.sh [repo-dir]
#   FRESH_BASE=/tmp/fresh   pristine chroot (debootstrap minbase + gcc make cmake);
#                           created on first use, reused afterwards
#   FRESH_REUSE=1           reuse the previous run's chroot (${FRESH_BASE}-run) with
#                           its already installed packages instead of a pristine copy
#   FRESH_MIRROR=url        Debian mirror (default http://deb.debian.org/debian)
#   FRESH_TARGETS="demo ci" what to run (demo: make demo, ci: .ci/run)
# The repo is copied as a fresh clone would see it: tracked and untracked,
# not ignored files (git ls-files), so uncommitted work is included and build
# trees are not.  Log: ${FRESH_BASE}-run.log
set -euo pipefail

repo=$(cd "${1:-.}" && pwd)
base=${FRESH_BASE:-/tmp/fresh}
run=${base}-run
log=${run}.log
mirror=${FRESH_MIRROR:-http://deb.debian.org/debian}
targets=${FRESH_TARGETS:-demo ci}

if [ "$(id -u)" -ne 0 ]; then
    echo "fresh-check: must run as root (debootstrap, chroot, mount)" >&2
    exit 1
fi

mounted=()
# shellcheck disable=SC2317  # invoked by trap
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[$i]}" 2>/dev/null || true
    done
}
trap cleanup EXIT

in_root() { # in_root DIR CMD...: run CMD in the chroot DIR with a clean env
    local dir=$1
    shift
    chroot "$dir" /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive "$@"
}

command -v rsync >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends rsync

# 1. The pristine base chroot.
if [ ! -e "$base/.jg-base-ready" ]; then
    if [ ! -x "$base/bin/bash" ]; then
        if ! command -v debootstrap >/dev/null; then
            DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap
        fi
        echo "fresh-check: debootstrap bookworm -> $base"
        debootstrap --variant=minbase bookworm "$base" "$mirror"
    fi
    cp /etc/resolv.conf "$base/etc/resolv.conf"
    in_root "$base" apt-get update
    in_root "$base" apt-get install -y --no-install-recommends gcc make cmake
    in_root "$base" apt-get clean
    touch "$base/.jg-base-ready"
fi

# 2. The run chroot: a pristine copy of the base (or the previous run's).
for m in proc sys dev/shm; do
    if mountpoint -q "$run/$m" 2>/dev/null; then umount -l "$run/$m"; fi
done
if [ "${FRESH_REUSE:-0}" != 1 ] || [ ! -x "$run/bin/bash" ]; then
    rm -rf --one-file-system "$run"
    cp -a "$base" "$run"
fi
cp /etc/resolv.conf "$run/etc/resolv.conf"

# 3. The repo, as a fresh clone (plus uncommitted work) would look.
dst=$run/src/jitgrad
rm -rf "$dst"
mkdir -p "$dst"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$repo" && git ls-files -z --cached --others --exclude-standard |
        rsync -a --from0 --files-from=- --ignore-missing-args ./ "$dst/")
else
    tar -C "$repo" --exclude='./build*' --exclude='.git' -cf - . | tar -xf - -C "$dst"
fi

mount -t proc proc "$run/proc" && mounted+=("$run/proc")
mount -t sysfs sysfs "$run/sys" && mounted+=("$run/sys")
mount -t tmpfs tmpfs "$run/dev/shm" && mounted+=("$run/dev/shm")

# 4. Run.
: >"$log"
status=0
for t in $targets; do
    case "$t" in
    demo) cmd='make demo' ;;
    ci) cmd='CI=true .ci/run' ;;
    *) cmd=$t ;;
    esac
    echo "fresh-check: [$t] $cmd" | tee -a "$log"
    start=$(date +%s)
    set +e
    in_root "$run" bash -c "cd /src/jitgrad && $cmd" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
    set -e
    echo "fresh-check: [$t] exit $rc after $(($(date +%s) - start)) s" | tee -a "$log"
    if [ "$rc" -ne 0 ]; then
        status=$rc
        break
    fi
done
echo "fresh-check: $([ "$status" -eq 0 ] && echo PASS || echo FAIL), log in $log"
exit "$status"
