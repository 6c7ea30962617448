#!/usr/bin/env bash
# Offline rebuild speed of two raidlab binaries side by side in one run: a
# RAID 5 of 4 member files in /dev/shm (chunk 512K, random contents) loses
# member 1, and each binary rebuilds a new member with the command a user runs
# (`raidlab add ... --new FILE --force`, which rebuilds before it returns).
# Each round runs OLD then NEW, the next NEW then OLD, so load drifts hit both
# alike. Prints each run, then the medians and NEW/OLD (MB/s of member data).
#
#   OLD=/path/old/raidlab NEW=target/release/raidlab scripts/bench-rebuild-ab.sh
#   ROUNDS=3 MIB=1024 (member size) LEVEL=5 MEMBERS=4
#   RT=1 (root): each rebuild runs under `chrt -f 50`, so that on a machine
#   shared with other work both binaries are measured as on a quiet one.
# Needs bc.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$(realpath "${OLD:?set OLD to the older raidlab binary}")
NEW=$(realpath "${NEW:-target/release/raidlab}")
ROUNDS=${ROUNDS:-3}
MIB=${MIB:-1024}
LEVEL=${LEVEL:-5}
MEMBERS=${MEMBERS:-4}
rt=(); [ "${RT:-0}" = 1 ] && rt=(chrt -f 50)
dir=$(mktemp -d /dev/shm/raidlab-rebuild-ab.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
all=(); for ((i = 0; i < MEMBERS; i++)); do all+=("m$i"); done
rest=("${all[@]/m1/}"); rest=(${rest[@]})   # every member but m1
"$OLD" create --level "$LEVEL" --chunk 512K --member-size "${MIB}M" "${all[@]}" >/dev/null
size=$("$OLD" detail --json "${all[@]}" | sed -n 's/.*"array_size_bytes": \([0-9]*\).*/\1/p')
head -c "$size" /dev/urandom | "$OLD" import "${all[@]}" 2>/dev/null
member_data=$("$OLD" detail --json "${all[@]}" | sed -n 's/.*"member_data_bytes": \([0-9]*\).*/\1/p')
"$OLD" fail "${all[@]}" --member m1 >/dev/null
"$OLD" remove "${all[@]}" --member m1 >/dev/null
declare -A secs   # secs[old|new]="s1 s2 ..."
run() { # NAME BINARY
    # A new member with its pages already allocated, holding no superblock.
    head -c "$(stat -c %s m1)" /dev/zero > n1
    local t0 t1
    t0=$(date +%s.%N); "${rt[@]}" "$2" add "${rest[@]}" --new n1 --force >/dev/null; t1=$(date +%s.%N)
    local t; t=$(echo "$t1 - $t0" | bc -l)
    secs[$1]="${secs[$1]:-} $t"
    printf "%s: %.3f s, %.0f MB/s (load %s)\n" "$1" "$t" "$(echo "$member_data / $t / 1000000" | bc -l)" "$(cut -d' ' -f1 /proc/loadavg)"
    "$2" fail "${rest[@]}" n1 --member n1 >/dev/null
    "$2" remove "${rest[@]}" n1 --member n1 >/dev/null
    rm -f n1
}
for ((r = 0; r < ROUNDS; r++)); do
    if ((r % 2 == 0)); then run old "$OLD"; run new "$NEW"; else run new "$NEW"; run old "$OLD"; fi
done
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mo=$(echo "${secs[old]}" | median); mn=$(echo "${secs[new]}" | median)
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; RAID $LEVEL, $MEMBERS x ${MIB} MiB members in /dev/shm; $ROUNDS rounds${rt:+, under ${rt[*]}}; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "median rebuild MB/s of member data: old %.0f, new %.0f, new/old %.2f\n" \
    "$(echo "$member_data / $mo / 1000000" | bc -l)" "$(echo "$member_data / $mn / 1000000" | bc -l)" "$(echo "$mo / $mn" | bc -l)"
