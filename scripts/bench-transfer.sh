#!/usr/bin/env bash
# Streaming export/import through RAID 0, 5 and 6 on members in /dev/shm, side by
# side with reading (cat) and writing (dd) the same member files directly, in one
# run. Each figure is the best of 3 runs; both sides write over memory that is
# already allocated (first-touch page allocation in a VM is slow and would
# otherwise dominate whichever side ran first).
# Prints MB/s of array data (raidlab) and of member bytes (direct), the ratio
# time(direct) / time(raidlab) (1.0: raidlab moved the array's contents as fast as
# plain tools moved the member files) and the plain ratio of the two MB/s figures
# (stricter for parity levels, whose members also hold parity).
# Usage: scripts/bench-transfer.sh [MEMBER_MIB] (default 512)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p raidlab
R="$PWD/target/release/raidlab"
MIB=${1:-512}
dir=$(mktemp -d /dev/shm/raidlab-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir"

# best_of3 CMD...: the shortest wall time of three runs, in seconds.
best_of3() {
    local best=""
    for _ in 1 2 3; do
        local t0 t1 t
        t0=$(date +%s.%N)
        "$@"
        t1=$(date +%s.%N)
        t=$(echo "$t1 - $t0" | bc -l)
        if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
    done
    echo "$best"
}
mbps() { echo "$1 / $2 / 1000000" | bc -l; }

do_import() { "$R" import $members --input data 2>/dev/null; }
do_dd() { for m in $members; do dd if=data of="d$m" bs=4M count=$((member_bytes / 4194304)) conv=notrunc status=none; done; }
do_export() { "$R" export $members > /dev/null; }
do_cat() { cat $members > /dev/null; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; members ${MIB} MiB in /dev/shm, chunk 512K"
printf "%-7s %-7s %12s %12s %10s %10s\n" level op "raidlab MB/s" "direct MB/s" "time ratio" "MB/s ratio"
for spec in "0 4" "5 4" "6 6"; do
    set -- $spec
    level=$1 n=$2
    rm -f m* d* data
    members=$(seq -f m%g 0 $((n - 1)))
    "$R" create --level "$level" --chunk 512K --member-size "${MIB}M" $members >/dev/null
    size=$("$R" detail --json $members | sed -n 's/.*"array_size_bytes": \([0-9]*\).*/\1/p')
    head -c "$size" /dev/urandom > data
    member_bytes=$(stat -c %s m0)
    total_members=$((member_bytes * n))
    do_import                           # allocate the members' pages
    for m in $members; do cp "$m" "d$m"; done   # and the direct side's

    t_imp=$(best_of3 do_import)
    t_dd=$(best_of3 do_dd)
    t_exp=$(best_of3 do_export)
    t_cat=$(best_of3 do_cat)
    row() { # op t_raidlab t_direct
        local a b
        a=$(mbps "$size" "$2"); b=$(mbps "$total_members" "$3")
        printf "%-7s %-7s %12.0f %12.0f %10.2f %10.2f\n" "raid$level" "$1" "$a" "$b" "$(echo "$3 / $2" | bc -l)" "$(echo "$a / $b" | bc -l)"
    }
    row import "$t_imp" "$t_dd"
    row export "$t_exp" "$t_cat"
done
