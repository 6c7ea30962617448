#!/usr/bin/env bash
# RAID 0, 1, 5, 6 and 10 exports of `raidlab serve` (RAID 0, 5 and 10 on four
# members, RAID 1 on two, RAID 6 on five) against btrfs with the same data
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
#        1 GiB region, 190 IOPS; nbdkit 1.32 reads it as whole milliseconds,
#        so 5.3 is 5 ms: see nbd-delay-lib.sh), reads and writes alike (a disk with its
#        write cache off), and the hdd profile's 160 MB/s throttle on top.
#        Sequential requests pay the delay too, which a disk does not, so
#        the 1M jobs and the copy are not run here by default. Set-up
#        (create, resync, mkfs, fill) runs on plain loop devices over the same
#        files; the delayed devices take their place before a side's first
#        job (raidlab's server restarted on them; btrfs scanned and mounted
#        from them). Needs nbdkit, nbdfuse (libnbd-bin) and fuse3.
#
# MD=1 (hdd-seek only) adds a third side: the kernel's own md array, in the
# mdvm guest of the md compatibility test (tests/mdvm: a stock Debian
# kernel, mdadm; KVM where it boots, else TCG) with the same delayed loop
# devices attached as its disks (cache=none: no host page cache between
# them), md created over them (64K chunk, as raidlab's; members zeroed first,
# so --assume-clean is true) and fio run in the guest with libaio and
# O_DIRECT, the same jobs and sizes. It answers whether raidlab's array is as
# fast as the kernel's array of the same layout on the same disks, which
# btrfs (copy-on-write) does not: md updates parity in place as raidlab
# does. Host fio and its libraries are copied into the guest.
#
# A second table follows the figures: for each side, the requests the member
# devices completed during a run (reads + writes, /sys/block/*/stat; md's
# counted at the guest's disks) over fio's I/Os, which is what each side
# asked of the disks whatever it reports.
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
# What keeps the two sides' reads honest: raidlab opens block-device members
# with O_DIRECT (its default; `--buffered` goes through the page cache), btrfs's
# fio reads are O_DIRECT, and a time-based job reads its region many times over (at SSD speed 128 MiB lasts a tenth of a second).
# So the members' page cache is dropped (`blockdev --flushbufs`) before every
# run, and during every run (both sides alike) a small evictor drops the
# members' clean cached pages every EVICT_MS milliseconds (default 10,
# POSIX_FADV_DONTNEED on each device): a block read again comes from the
# device unless it was read in the last few milliseconds, which the runs'
# access patterns (each job cycling over a slice of 32 MiB or more, or random
# 4K over 128 MiB) make rare. Write jobs end with a flush (`end_fsync=1`,
# counted in fio's runtime; for raidlab an NBD FLUSH, a cache flush of its
# direct members), so neither side is credited for data still in
# memory.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-nbd-lib.sh
. scripts/bench-nbd-lib.sh
# shellcheck source=scripts/nbd-delay-lib.sh
. scripts/nbd-delay-lib.sh
PROFILE=${PROFILE:-ssd}
MEMBER=${MEMBER:-512M}
RUNTIME=${RUNTIME:-5}
RAIDLAB=${RAIDLAB:-target/release/raidlab}
LEVELS=${LEVELS:-0 1 5 6 10}
MD_LEVELS=${MD_LEVELS:-5 6}  # MD=1: the levels md runs too (RAID 5/6: md's in-place parity is the fair comparison)
JOBS=${JOBS:-}             # only jobs whose names contain one of these words
ROUNDS=${ROUNDS:-1}        # runs per job, side and set-up order (median reported)
CLIENTS=${CLIENTS:-}
SEEK_MS=${SEEK_MS:-5.3}    # hdd-seek: the time every member request waits
NJOBS=${NJOBS:-4}
MD=${MD:-}                 # 1: a third side, Linux md in the mdvm guest (hdd-seek)
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
case $MD in
    "" | 0) MD="" ;;
    1) [ "$PROFILE" = hdd-seek ] || { echo "bench-nbd-raid-devices.sh: MD=1 needs PROFILE=hdd-seek (the guest's CPU cost must be small beside the devices')" >&2; exit 2; } ;;
    *) echo "bench-nbd-raid-devices.sh: MD must be 1 or empty, not '$MD'" >&2; exit 2 ;;
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
    for i in $(seq 0 $((nmem - 1))); do delayed_member_down "$dir" "$i"; done
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
        delayed_member_up "$dir" "$i" "$dir/d$i" "$SEEK_MS" || exit 1
        loops+=("$DELAYED_LOOP")
        throttle "${loops[-1]}" 1
    done
    slow=1
}
# The md side (MD=1): the mdvm guest, with fio and its libraries beside the
# guest script, booted once per level and set-up order for every selected job.
mdguest=""
md_accel=""
md_settings=""
md_prepare() {
    local l
    mdguest="$dir/mdguest"
    mkdir -p "$mdguest/lib"
    cp scripts/bench-md-guest.sh "$mdguest/guest.sh"
    cp -L "$(command -v fio)" "$mdguest/fio"
    for l in $(ldd "$(command -v fio)" | awk '/=>/ {print $3}'); do cp -L "$l" "$mdguest/lib/"; done
    MDVM_GUEST=$(tests/mdvm/build.sh 2>"$dir/mdvm-build.log" | tail -n1) && [ -s "$MDVM_GUEST/vmlinuz" ] || {
        echo "bench-nbd-raid-devices.sh: MD=1: the mdvm guest could not be built:" >&2; cat "$dir/mdvm-build.log" >&2; exit 1
    }
    export MDVM_GUEST
    truncate -s 1M "$dir/mdvm-data"
}
md_side() { # order level members
    local order=$1 level=$2 n=$3 t name client rw bs qd k i round out="$dir/mdvm-out"
    # Zeros on every member (the other sides left their data), so md's
    # --assume-clean is true; the loop devices must not keep the old pages.
    for i in $(seq 0 $((n - 1))); do
        fallocate -p -o 0 -l "$(stat -c %s "$dir/d$i")" "$dir/d$i"
        blockdev --flushbufs "${loops[$i]}"
    done
    go_slow
    {
        echo "$level $n $NJOBS $FILE_MB $RUNTIME"
        for t in "${selected[@]}"; do
            read -r name client rw bs qd <<<"$t"
            for round in $(seq "$ROUNDS"); do echo "$name $client $rw $bs $qd $(seed_of "$client" "$rw" "$bs" "$qd" "$round")"; done
        done
    } >"$mdguest/manifest"
    rm -rf "$out"
    MDVM_OUT="$out" MDVM_MEM=2048 MDVM_DRIVES="${loops[*]}" \
        tests/mdvm/run.sh "$mdguest" "$dir/mdvm-data" 3600 >"$dir/mdvm.log" 2>&1 || {
        echo "bench-nbd-raid-devices.sh: MD=1: the md guest failed (RAID $level):" >&2; tail -n 40 "$dir/mdvm.log" >&2; exit 1
    }
    md_accel=$(cat "$out/accel.txt")
    # RAID 10 has none of these tunables: grep finds nothing, which is fine.
    md_settings+="RAID $level: $(grep -h '^[a-z_]* [0-9]*$' "$out/results/md.txt" | tr '\n' ' ' | sed 's/ $//' || true)"$'\n'
    while read -r k name client r0 w0 r1 w1; do
        runs[$order,$name,$client,m]+="$(python3 -c "$parse" <"$out/results/$k.json" | tr ' ' :) "
        ios[$name,$client,m]+="$(python3 -c "$per_io" "$out/results/$k.json" "$r0" "$w0" "$r1" "$w1") "
    done <"$out/results/index"
    go_fast
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
    echo "$o --time_based --rw=$2 --bs=$3 --runtime=$RUNTIME --randrepeat=0 --randseed=$(seed_of "$@" "$round") --output-format=json"
}
# fio's random offsets repeat from job to job (randrepeat=1, its default, also
# ignores randseed for them: fio 3.33 gives every job the same first offsets),
# and a cache that keeps what the last job wrote (md's stripe cache keeps 256
# stripes) is then credited for hits the workload does not have. Every job
# and round gets its own seed; every side gets the same one.
seed_of() { # client rw bs qd round -> fio's randseed
    printf '%s' "$*" | cksum | cut -d' ' -f1
}
round=1
# Drops the members' clean cached pages every EVICT_MS ms until killed.
evict='
import os, sys, time
fds = [os.open(d, os.O_RDONLY) for d in sys.argv[2:]]
while True:
    for fd in fds:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    time.sleep(float(sys.argv[1]) / 1000)'
member_ios() { # -> "reads writes": requests the member devices completed so far
    local l a b r=0 w=0
    for l in "${loops[@]}"; do
        read -r a _ _ _ b _ <"/sys/block/${l#/dev/}/stat"
        r=$((r + a)); w=$((w + b))
    done
    echo "$r $w"
}
# fio's JSON and member requests before and after -> "reads:writes" per I/O.
per_io='
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
n = max(j["read"]["total_ios"] + j["write"]["total_ios"], 1)
r0, w0, r1, w1 = map(int, sys.argv[2:])
print("%.2f:%.2f" % ((r1 - r0) / n, (w1 - w0) / n))'
run() { # side client rw bs qd -> "MiB/s IOPS"; member requests per I/O in $dir/per-io
    local ev before
    for l in "${loops[@]}"; do blockdev --flushbufs "$l"; done
    python3 -c "$evict" "$EVICT_MS" "${loops[@]}" &
    ev=$!
    rm -f "$dir/run.json"
    before=$(member_ios)
    run_one "$@"
    kill "$ev"; wait "$ev" 2>/dev/null || true
    if [ -s "$dir/run.json" ]; then
        # shellcheck disable=SC2046
        python3 -c "$per_io" "$dir/run.json" $before $(member_ios) >"$dir/per-io"
    else
        echo "n/a" >"$dir/per-io"
    fi
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
    fi | tee "$dir/run.json" | python3 -c "$parse"
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
with_md=$MD
if [ -n "$MD" ]; then
    md_prepare
    echo "md: Linux $(sed -n 's/^kernel_package_version=//p' "$MDVM_GUEST/versions.txt") (Debian), mdadm $(sed -n 's/^mdadm=//p' "$MDVM_GUEST/versions.txt"), in the mdvm guest (2 vCPUs); fio $(fio --version) with libaio, O_DIRECT on /dev/md0"
    echo "| level | job | client | raidlab | btrfs | raidlab / btrfs | raidlab set up first | btrfs set up first | md | raidlab / md |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
else
    echo "| level | job | client | raidlab | btrfs | raidlab / btrfs | raidlab set up first | btrfs set up first |"
    echo "|---|---|---|---|---|---|---|---|"
fi
declare -A runs ios
ios_rows=""
# The median run's member requests per I/O, "R reads + W writes", per side.
print_ios() { # level
    local t name client rw bs qd side row
    for t in "${selected[@]}"; do
        read -r name client rw bs qd <<<"$t"
        row="| RAID $1 | $name | $(label "$client") |"
        for side in r b ${MD:+m}; do
            [ -n "${ios[$name,$client,$side]:-}" ] || { row+=" - |"; continue; }
            # shellcheck disable=SC2086
            row+=" $(python3 -c '
import sys
v = sorted((sum(map(float, x.split(":"))), x) for x in sys.argv[1:] if x != "n/a")
if not v:
    print("n/a")
else:
    r, w = v[(len(v) - 1) // 2][1].split(":")
    print("%s + %s" % (r, w))' ${ios[$name,$client,$side]:-}) |"
        done
        echo "$row"
    done
}
for cfg in "raid0 0 4" "raid1 1 2" "raid5 5 4" "raid6 6 5" "raid10 10 4"; do
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
    ios=()
    for order in raidlab-first btrfs-first; do
        sides="r b"; [ $order = btrfs-first ] && sides="b r"
        if [ -n "$MD" ] && [[ " $MD_LEVELS " == *" $level "* ]]; then
            sides="r b m"; [ $order = btrfs-first ] && sides="b m r"
        fi
        for s in $sides; do
            if [ "$s" = m ]; then
                md_side "$order" "$level" "$n"
                continue
            fi
            setup "$s" "$level" "$profile"
            for t in "${selected[@]}"; do
                read -r name client rw bs qd <<<"$t"
                [ "$client" = copy ] && refill "$s"
                for round in $(seq "$ROUNDS"); do
                    runs[$order,$name,$client,$s]+="$(run "$s" "$client" "$rw" "$bs" "$qd" | tr ' ' :) "
                    ios[$name,$client,$s]+="$(cat "$dir/per-io") "
                done
            done
            teardown "$s"
        done
    done
    for l in "${loops[@]}"; do throttle "$l" 0; losetup -d "$l"; done
    loops=()
    rm -f "$dir"/d*
    print_rows "$level"
    ios_rows+=$(print_ios "$level")$'\n'
done
echo
echo "Member requests per fio I/O (reads + writes completed by the member devices during the run, over fio's I/Os; median run):"
echo
if [ -n "$MD" ]; then
    echo "| level | job | client | raidlab | btrfs | md |"
    echo "|---|---|---|---|---|---|"
else
    echo "| level | job | client | raidlab | btrfs |"
    echo "|---|---|---|---|---|"
fi
printf '%s' "$ios_rows"
echo
[ -n "$MD" ] && printf 'md ran under %s; its tunables as each array had them:\n%s' "$md_accel" "$(printf '%s' "$md_settings" | sort -u)"$'\n\n'
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
