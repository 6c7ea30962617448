#!/usr/bin/env bash
# The whole raidlab test suite, as CI runs it: installs what the tests need
# (Debian packages, when run as root), checks formatting and lints, then runs every
# test, including the Linux md compatibility matrix in a qemu VM and the HTML report
# rendered in headless Chromium.
#
# Longer runs sit behind a flag: RAIDLAB_SOAK=N runs the engine's seeded random
# workloads with N seeds per configuration instead of 1 (e.g. RAIDLAB_SOAK=50).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ]; then
    need=()
    command -v mdadm >/dev/null || need+=(mdadm)
    command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
    command -v cpio >/dev/null || need+=(cpio)
    # raidlab-report's tests/browser.rs renders the HTML report in headless Chromium.
    command -v chromium >/dev/null || need+=(chromium)
    # The benchmark tests render Bonnie++ CSV with bon_csv2html; the accuracy
    # script compares with fio.
    command -v bon_csv2html >/dev/null || need+=(bonnie++)
    command -v fio >/dev/null || need+=(fio)
    # NBD clients for crates/raidlab/tests/nbd_clients.rs.
    command -v nbdinfo >/dev/null || need+=(libnbd-bin)
    command -v qemu-img >/dev/null || need+=(qemu-utils)
    command -v nbdkit >/dev/null || need+=(nbdkit)
    command -v fusermount3 >/dev/null || need+=(fuse3)
    command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
    command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
    command -v bonnie++ >/dev/null || need+=(bonnie++)
    command -v openssl >/dev/null || need+=(openssl)
    if [ ${#need[@]} -gt 0 ]; then
        echo "test.sh: installing ${need[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
    fi
else
    echo "test.sh: not root: not installing packages; tests that need mdadm, qemu, chromium or NBD clients say so"
fi

cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The md VM matrix is one long test; run it alongside the rest.
RUST_BACKTRACE=1 cargo test --workspace 2>&1
