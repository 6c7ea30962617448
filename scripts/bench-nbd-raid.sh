#!/usr/bin/env bash
# RAID 5, 6 and 10 exports of `raidlab serve` (members are files in /dev/shm)
# against btrfs with the same data profile on loop devices over files in
# /dev/shm, with the same fio jobs: through fio's nbd engine for raidlab, on a
# file in the mounted btrfs (libaio, O_DIRECT) for btrfs. Prints a Markdown
# table. Needs root (loop devices, mount), fio, btrfs-progs and libnbd-bin
# (nbdcopy, nbdinfo): `apt-get install fio btrfs-progs libnbd-bin`. Members
# slower than memory (one set of throttled block devices for both sides):
# scripts/bench-nbd-raid-devices.sh.
#
#   scripts/bench-nbd-raid.sh                 # 512M members, 5 s per job
#   MEMBER=512M RUNTIME=10 scripts/bench-nbd-raid.sh
#   LEVELS="6 10" JOBS="seq-read" scripts/bench-nbd-raid.sh   # a subset
#   CLIENTS="1 copy" scripts/bench-nbd-raid.sh   # a subset of the client kinds
#   ROUNDS=3 scripts/bench-nbd-raid.sh   # each job 3 times per side, alternating;
#                                        # the median of each side is reported
#
# Three kinds of client (CLIENTS, all by default), each side given the same:
#   1     one fio job: for raidlab one NBD connection. Labelled client-bound:
#         fio's nbd engine copies every byte out of the socket on one thread,
#         and that thread, not the server, sets the pace of the large reads.
#   N     NJOBS fio jobs (default 4) with the job's queue depth each
#         (`numjobs=`, `group_reporting`), each on its own slice of the test
#         region (`offset_increment=`); for raidlab each job opens its own NBD
#         connection, which `raidlab serve` allows by advertising multi-conn.
#   copy  `nbdcopy` of the whole export to `null:` with NJOBS connections and
#         threads, NJOBS x 8 requests of 1 MiB in flight, repeated for RUNTIME
#         seconds; against fio reading the btrfs test file with NJOBS jobs,
#         iodepth 8, bs 1M, O_DIRECT, for RUNTIME seconds (the file is smaller
#         than the export, so fio reads it over again: equal are the block
#         size, the requests in flight, the parallelism and the time).
#
# Before the jobs, the test region (for raidlab the whole export, which
# nbdcopy reads) is written in full on both sides, so that reads read data
# whatever jobs run (a raidlab array's members are sparse, and reading holes
# would flatter it).
#
# Each level is set up twice, once with raidlab's array made and filled first
# and once with btrfs's first, and the runs of both set-ups are pooled: on the
# 2-vCPU VM these figures come from, the side set up first read 10-15% slower,
# whichever it was (docs/benchmarks.md). The last two columns give the ratio
# of each set-up alone. The load average is printed before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-nbd-lib.sh
. scripts/bench-nbd-lib.sh
MEMBER=${MEMBER:-512M}
RUNTIME=${RUNTIME:-5}
RAIDLAB=${RAIDLAB:-target/release/raidlab}
LEVELS=${LEVELS:-5 6 10}   # which levels to run
JOBS=${JOBS:-}             # only jobs whose names contain one of these words
ROUNDS=${ROUNDS:-1}        # runs per job, side and set-up order (median reported)
CLIENTS=${CLIENTS:-1 N copy} # which kinds of client (see above)
NJOBS=${NJOBS:-4}          # jobs / connections of the N and copy clients
for t in fio mkfs.btrfs losetup unshare python3 nbdcopy nbdinfo; do
    command -v $t >/dev/null || {
        echo "bench-nbd-raid.sh: $t is not installed (apt-get install fio btrfs-progs libnbd-bin python3)" >&2
        exit 2
    }
done
[ "$(id -u)" = 0 ] || { echo "bench-nbd-raid.sh: needs root for loop devices and mount" >&2; exit 2; }
for c in $CLIENTS; do
    case $c in 1 | N | copy) ;; *) echo "bench-nbd-raid.sh: CLIENTS: unknown kind '$c' (use 1, N, copy)" >&2; exit 2 ;; esac
done
[[ $NJOBS =~ ^[1-9][0-9]*$ ]] || { echo "bench-nbd-raid.sh: NJOBS must be a positive integer, not '$NJOBS'" >&2; exit 2; }
[ -x "$RAIDLAB" ] || cargo build --release -p raidlab

dir=$(mktemp -d /dev/shm/raidlab-bench-raid.XXXXXX)
srv=""
loops=()
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null || true
    mountpoint -q "$dir/mnt" && umount "$dir/mnt" || true
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
mkdir "$dir/mnt"

# The test file: a quarter of a member, so btrfs (copy on write, metadata with
# the same profile) does not run out of space under random writes.
FILE_MB=$(( $(numfmt --from=iec "$MEMBER") / 1048576 / 4 ))
# Each of the N client's jobs works on its own slice of it.
SLICE_MB=$(( FILE_MB / NJOBS ))
[ "$SLICE_MB" -ge 1 ] || { echo "bench-nbd-raid.sh: MEMBER $MEMBER is too small for NJOBS=$NJOBS" >&2; exit 2; }
URI="nbd+unix:///a?socket=$dir/s.sock"

# The fio options of one client kind for one job; the engine comes from the side.
fio_client() { # client rw bs qd
    case $1 in
        1) echo "--size=${FILE_MB}M --iodepth=$4" ;;
        N) echo "--numjobs=$NJOBS --group_reporting --size=${SLICE_MB}M --offset_increment=${SLICE_MB}M --iodepth=$4" ;;
        copy) echo "--numjobs=$NJOBS --group_reporting --size=${SLICE_MB}M --offset_increment=${SLICE_MB}M --iodepth=8" ;;
    esac
}
fio_nbd() { # client rw bs qd
    # shellcheck disable=SC2046
    fio --name=b --ioengine=nbd --uri="$URI" --rw="$2" --bs="$3" $(fio_client "$@") \
        --time_based --runtime="$RUNTIME" --output-format=json | python3 -c "$parse"
}
fio_btrfs() { # client rw bs qd
    # shellcheck disable=SC2046
    fio --name=b --ioengine=libaio --direct=1 --filename="$dir/mnt/f" --rw="$2" --bs="$3" \
        $(fio_client "$@") --time_based --runtime="$RUNTIME" --output-format=json |
        python3 -c "$parse"
}
run_side() { # r|b client rw bs qd -> "bw iops"
    local side=$1; shift
    if [ "$side" = r ]; then
        if [ "$1" = copy ]; then copy_nbd; else fio_nbd "$@"; fi
    else
        fio_btrfs "$@"
    fi
}

echo "fio $(fio --version), $(mkfs.btrfs --version | head -1), $(nbdcopy --version | head -1), kernel $(uname -r), $(nproc) CPUs, raidlab $(git rev-parse --short HEAD 2>/dev/null || echo '?'), members $MEMBER each in /dev/shm, ${RUNTIME}s per job, test file ${FILE_MB}M, median of $((2 * ROUNDS)) run(s) per side ($ROUNDS per set-up order), N = $NJOBS jobs / connections"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| level | job | client | raidlab | btrfs | raidlab / btrfs | raidlab set up first | btrfs set up first |"
echo "|---|---|---|---|---|---|---|---|"

setup_raidlab() { # level members...
    local level=$1; shift
    "$RAIDLAB" create -l "$level" -c 64K --member-size "$MEMBER" "$@" >/dev/null 2>&1
    # serve resyncs an array that is not known to be in sync before serving it;
    # do that here, outside the timed part (an error means it already is).
    "$RAIDLAB" resync "$@" >/dev/null 2>&1 || true
    "$RAIDLAB" serve --socket "$dir/s.sock" -N a "$@" 2>"$dir/serve.log" &
    srv=$!
    for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
    # Fill the test region; the whole export if nbdcopy is to read it.
    local fill="${FILE_MB}M"
    [[ " $CLIENTS " == *" copy "* ]] && fill=$(nbdinfo --size "$URI")
    fio --name=fill --ioengine=nbd --uri="$URI" --rw=write --bs=1M --iodepth=8 \
        --size="$fill" >/dev/null
}
setup_btrfs() { # profile member-count
    loops=()
    for i in $(seq 0 $(($2 - 1))); do
        truncate -s "$MEMBER" "$dir/b$i"
        loops+=("$(losetup -f --show "$dir/b$i")")
    done
    mkfs_btrfs "$1" "${loops[@]}"
    mount "${loops[0]}" "$dir/mnt"
    fill_btrfs
}
fill_btrfs() { # writes the test file in full, sequentially (fio lays it out itself)
    fio --name=fill --ioengine=libaio --direct=1 --filename="$dir/mnt/f" --rw=write \
        --bs=1M --iodepth=8 --size="${FILE_MB}M" >/dev/null
}
teardown() {
    kill "$srv"; wait "$srv" 2>/dev/null || true; srv=""
    umount "$dir/mnt"
    for l in "${loops[@]}"; do losetup -d "$l"; done
    loops=()
    rm -f "$dir"/r* "$dir"/b* "$dir/s.sock"
}
label() { # client -> its column text
    case $1 in
        1) echo "1 connection (client-bound)" ;;
        N) echo "$NJOBS jobs, $NJOBS connections" ;;
        copy) echo "nbdcopy, $NJOBS connections / fio $NJOBS jobs" ;;
    esac
}

select_tests
# runs[order,name,client,side]: the runs of one set-up, space-separated "bw:iops" pairs
declare -A runs

for cfg in "raid5 5 4" "raid6 6 5" "raid10 10 4"; do
    read -r profile level n <<<"$cfg"
    [[ " $LEVELS " == *" $level "* ]] || continue
    members=()
    for i in $(seq 0 $((n - 1))); do members+=("$dir/r$i"); done
    runs=()
    for order in raidlab-first btrfs-first; do
        if [ "$order" = raidlab-first ]; then
            setup_raidlab "$level" "${members[@]}"; setup_btrfs "$profile" "$n"
        else
            setup_btrfs "$profile" "$n"; setup_raidlab "$level" "${members[@]}"
        fi
        k=0
        for t in "${selected[@]}"; do
            read -r name client rw bs qd <<<"$t"
            # The random write jobs before it leave btrfs's copy-on-write file
            # in 4 KiB extents, which slows its sequential reads 3x; the copy
            # compares reads of data written sequentially, as the seq-read
            # jobs (right after seq-write) do, so the file is written afresh.
            [ "$client" = copy ] && fill_btrfs
            for _ in $(seq "$ROUNDS"); do
                # Alternate which side runs first from one run to the next.
                sides="r b"; [ $((k % 2)) = 1 ] && sides="b r"
                k=$((k + 1))
                for s in $sides; do
                    runs[$order,$name,$client,$s]+="$(run_side "$s" "$client" "$rw" "$bs" "$qd" | tr ' ' :) "
                done
            done
        done
        teardown
    done
    print_rows "$level"
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
