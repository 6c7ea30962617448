#!/usr/bin/env bash
# Install Debian packages as one consistent set, in one apt transaction.
#
#   scripts/apt-install.sh PACKAGE...
#
# Used by scripts/test.sh (every package the tests use) and by
# tests/mdvm/build.sh (what the md VM guest needs). Run as root.
#
# Why a script: the machine image ships qemu-utils (qemu-img) from
# bookworm-backports, a version no configured apt source carries, and
# bookworm's qemu-system-x86 cannot be installed beside it: a plain
# `apt-get install qemu-system-x86` removes qemu-utils, and qemu-img with it.
# So whenever either is asked for, both are asked for at the version the
# sources offer for qemu-system-x86 (a downgrade of the image's qemu-utils
# where needed), which is a set apt can install together. On a machine that
# has them already this changes nothing.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 PACKAGE..." >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "apt-install.sh: must run as root to install: $*" >&2; exit 2; }
export DEBIAN_FRONTEND=noninteractive

# apt may be busy (another job on the machine): wait for its lock.
apt_get() {
    local out
    for _ in $(seq 1 60); do
        if out=$(apt-get "$@" 2>&1); then
            printf '%s\n' "$out" | grep -v '^\s*$' | tail -n 40 || true
            return 0
        fi
        if grep -q "Could not get lock\|Unable to acquire\|Unable to lock" <<<"$out"; then
            sleep 5
            continue
        fi
        printf '%s\n' "$out" >&2
        return 1
    done
    echo "apt-install.sh: apt stayed locked for 5 minutes" >&2
    return 1
}

apt_get update -qq

want=()
qemu=0
for p in "$@"; do
    case "$p" in
        qemu-system-x86 | qemu-utils) qemu=1 ;;
        *) want+=("$p") ;;
    esac
done
if [ "$qemu" = 1 ]; then
    qv=$(apt-cache policy qemu-system-x86 | awk '/Candidate:/{print $2}')
    if [ -z "$qv" ] || [ "$qv" = "(none)" ]; then
        echo "apt-install.sh: no apt source offers qemu-system-x86" >&2
        exit 1
    fi
    want+=("qemu-system-x86=$qv" "qemu-utils=$qv")
fi
echo "apt-install.sh: installing ${want[*]}"
apt_get install -y -qq --no-install-recommends --allow-downgrades --no-remove "${want[@]}"
