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
set -euo pipefail
cd "$(dirname "$0")/.."
MEMBER=${MEMBER:-512M}
RUNTIME=${RUNTIME:-5}
RAIDLAB=${RAIDLAB:-target/release/raidlab}
LEVELS=${LEVELS:-5 6 10}   # which levels to run
JOBS=${JOBS:-}             # only jobs whose names contain one of these words
ROUNDS=${ROUNDS:-1}        # runs per job and side (median reported)
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
median() { # "bw iops"... -> the run with the median bandwidth (ERROR if any failed)
    python3 -c '
import sys
runs = sys.argv[1:]
if any("ERROR" in r for r in runs):
    print("ERROR ERROR")
else:
    runs.sort(key=lambda r: float(r.split()[0]))
    print(runs[len(runs) // 2])' "$@"
}
fio_btrfs() { # rw bs qd
    fio --name=b --ioengine=libaio --direct=1 --filename="$dir/mnt/f" --rw="$1" --bs="$2" \
        --iodepth="$3" --size="${FILE_MB}M" --time_based --runtime="$RUNTIME" \
        --output-format=json | python3 -c "$parse"
}

echo "fio $(fio --version), $(mkfs.btrfs --version | head -1), $(nproc) CPUs, members $MEMBER each in /dev/shm, ${RUNTIME}s per job, test file ${FILE_MB}M, median of $ROUNDS run(s) per side"
echo
echo "| level | job | raidlab | btrfs | raidlab / btrfs |"
echo "|---|---|---|---|---|"
for cfg in "raid5 5 4" "raid6 6 5" "raid10 10 4"; do
    read -r profile level n <<<"$cfg"
    [[ " $LEVELS " == *" $level "* ]] || continue
    # raidlab array
    members=()
    for i in $(seq 0 $((n - 1))); do members+=("$dir/r$i"); done
    "$RAIDLAB" create -l "$level" -c 64K --member-size "$MEMBER" "${members[@]}" >/dev/null 2>&1
    # serve resyncs an array that is not known to be in sync before serving it;
    # do that here, outside the timed part (an error means it already is).
    "$RAIDLAB" resync "${members[@]}" >/dev/null 2>&1 || true
    "$RAIDLAB" serve --socket "$dir/s.sock" -N a "${members[@]}" 2>"$dir/serve.log" &
    srv=$!
    for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
    # btrfs with the same profile
    loops=()
    for i in $(seq 0 $((n - 1))); do
        truncate -s "$MEMBER" "$dir/b$i"
        loops+=("$(losetup -f --show "$dir/b$i")")
    done
    mkfs.btrfs -q -f -d "$profile" -m "$profile" "${loops[@]}" >/dev/null 2>&1
    mount "${loops[0]}" "$dir/mnt"
    # Fill the test region on both sides (fio lays out the btrfs file itself).
    fio --name=fill --ioengine=nbd --uri="nbd+unix:///a?socket=$dir/s.sock" --rw=write \
        --bs=1M --iodepth=8 --size="${FILE_MB}M" >/dev/null
    fio --name=fill --ioengine=libaio --direct=1 --filename="$dir/mnt/f" --rw=write \
        --bs=1M --iodepth=8 --size="${FILE_MB}M" >/dev/null
    for j in "${jobs[@]}"; do
        read -r name rw bs qd <<<"$j"
        if [ -n "$JOBS" ]; then
            keep=""
            for w in $JOBS; do [[ $name == *"$w"* ]] && keep=1; done
            [ -n "$keep" ] || continue
        fi
        rs=(); bs_=()
        for _ in $(seq "$ROUNDS"); do
            rs+=("$(fio_nbd "$rw" "$bs" "$qd")")
            bs_+=("$(fio_btrfs "$rw" "$bs" "$qd")")
        done
        read -r rbw riops < <(median "${rs[@]}")
        read -r bbw biops < <(median "${bs_[@]}")
        if [ "$bs" = 4k ]; then
            r="$riops IOPS"; b="$biops IOPS"; x=$riops; y=$biops
        else
            r="$rbw MiB/s"; b="$bbw MiB/s"; x=$rbw; y=$bbw
        fi
        ratio=$(python3 -c "import sys; a, b = sys.argv[1:]; print('n/a' if 'ERROR' in (a, b) else '%.2fx' % (float(a) / max(float(b), 0.1)))" "$x" "$y")
        echo "| RAID ${level} | $name | $r | $b | $ratio |"
    done
    kill "$srv"; wait "$srv" 2>/dev/null || true; srv=""
    umount "$dir/mnt"
    for l in "${loops[@]}"; do losetup -d "$l"; done
    loops=()
    rm -f "$dir"/r* "$dir"/b* "$dir/s.sock"
done
