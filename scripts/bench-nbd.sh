#!/usr/bin/env bash
# raidlab serve vs nbdkit's file plugin, serving the same file in /dev/shm over a
# Unix socket, measured with the same fio jobs through fio's nbd engine.
# Prints a Markdown table (bandwidth for 1M jobs, IOPS for 4K jobs, ratio
# raidlab / nbdkit). Needs fio and nbdkit (Debian: fio nbdkit).
#
#   scripts/bench-nbd.sh            # 1 GiB file, 10 s per job
#   SIZE=256M RUNTIME=5 scripts/bench-nbd.sh
#
# Both servers run at once on the same file (nbdkit takes no lock, raidlab's is
# advisory) and the jobs alternate between them, so a change in machine load hits
# both alike.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-1G}
RUNTIME=${RUNTIME:-10}
RAIDLAB=${RAIDLAB:-target/release/raidlab}
for t in fio nbdkit python3; do
    command -v $t >/dev/null || { echo "bench-nbd.sh: $t is not installed" >&2; exit 2; }
done
[ -x "$RAIDLAB" ] || cargo build --release -p raidlab

dir=$(mktemp -d /dev/shm/raidlab-bench-nbd.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

img=$dir/disk.img
# Allocated, not sparse: reads of holes would flatter whichever server skips them.
dd if=/dev/zero of="$img" bs=1M count=$(( $(numfmt --from=iec "$SIZE") >> 20 )) status=none

"$RAIDLAB" serve --plain --socket "$dir/raidlab.sock" "$img" 2>"$dir/raidlab.log" &
pids+=($!)
nbdkit --foreground --unix "$dir/nbdkit.sock" file "$img" 2>"$dir/nbdkit.log" &
pids+=($!)
for s in raidlab nbdkit; do
    for _ in $(seq 100); do [ -S "$dir/$s.sock" ] && break; sleep 0.1; done
done

# name rw bs iodepth
jobs=(
    "seq-read-1M-QD8 read 1M 8"
    "seq-write-1M-QD8 write 1M 8"
    "rand-read-4K-QD1 randread 4k 1"
    "rand-write-4K-QD1 randwrite 4k 1"
    "rand-read-4K-QD32 randread 4k 32"
    "rand-write-4K-QD32 randwrite 4k 32"
)

measure() { # socket rw bs qd -> "bw_MiBps iops"
    fio --name=b --ioengine=nbd --uri="nbd+unix:///?socket=$1" --rw="$2" --bs="$3" \
        --iodepth="$4" --size="$SIZE" --time_based --runtime="$RUNTIME" \
        --output-format=json | python3 -c '
import json, sys
text = sys.stdin.read()
# fio'"'"'s nbd engine prints a line before the JSON.
j = json.loads(text[text.index("{"):])["jobs"][0]
side = j["read"] if j["read"]["io_bytes"] > 0 else j["write"]
print("%.1f %.0f" % (side["bw"] / 1024, side["iops"]))'
}

echo "fio $(fio --version), nbdkit $(nbdkit --version | cut -d' ' -f2), $(nproc) CPUs, file $SIZE in /dev/shm, ${RUNTIME}s per job"
echo
echo "| job | raidlab | nbdkit file | raidlab / nbdkit |"
echo "|---|---|---|---|"
for j in "${jobs[@]}"; do
    read -r name rw bs qd <<<"$j"
    read -r rbw riops < <(measure "$dir/raidlab.sock" "$rw" "$bs" "$qd")
    read -r kbw kiops < <(measure "$dir/nbdkit.sock" "$rw" "$bs" "$qd")
    if [ "$bs" = 4k ]; then
        r="$riops IOPS"; k="$kiops IOPS"; ratio=$(python3 -c "print(f'{$riops / max($kiops, 1):.2f}x')")
    else
        r="$rbw MiB/s"; k="$kbw MiB/s"; ratio=$(python3 -c "print(f'{$rbw / max($kbw, 0.1):.2f}x')")
    fi
    echo "| $name | $r | $k | $ratio |"
done
