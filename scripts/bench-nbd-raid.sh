#!/usr/bin/env bash
# RAID 5, 6 and 10 exports of `raidlab serve` (members are files in /dev/shm)
# against btrfs with the same data profile on loop devices over files in
# /dev/shm, with the same fio jobs: through fio's nbd engine for raidlab, on a
# file in the mounted btrfs (libaio, O_DIRECT) for btrfs. Prints a Markdown
# table. Needs root (loop devices, mount), fio and btrfs-progs.
#
#   scripts/bench-nbd-raid.sh                 # 512M members, 5 s per job
#   MEMBER=512M RUNTIME=10 scripts/bench-nbd-raid.sh
#   LEVELS="6 10" JOBS="seq-read" scripts/bench-nbd-raid.sh   # a subset
#   ROUNDS=3 scripts/bench-nbd-raid.sh   # each job 3 times per side, alternating;
#                                        # the median of each side is reported
#
# Before the jobs, the test region is written in full on both sides, so that
# reads read data whatever jobs run (a raidlab array's members are sparse, and
# reading holes would flatter it).
#
# Each level is set up twice, once with raidlab's array made and filled first
# and once with btrfs's first, and the runs of both set-ups are pooled: on the
# 2-vCPU VM these figures come from, the side set up first read 10-15% slower,
# whichever it was (docs/benchmarks.md). The last two columns give the ratio
# of each set-up alone.
set -euo pipefail
cd "$(dirname "$0")/.."
MEMBER=${MEMBER:-512M}
RUNTIME=${RUNTIME:-5}
RAIDLAB=${RAIDLAB:-target/release/raidlab}
LEVELS=${LEVELS:-5 6 10}   # which levels to run
JOBS=${JOBS:-}             # only jobs whose names contain one of these words
ROUNDS=${ROUNDS:-1}        # runs per job, side and set-up order (median reported)
for t in fio mkfs.btrfs losetup python3; do
    command -v $t >/dev/null || { echo "bench-nbd-raid.sh: $t is not installed" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "bench-nbd-raid.sh: needs root for loop devices and mount" >&2; exit 2; }
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

jobs=(
    "seq-write-1M-QD8 write 1M 8"
    "seq-read-1M-QD8 read 1M 8"
    "rand-write-4K-QD1 randwrite 4k 1"
    "rand-read-4K-QD1 randread 4k 1"
    "rand-write-4K-QD32 randwrite 4k 32"
    "rand-read-4K-QD32 randread 4k 32"
)

parse='
import json, sys
text = sys.stdin.read()
j = json.loads(text[text.index("{"):])["jobs"][0]
side = j["read"] if j["read"]["io_bytes"] > 0 else j["write"]
# A run with I/O errors has no meaningful figure.
print("ERROR ERROR" if j["error"] else "%.1f %.0f" % (side["bw"] / 1024, side["iops"]))'

fio_nbd() { # rw bs qd
    fio --name=b --ioengine=nbd --uri="nbd+unix:///a?socket=$dir/s.sock" --rw="$1" --bs="$2" \
        --iodepth="$3" --size="${FILE_MB}M" --time_based --runtime="$RUNTIME" \
        --output-format=json | python3 -c "$parse"
}
median() { # "bw iops"... -> the median run by bandwidth; with an even count, the
            # mean of the middle two (ERROR if any failed)
    python3 -c '
import sys
runs = sys.argv[1:]
if any("ERROR" in r for r in runs):
    print("ERROR ERROR")
else:
    runs = sorted((tuple(map(float, r.split())) for r in runs))
    k = len(runs) // 2
    mid = [runs[k]] if len(runs) % 2 else [runs[k - 1], runs[k]]
    print("%.1f %.0f" % tuple(sum(v) / len(mid) for v in zip(*mid)))' "$@"
}
fio_btrfs() { # rw bs qd
    fio --name=b --ioengine=libaio --direct=1 --filename="$dir/mnt/f" --rw="$1" --bs="$2" \
        --iodepth="$3" --size="${FILE_MB}M" --time_based --runtime="$RUNTIME" \
        --output-format=json | python3 -c "$parse"
}

echo "fio $(fio --version), $(mkfs.btrfs --version | head -1), $(nproc) CPUs, members $MEMBER each in /dev/shm, ${RUNTIME}s per job, test file ${FILE_MB}M, median of $((2 * ROUNDS)) run(s) per side ($ROUNDS per set-up order)"
echo
echo "| level | job | raidlab | btrfs | raidlab / btrfs | raidlab set up first | btrfs set up first |"
echo "|---|---|---|---|---|---|---|"

setup_raidlab() { # level members...
    local level=$1; shift
    "$RAIDLAB" create -l "$level" -c 64K --member-size "$MEMBER" "$@" >/dev/null 2>&1
    # serve resyncs an array that is not known to be in sync before serving it;
    # do that here, outside the timed part (an error means it already is).
    "$RAIDLAB" resync "$@" >/dev/null 2>&1 || true
    "$RAIDLAB" serve --socket "$dir/s.sock" -N a "$@" 2>"$dir/serve.log" &
    srv=$!
    for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
    # Fill the test region.
    fio --name=fill --ioengine=nbd --uri="nbd+unix:///a?socket=$dir/s.sock" --rw=write \
        --bs=1M --iodepth=8 --size="${FILE_MB}M" >/dev/null
}
setup_btrfs() { # profile member-count
    loops=()
    for i in $(seq 0 $(($2 - 1))); do
        truncate -s "$MEMBER" "$dir/b$i"
        loops+=("$(losetup -f --show "$dir/b$i")")
    done
    mkfs.btrfs -q -f -d "$1" -m "$1" "${loops[@]}" >/dev/null 2>&1
    mount "${loops[0]}" "$dir/mnt"
    # Fill the test region (fio lays out the file itself).
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
ratio() { # a b -> "a/b" as "1.23x", n/a if either failed
    python3 -c "import sys; a, b = sys.argv[1:]; print('n/a' if 'ERROR' in (a, b) else '%.2fx' % (float(a) / max(float(b), 0.1)))" "$1" "$2"
}
# The figure compared: IOPS for 4K jobs, MiB/s for the others.
figure() { # bs "bw iops" -> the figure
    if [ "$1" = 4k ]; then echo "${2#* }"; else echo "${2% *}"; fi
}

selected=()
for j in "${jobs[@]}"; do
    read -r name _ <<<"$j"
    if [ -n "$JOBS" ]; then
        keep=""
        for w in $JOBS; do [[ $name == *"$w"* ]] && keep=1; done
        [ -n "$keep" ] || continue
    fi
    selected+=("$j")
done
# runs[order,job,side]: the runs of one set-up, space-separated "bw:iops" pairs
declare -A runs
side_median() { # job bs side orders... -> the figure of the median run of those set-ups
    local name=$1 bs=$2 side=$3 o x all=()
    shift 3
    for o in "$@"; do
        for x in ${runs[$o,$name,$side]}; do all+=("${x/:/ }"); done
    done
    figure "$bs" "$(median "${all[@]}")"
}

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
        for j in "${selected[@]}"; do
            read -r name rw bs qd <<<"$j"
            for _ in $(seq "$ROUNDS"); do
                runs[$order,$name,r]+="$(fio_nbd "$rw" "$bs" "$qd" | tr ' ' :) "
                runs[$order,$name,b]+="$(fio_btrfs "$rw" "$bs" "$qd" | tr ' ' :) "
            done
        done
        teardown
    done
    for j in "${selected[@]}"; do
        read -r name rw bs qd <<<"$j"
        unit="MiB/s"; [ "$bs" = 4k ] && unit=IOPS
        x=$(side_median "$name" "$bs" r raidlab-first btrfs-first)
        y=$(side_median "$name" "$bs" b raidlab-first btrfs-first)
        first=$(ratio "$(side_median "$name" "$bs" r raidlab-first)" "$(side_median "$name" "$bs" b raidlab-first)")
        last=$(ratio "$(side_median "$name" "$bs" r btrfs-first)" "$(side_median "$name" "$bs" b btrfs-first)")
        echo "| RAID ${level} | $name | $x $unit | $y $unit | $(ratio "$x" "$y") | $first | $last |"
    done
done
