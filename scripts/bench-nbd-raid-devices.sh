#!/usr/bin/env bash
# RAID 5, 6 and 10 exports of `raidlab serve` against btrfs with the same data
# profile, both on the SAME block devices, which are slower than memory and
# hold still: loop devices over files in /dev/shm, each throttled by the
# kernel's block throttle (cgroup v1 blkio, root group, so every bio to the
# device counts, the filesystem's workers and writeback included) to the
# bandwidth and IOPS of a real device. Device time, not the per-page cost of
# tmpfs or the 2 CPUs, is then what the figures measure (bench-nbd-raid.sh
# measures the other thing: members in memory).
#
# One set of devices, formatted for one side at a time: per level, the devices
# are made into a raidlab array, served, measured, then wiped and made into a
# btrfs filesystem and measured (and the other way round in the second set-up
# order); the runs of both orders are pooled (median), each order's ratio is
# printed too. Needs root, fio, btrfs-progs, libnbd-bin (nbdcopy, nbdinfo).
#
#   scripts/bench-nbd-raid-devices.sh                 # PROFILE=ssd, 512M members
#   PROFILE=hdd RUNTIME=3 scripts/bench-nbd-raid-devices.sh
#   PROFILE=hdd-seek RUNTIME=3 scripts/bench-nbd-raid-devices.sh
#   LEVELS=5 CLIENTS="N copy" ROUNDS=3 scripts/bench-nbd-raid-devices.sh
#
# PROFILE (the throttle of every member; blk-throttle limits rate, it cannot
# add a fixed latency per request, and this kernel has no dm-delay, null_blk,
# nbd or ublk to do that, so hdd-seek builds one from nbdkit and FUSE):
#   ssd  a SATA SSD, the simulator's preset sata-ssd-1tb-2021 (Samsung 870 EVO
#        1 TB, kitguru.net review): read 560 MB/s, write 530 MB/s, 98,000
#        read and 88,000 write IOPS (4K QD32). The IOPS caps do not bind on a
#        2-CPU machine; the 1M jobs are bound by the devices, the 4K jobs
#        still by the CPUs.
#   hdd  a 7200 rpm disk's bandwidth, the simulator's preset hdd-7200: 160
#        MB/s (outer tracks) both ways, no IOPS cap. Every job is then bound
#        by the devices' bandwidth, the 4K ones not by seeks: blk-throttle
#        counts each bio as one I/O whatever its size or place, and with the
#        preset's 100 IOPS as a cap the page-cache writeback of raidlab's
#        block-device members (many small bios) crawled at about 0.4 MB/s per
#        device (a real disk merges them), so the seeks are hdd-seek's.
#   hdd-seek  a 7200 rpm disk that seeks, for the 4K jobs (the default
#        JOBS here; CLIENTS "N 1"): each member is a loop device over
#        `nbdfuse` over `nbdkit file` of the same /dev/shm file, with nbdkit's
#        noparallel filter (serialize=all-requests: one actuator, one request
#        at a time) and delay filter (every request waits SEEK_MS, default
#        5.3 ms: half a revolution at 7200 rpm, 4.17 ms, plus a short seek,
#        what the simulator's hdd-7200 preset takes for a 4K read within a
#        1 GiB region, 190 IOPS), reads and writes alike (a disk with its
#        write cache off), and the hdd profile's 160 MB/s throttle on top.
#        Sequential requests pay the delay too, which a disk does not, so
#        the 1M jobs and the copy are not run here by default. Set-up
#        (create, resync, mkfs, fill) runs on plain loop devices over the same
#        files; the delayed devices take their place before a side's first
#        job (raidlab's server restarted on them; btrfs scanned and mounted
#        from them). Needs nbdkit, nbdfuse (libnbd-bin) and fuse3.
#
# Clients (CLIENTS, "N copy 1" by default), each side given the same:
#   N     NJOBS fio jobs (default 4), each on its own slice of the test file,
#         for raidlab each with its own NBD connection (multi-conn).
#   copy  nbdcopy of the whole export to null: (NJOBS connections, NJOBS x 8
#         requests of 1 MiB), repeated for RUNTIME seconds; against fio
#         reading the btrfs test file with NJOBS jobs, iodepth 8, bs 1M,
#         O_DIRECT, for RUNTIME seconds (btrfs's file written afresh first).
#   1     one fio job: for raidlab one NBD connection (client-bound when the
#         members are fast; labelled so).
#
# What keeps the two sides' reads honest: raidlab opens block devices through
# the page cache, btrfs's fio reads are O_DIRECT, and a time-based job reads
# its region many times over (at SSD speed 128 MiB lasts a tenth of a second).
# So the members' page cache is dropped (`blockdev --flushbufs`) before every
# run, and during every run (both sides alike) a small evictor drops the
# members' clean cached pages every EVICT_MS milliseconds (default 10,
# POSIX_FADV_DONTNEED on each device): a block read again comes from the
# device unless it was read in the last few milliseconds, which the runs'
# access patterns (each job cycling over a slice of 32 MiB or more, or random
# 4K over 128 MiB) make rare. Write jobs end with a flush (`end_fsync=1`,
# counted in fio's runtime; for raidlab an NBD FLUSH, which writes raidlab's
# dirty pages to the members), so neither side is credited for data still in
# memory.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-nbd-lib.sh
. scripts/bench-nbd-lib.sh
PROFILE=${PROFILE:-ssd}
MEMBER=${MEMBER:-512M}
RUNTIME=${RUNTIME:-5}
RAIDLAB=${RAIDLAB:-target/release/raidlab}
LEVELS=${LEVELS:-5 6 10}
JOBS=${JOBS:-}             # only jobs whose names contain one of these words
ROUNDS=${ROUNDS:-1}        # runs per job, side and set-up order (median reported)
CLIENTS=${CLIENTS:-}
SEEK_MS=${SEEK_MS:-5.3}    # hdd-seek: the time every member request waits
NJOBS=${NJOBS:-4}
EVICT_MS=${EVICT_MS:-10}   # how often the members' clean cached pages are dropped
case $PROFILE in
    # bytes/s read, write; IOPS read, write
    ssd) limits="560000000 530000000 98000 88000"; what="throttled as a SATA SSD (sata-ssd-1tb-2021: 560/530 MB/s, 98k/88k IOPS)" ;;
    hdd) limits="160000000 160000000 0 0"; what="throttled as a 7200 rpm HDD's bandwidth (hdd-7200: 160 MB/s, no IOPS cap)" ;;
    hdd-seek)
        limits="160000000 160000000 0 0"; JOBS=${JOBS:-4K}; CLIENTS=${CLIENTS:-N 1}
        [[ $SEEK_MS =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "bench-nbd-raid-devices.sh: SEEK_MS must be a number of milliseconds, not '$SEEK_MS'" >&2; exit 2; }
        what="behind nbdfuse and nbdkit as a 7200 rpm HDD (${SEEK_MS} ms a request, one request at a time, and 160 MB/s)"
        for t in nbdkit nbdfuse fusermount3 btrfs; do
            command -v $t >/dev/null || { echo "bench-nbd-raid-devices.sh: PROFILE=hdd-seek needs $t (apt-get install nbdkit libnbd-bin fuse3 btrfs-progs)" >&2; exit 2; }
        done ;;
    *) echo "bench-nbd-raid-devices.sh: PROFILE must be ssd, hdd or hdd-seek, not '$PROFILE'" >&2; exit 2 ;;
esac
CLIENTS=${CLIENTS:-N copy 1}
for t in fio mkfs.btrfs losetup blockdev wipefs python3 nbdcopy nbdinfo; do
    command -v $t >/dev/null || {
        echo "bench-nbd-raid-devices.sh: $t is not installed (apt-get install fio btrfs-progs libnbd-bin python3 util-linux)" >&2
        exit 2
    }
done
[ "$(id -u)" = 0 ] || { echo "bench-nbd-raid-devices.sh: needs root (loop devices, mount, the block throttle)" >&2; exit 2; }
BLKIO=/sys/fs/cgroup/blkio
[ -w $BLKIO/blkio.throttle.read_bps_device ] || {
    echo "bench-nbd-raid-devices.sh: no cgroup v1 blkio throttle at $BLKIO (needs CONFIG_BLK_DEV_THROTTLING and the v1 blkio hierarchy mounted)" >&2
    exit 2
}
for c in $CLIENTS; do
    case $c in 1 | N | copy) ;; *) echo "bench-nbd-raid-devices.sh: CLIENTS: unknown kind '$c' (use 1, N, copy)" >&2; exit 2 ;; esac
done
[[ $NJOBS =~ ^[1-9][0-9]*$ ]] || { echo "bench-nbd-raid-devices.sh: NJOBS must be a positive integer, not '$NJOBS'" >&2; exit 2; }
[ -x "$RAIDLAB" ] || cargo build --release -p raidlab

dir=$(mktemp -d /dev/shm/raidlab-bench-dev.XXXXXX)
srv=""
loops=()
throttle() { # device value-index (0 removes the limits)
    local d=$1 on=$2 mm v i=0
    mm=$(cat "/sys/block/${d#/dev/}/dev")
    for f in read_bps write_bps read_iops write_iops; do
        i=$((i + 1))
        v=0; [ "$on" = 1 ] && v=$(echo "$limits" | cut -d' ' -f$i)
        echo "$mm $v" >"$BLKIO/blkio.throttle.${f}_device"
    done
}
nmem=0 # members of the level being measured
slow=""
# hdd-seek: the members' loop devices over the files directly (set-up) or over
# the delayed NBD devices of the same files (the jobs). Nothing may hold the
# loop devices when they are swapped (server stopped, file system unmounted).
detach_loops() {
    local l i
    for l in "${loops[@]}"; do
        [ -n "$slow" ] && { throttle "$l" 0 2>/dev/null || true; }
        losetup -d "$l" 2>/dev/null || true
    done
    loops=()
    [ -n "$slow" ] || return 0
    for i in $(seq 0 $((nmem - 1))); do
        fusermount3 -u -z "$dir/f$i" 2>/dev/null || true
        [ -f "$dir/k$i.pid" ] && kill "$(cat "$dir/k$i.pid")" 2>/dev/null || true
        rm -f "$dir/k$i.pid" "$dir/k$i.sock"
    done
    slow=""
}
go_fast() {
    local i
    detach_loops
    for i in $(seq 0 $((nmem - 1))); do loops+=("$(losetup -f --show "$dir/d$i")"); done
}
go_slow() {
    local i
    detach_loops
    for i in $(seq 0 $((nmem - 1))); do
        nbdkit -P "$dir/k$i.pid" -U "$dir/k$i.sock" --filter=noparallel --filter=delay \
            file "$dir/d$i" serialize=all-requests rdelay="${SEEK_MS}ms" wdelay="${SEEK_MS}ms"
        mkdir -p "$dir/f$i"
        setsid nbdfuse "$dir/f$i" --unix "$dir/k$i.sock" </dev/null >>"$dir/nbdfuse.log" 2>&1 &
        for _ in $(seq 100); do [ -e "$dir/f$i/nbd" ] && break; sleep 0.05; done
        [ -e "$dir/f$i/nbd" ] || { echo "bench-nbd-raid-devices.sh: nbdfuse did not mount $dir/f$i:" >&2; cat "$dir/nbdfuse.log" >&2; exit 1; }
        loops+=("$(losetup -f --show --direct-io=on "$dir/f$i/nbd")")
        throttle "${loops[-1]}" 1
    done
    slow=1
}
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null || true
    mountpoint -q "$dir/mnt" && umount "$dir/mnt" || true
    for l in "${loops[@]}"; do throttle "$l" 0 2>/dev/null || true; done
    detach_loops
    rm -rf "$dir"
}
trap cleanup EXIT
mkdir "$dir/mnt"

FILE_MB=$(( $(numfmt --from=iec "$MEMBER") / 1048576 / 4 ))
SLICE_MB=$(( FILE_MB / NJOBS ))
[ "$SLICE_MB" -ge 1 ] || { echo "bench-nbd-raid-devices.sh: MEMBER $MEMBER is too small for NJOBS=$NJOBS" >&2; exit 2; }
URI="nbd+unix:///a?socket=$dir/s.sock"

fio_opts() { # client rw bs qd -> the options both sides share
    local o
    case $1 in
        1) o="--size=${FILE_MB}M --iodepth=$4" ;;
        *) o="--numjobs=$NJOBS --group_reporting --size=${SLICE_MB}M --offset_increment=${SLICE_MB}M --iodepth=$4" ;;
    esac
    case $2 in
        *write) o+=" --end_fsync=1" ;;
    esac
    echo "$o --time_based --rw=$2 --bs=$3 --runtime=$RUNTIME --output-format=json"
}
# Drops the members' clean cached pages every EVICT_MS ms until killed.
evict='
import os, sys, time
fds = [os.open(d, os.O_RDONLY) for d in sys.argv[2:]]
while True:
    for fd in fds:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    time.sleep(float(sys.argv[1]) / 1000)'
run() { # side client rw bs qd -> "MiB/s IOPS"
    local ev
    for l in "${loops[@]}"; do blockdev --flushbufs "$l"; done
    python3 -c "$evict" "$EVICT_MS" "${loops[@]}" &
    ev=$!
    run_one "$@"
    kill "$ev"; wait "$ev" 2>/dev/null || true
}
run_one() { # side client rw bs qd -> "MiB/s IOPS"
    local side=$1; shift
    if [ "$side" = r ] && [ "$1" = copy ]; then
        copy_nbd
        return
    fi
    local c=$1; [ "$c" = copy ] && set -- N read 1M 8
    # shellcheck disable=SC2046
    if [ "$side" = r ]; then
        fio --name=b --ioengine=nbd --uri="$URI" $(fio_opts "$@")
    else
        fio --name=b --ioengine=libaio --direct=1 --filename="$dir/mnt/f" $(fio_opts "$@")
    fi | python3 -c "$parse"
}
label() {
    case $1 in
        1) echo "1 connection" ;;
        N) echo "$NJOBS jobs, $NJOBS connections" ;;
        copy) echo "nbdcopy, $NJOBS connections / fio $NJOBS jobs" ;;
    esac
}

select_tests

setup() { # side level profile
    for l in "${loops[@]}"; do wipefs -a -q "$l"; done
    if [ "$1" = r ]; then
        "$RAIDLAB" create -f -l "$2" -c 64K "${loops[@]}" >"$dir/create.log" 2>&1 || {
            echo "bench-nbd-raid-devices.sh: raidlab create failed:" >&2; cat "$dir/create.log" >&2; exit 1
        }
        "$RAIDLAB" resync "${loops[@]}" >/dev/null 2>&1 || true
        "$RAIDLAB" serve --socket "$dir/s.sock" -N a "${loops[@]}" 2>"$dir/serve.log" &
        srv=$!
        for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
        local fill="${FILE_MB}M"
        [[ " $CLIENTS " == *" copy "* ]] && fill=$(nbdinfo --size "$URI")
        fio --name=fill --ioengine=nbd --uri="$URI" --rw=write --bs=1M --iodepth=8 \
            --size="$fill" --end_fsync=1 >/dev/null
        if [ "$PROFILE" = hdd-seek ]; then
            kill "$srv"; wait "$srv" 2>/dev/null || true; rm -f "$dir/s.sock"
            go_slow
            "$RAIDLAB" serve --socket "$dir/s.sock" -N a "${loops[@]}" 2>>"$dir/serve.log" &
            srv=$!
            for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
        fi
    else
        mkfs_btrfs "$3" "${loops[@]}"
        mount "${loops[0]}" "$dir/mnt"
        fio --name=fill --ioengine=libaio --direct=1 --filename="$dir/mnt/f" --rw=write \
            --bs=1M --iodepth=8 --size="${FILE_MB}M" --end_fsync=1 >/dev/null
        if [ "$PROFILE" = hdd-seek ]; then
            umount "$dir/mnt"
            go_slow
            btrfs device scan --forget >/dev/null 2>&1 || true
            btrfs device scan "${loops[@]}" >/dev/null
            mount "${loops[0]}" "$dir/mnt"
        fi
    fi
}
refill() { # side: rewrite the test file sequentially (btrfs: fresh extents after random writes)
    [ "$1" = b ] && fio --name=fill --ioengine=libaio --direct=1 --filename="$dir/mnt/f" \
        --rw=write --bs=1M --iodepth=8 --size="${FILE_MB}M" --end_fsync=1 >/dev/null
    return 0
}
teardown() { # side
    if [ "$1" = r ]; then
        kill "$srv"; wait "$srv" 2>/dev/null || true; srv=""; rm -f "$dir/s.sock"
    else
        umount "$dir/mnt"
    fi
    [ "$PROFILE" = hdd-seek ] && go_fast
    return 0
}

echo "raidlab $($RAIDLAB --version 2>/dev/null | head -1) ($RAIDLAB), fio $(fio --version), $(mkfs.btrfs --version | head -1), $(nbdcopy --version | head -1), kernel $(uname -r), $(nproc) CPUs"
echo "members: $MEMBER loop devices over /dev/shm files, each $what; ${RUNTIME}s per job, test file ${FILE_MB}M, median of $((2 * ROUNDS)) run(s) per side ($ROUNDS per set-up order), N = $NJOBS"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| level | job | client | raidlab | btrfs | raidlab / btrfs | raidlab set up first | btrfs set up first |"
echo "|---|---|---|---|---|---|---|---|"
declare -A runs
for cfg in "raid5 5 4" "raid6 6 5" "raid10 10 4"; do
    read -r profile level n <<<"$cfg"
    [[ " $LEVELS " == *" $level "* ]] || continue
    nmem=$n
    for i in $(seq 0 $((n - 1))); do
        truncate -s "$MEMBER" "$dir/d$i"
        loops+=("$(losetup -f --show "$dir/d$i")")
        # hdd-seek sets up on plain loop devices; go_slow throttles its own
        [ "$PROFILE" = hdd-seek ] || throttle "${loops[-1]}" 1
    done
    runs=()
    for order in raidlab-first btrfs-first; do
        sides="r b"; [ $order = btrfs-first ] && sides="b r"
        for s in $sides; do
            setup "$s" "$level" "$profile"
            for t in "${selected[@]}"; do
                read -r name client rw bs qd <<<"$t"
                [ "$client" = copy ] && refill "$s"
                for _ in $(seq "$ROUNDS"); do
                    runs[$order,$name,$client,$s]+="$(run "$s" "$client" "$rw" "$bs" "$qd" | tr ' ' :) "
                done
            done
            teardown "$s"
        done
    done
    for l in "${loops[@]}"; do throttle "$l" 0; losetup -d "$l"; done
    loops=()
    rm -f "$dir"/d*
    print_rows "$level"
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
