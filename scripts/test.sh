#!/usr/bin/env bash
# The whole raidlab test suite, as CI runs it: installs what the tests need
# (Debian packages, when run as root), checks formatting and lints, then runs every
# test, including the Linux md compatibility matrix in a qemu VM and the HTML report
# rendered in headless Chromium.
#
# Longer runs sit behind a flag: RAIDLAB_SOAK=N runs the engine's seeded random
# workloads with N seeds per configuration instead of 1 (e.g. RAIDLAB_SOAK=50), and
# the torture sweep (raidlab-sim tests/torture.rs) N times as many runs (its default is
# about 4 CPU minutes, RAIDLAB_SOAK=15 about an hour; docs/reliability.md).
# RAIDLAB_MDVM_FULL=1 boots the md VM with every row of tests/mdvm/matrix.txt, not only
# those of tests/mdvm/default.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every Debian package the tests use (README, "What the test command installs"),
# asked for in one apt transaction whether or not its commands are present, so
# that apt sees the whole set at once (scripts/apt-install.sh).
packages=(
    mdadm qemu-system-x86 qemu-utils cpio busybox-static kmod xz-utils zstd util-linux
    chromium bonnie++ fio libnbd-bin nbdkit fuse3 xfsprogs e2fsprogs openssl fdisk msmtp
    prometheus
)
# The commands the tests run: checked right after the install, so a missing
# tool fails the run in its first minute, not when a test reaches it.
commands=(
    mdadm qemu-system-x86_64 qemu-img cpio busybox losetup dpkg-deb
    chromium bonnie++ bon_csv2html fio nbdinfo nbdcopy nbdfuse nbdkit
    fusermount3 mkfs.xfs xfs_repair mkfs.ext4 e2fsck openssl sfdisk msmtp
    prometheus promtool
)
if [ "$(id -u)" = 0 ]; then
    echo "test.sh: installing ${packages[*]}"
    ./scripts/apt-install.sh "${packages[@]}"
else
    echo "test.sh: not root: not installing packages"
fi
missing=()
for c in "${commands[@]}"; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
if [ ${#missing[@]} -gt 0 ]; then
    echo "test.sh: the tests need these commands, which are missing: ${missing[*]}" >&2
    if [ "$(id -u)" = 0 ] || [ "${CI:-}" = true ]; then
        echo "test.sh: the install above should have provided them; its output says why not (packages: ${packages[*]})" >&2
        exit 1
    fi
    echo "test.sh: run this script as root to install them (packages: ${packages[*]}); the tests that need them will fail" >&2
fi

echo "test.sh: install and checks took ${SECONDS} s"
phase=$SECONDS
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The docs' intra-doc links resolve (a renamed or made-private item breaks
# them silently otherwise); about 1 min from a clean target.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --quiet
echo "test.sh: fmt, clippy and doc took $((SECONDS - phase)) s"
phase=$SECONDS
# --no-fail-fast: one failing test binary must not hide whether the others pass;
# the exit status is still non-zero when anything failed.
status=0
# Every test binary is built first, so that the two runs below build nothing.
RUST_BACKTRACE=1 cargo test --workspace --no-run 2>&1 || status=$?
# The md VM test (crates/raidlab/tests/md_compat.rs) boots one TCG guest at a
# time for about ten minutes, and the guest leaves much of the second core
# idle; cargo runs test binaries one after another, so it runs here beside
# the others instead (its tests skipped in cargo's run by their exact names),
# its output printed after theirs and its exit status counted the same way.
md_bin=$(cargo test -p raidlab --test md_compat --no-run 2>&1 |
    sed -n 's/.*Executable tests\/md_compat\.rs (\(.*\))$/\1/p' || true)
skips=()
if [ "$status" = 0 ] && [ -n "$md_bin" ] && [ -x "$md_bin" ]; then
    md_bin="$PWD/$md_bin"
    while IFS= read -r t; do
        skips+=(--skip "${t%: test}")
    done < <("$md_bin" --list --format terse 2>/dev/null | grep ': test$' || true)
fi
if [ ${#skips[@]} -gt 0 ]; then
    md_log=$(mktemp)
    (cd crates/raidlab && RUST_BACKTRACE=1 exec "$md_bin") >"$md_log" 2>&1 &
    md_pid=$!
    RUST_BACKTRACE=1 cargo test --workspace --no-fail-fast -- --exact "${skips[@]}" 2>&1 || status=$?
    md_status=0
    wait "$md_pid" || md_status=$?
    echo "test.sh: the md VM test ($md_bin), run beside the others (exit status $md_status):"
    cat "$md_log"
    rm -f "$md_log"
    [ "$md_status" = 0 ] || status=$md_status
else
    RUST_BACKTRACE=1 cargo test --workspace --no-fail-fast 2>&1 || status=$?
fi
echo "test.sh: cargo test took $((SECONDS - phase)) s (exit status $status); the whole run ${SECONDS} s"
exit "$status"
