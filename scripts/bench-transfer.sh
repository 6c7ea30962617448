#!/usr/bin/env bash
# Streaming export/import through RAID 0, 5 and 6 on members in /dev/shm, side by
# side with reading (cat) and writing (dd) the same member files directly, in one
# run. Prints MB/s and the ratio raidlab/direct (time of direct / time of raidlab).
# Usage: scripts/bench-transfer.sh [MEMBER_MIB] (default 512)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p raidlab
R="$PWD/target/release/raidlab"
MIB=${1:-512}
dir=$(mktemp -d /dev/shm/raidlab-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir"

now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc -l; }
mbps() { echo "$1 / $2 / 1000000" | bc -l; }

printf "%-7s %-7s %12s %12s %8s\n" level op "raidlab MB/s" "direct MB/s" ratio
for spec in "0 4" "5 4" "6 6"; do
    set -- $spec
    level=$1 n=$2
    rm -f m* d* data
    members=$(seq -f m%g 0 $((n - 1)))
    "$R" create --level "$level" --chunk 512K --member-size "${MIB}M" $members >/dev/null
    size=$("$R" detail --json $members | sed -n 's/.*"array_size_bytes": \([0-9]*\).*/\1/p')
    head -c "$size" /dev/urandom > data
    member_bytes=$(( $(stat -c %s m0) ))
    total_members=$(( member_bytes * n ))

    # Import: raidlab writes data + parity through the engine.
    t0=$(now); "$R" import $members --input data 2>/dev/null; t1=$(now)
    t_imp=$(secs "$t0" "$t1")
    # Direct: write the same amount to fresh sparse files of the members' size with
    # dd from the data file (no parity computed; the members keep their array).
    t0=$(now)
    for m in $members; do
        truncate -s "$member_bytes" "d$m"
        dd if=data of="d$m" bs=4M count=$((member_bytes / 4194304)) conv=notrunc status=none
    done
    t1=$(now)
    t_dd=$(secs "$t0" "$t1")
    rm -f d*

    t0=$(now); "$R" export $members > /dev/null; t1=$(now)
    t_exp=$(secs "$t0" "$t1")
    t0=$(now); cat $members > /dev/null; t1=$(now)
    t_cat=$(secs "$t0" "$t1")

    printf "%-7s %-7s %12.0f %12.0f %8.2f\n" "raid$level" import "$(mbps "$size" "$t_imp")" "$(mbps "$total_members" "$t_dd")" "$(echo "$t_dd / $t_imp" | bc -l)"
    printf "%-7s %-7s %12.0f %12.0f %8.2f\n" "raid$level" export "$(mbps "$size" "$t_exp")" "$(mbps "$total_members" "$t_cat")" "$(echo "$t_cat / $t_exp" | bc -l)"
done
