#!/usr/bin/env bash
# Direct vs buffered members on block devices, side by side in one run
# (issue 35): a RAID 10 of four loop devices (`losetup --direct-io=on` over
# files on disk, so the loop layer adds no page cache of its own) served by
# `raidlab serve --direct` and `--buffered` in turn (alternating order, a
# fresh array each time), SIZE bytes copied into it with nbdcopy --flush.
# While it copies, /proc/meminfo's Dirty, the loop devices' own dirty pages
# (their writeback stats in debugfs: BdiReclaimable + BdiWriteback) and the
# server's VmRSS are sampled every 0.1 s. Printed per run as a Markdown
# table: copy time; system Dirty before / peak / after the copy (on a shared
# machine other processes add to it); the members' pages dirtied during the
# copy (BdiDirtied) and their dirty peak, which only raidlab's member writes
# make; the server's peak VmRSS (sampled, and VmHWM).
#
#   sudo BIN=target/release/raidlab scripts/bench-direct-io.sh
#   sudo ROUNDS=2 SIZE=768M MEMBER=1G DIR=/var/tmp/x scripts/bench-direct-io.sh
#
# DIR must be on a disk file system (not tmpfs): the members' backing files
# and the source file live there. Needs root (loop devices, debugfs, which
# is mounted for the run if it is not) and nbdcopy (Debian libnbd-bin).
set -euo pipefail
BIN="${BIN:-target/release/raidlab}"
ROUNDS="${ROUNDS:-1}"
SIZE="${SIZE:-768M}"
MEMBER="${MEMBER:-1G}"
DIR="${DIR:-$PWD/target/bench-direct-io}"
[ "$(id -u)" = 0 ] || { echo "bench-direct-io: needs root (loop devices)" >&2; exit 1; }
command -v nbdcopy >/dev/null || { echo "bench-direct-io: nbdcopy is needed (apt-get install libnbd-bin)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "bench-direct-io: no raidlab binary at $BIN (set BIN=)" >&2; exit 1; }
mkdir -p "$DIR"
loops=()
srv=""
debugfs=""
if [ ! -d /sys/kernel/debug/bdi ]; then
    mount -t debugfs none /sys/kernel/debug
    debugfs=1
fi
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null || true
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    rm -f "$DIR"/b? "$DIR"/src "$DIR"/s.sock "$DIR"/samples
    [ -z "$debugfs" ] || umount /sys/kernel/debug || true
}
trap cleanup EXIT

kib() { awk -v k="$1" '$1 == k":" { print $2 }' "${2:-/proc/meminfo}"; }
# bdi KEY...: the sum over the members' loop devices of their writeback
# stats KEY... (kB).
bdi() {
    local sum=0 l k
    for l in "${loops[@]}"; do
        for k in "$@"; do
            sum=$((sum + $(kib "$k" "/sys/kernel/debug/bdi/$(cat "/sys/block/${l#/dev/}/dev")/stats")))
        done
    done
    echo "$sum"
}

# The data to copy, written and synced before anything is measured.
head -c "$SIZE" /dev/urandom >"$DIR/src"
sync

# run MODE: a fresh RAID 10, SIZE copied in, one table row.
run() {
    local mode="$1"
    for l in "${loops[@]}"; do losetup -d "$l"; done
    loops=()
    for i in 0 1 2 3; do
        rm -f "$DIR/b$i"
        truncate -s "$MEMBER" "$DIR/b$i"
        loops+=("$(losetup --direct-io=on -f --show "$DIR/b$i")")
    done
    "$BIN" create -l 10 -c 512K "${loops[@]}" >/dev/null 2>&1
    rm -f "$DIR/s.sock"
    "$BIN" serve "--$mode" --socket "$DIR/s.sock" -N a "${loops[@]}" 2>"$DIR/serve-$mode.log" &
    srv=$!
    for _ in $(seq 600); do [ -S "$DIR/s.sock" ] && break; sleep 0.1; done
    # The start-up resync of the fresh array is over once serve listens.
    sync
    sleep 1
    local before dirtied0
    before=$(kib Dirty)
    dirtied0=$(bdi BdiDirtied)
    : >"$DIR/samples"
    (
        while kill -0 "$srv" 2>/dev/null; do
            echo "$(kib Dirty) $(kib VmRSS "/proc/$srv/status") $(bdi BdiReclaimable BdiWriteback)" >>"$DIR/samples"
            sleep 0.1
        done
    ) &
    local sampler=$!
    local t0 t1
    t0=$(date +%s.%N)
    nbdcopy --flush "$DIR/src" "nbd+unix:///a?socket=$DIR/s.sock"
    t1=$(date +%s.%N)
    local after hwm dirtied
    after=$(kib Dirty)
    dirtied=$(($(bdi BdiDirtied) - dirtied0))
    hwm=$(kib VmHWM "/proc/$srv/status")
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    kill "$srv"
    wait "$srv" 2>/dev/null || true
    srv=""
    python3 - "$mode" "$t0" "$t1" "$before" "$after" "$hwm" "$SIZE" "$DIR/samples" "$dirtied" <<'EOF'
import sys
mode, t0, t1, before, after, hwm, size, samples, dirtied = sys.argv[1:]
rows = [l.split() for l in open(samples) if len(l.split()) == 3]
peak = max([int(r[0]) for r in rows] + [int(before)])
rss = max([int(r[1]) for r in rows] + [0])
mpeak = max([int(r[2]) for r in rows] + [0])
secs = float(t1) - float(t0)
mib = lambda k: f"{int(k) / 1024:.0f}"
print(f"| {mode} | {size} | {secs:.1f} | {mib(before)} / {mib(peak)} / {mib(after)} | {mib(dirtied)} | {mib(mpeak)} | {mib(rss)} | {mib(hwm)} |")
EOF
}

echo "| members | copied | copy s | system Dirty before / peak / after MiB | members' pages dirtied MiB | members' dirty peak MiB | serve VmRSS peak MiB (sampled) | serve VmHWM MiB |"
echo "|---|---|---|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then run buffered; run direct; else run direct; run buffered; fi
done
