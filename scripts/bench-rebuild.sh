#!/usr/bin/env bash
# Rebuild speed on /dev/shm, side by side with copying one member file (cp), in one
# run: a RAID 5 of 4 members (chunk 512K; LEVEL=6 MEMBERS=6 for RAID 6) loses
# member 1, a new member is added and rebuilt by `raidlab add`. Also `raidlab
# rebuild --max-rate`. Best of 3 each.
# Usage: [LEVEL=5|6] [MEMBERS=N] [RAIDLAB=binary] [RT=1] scripts/bench-rebuild.sh [MEMBER_MIB] (default 512)
# RAIDLAB: a raidlab binary to measure instead of building this tree's (to put
# two versions side by side). RT=1 (root): both the rebuild and cp run under
# `chrt -f 50`, so that on a machine shared with other work (builds, tests) the
# two sides are measured as on a quiet one, not as the scheduler shares it out.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${RAIDLAB:-}" ]; then
    R=$(realpath "$RAIDLAB")
else
    cargo build --release --quiet -p raidlab
    R="$PWD/target/release/raidlab"
fi
rt=(); [ "${RT:-0}" = 1 ] && rt=(chrt -f 50)
MIB=${1:-512}
LEVEL=${LEVEL:-5}
MEMBERS=${MEMBERS:-4}
all=(); for ((i = 0; i < MEMBERS; i++)); do all+=("m$i"); done
rest=("${all[@]/m1/}"); rest=(${rest[@]})   # every member but m1
dir=$(mktemp -d /dev/shm/raidlab-rebuild.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
secs() { echo "$2 - $1" | bc -l; }

"$R" create --level "$LEVEL" --chunk 512K --member-size "${MIB}M" "${all[@]}" >/dev/null
size=$("$R" detail --json "${all[@]}" | sed -n 's/.*"array_size_bytes": \([0-9]*\).*/\1/p')
head -c "$size" /dev/urandom | "$R" import "${all[@]}" 2>/dev/null
member_data=$("$R" detail --json "${all[@]}" | sed -n 's/.*"member_data_bytes": \([0-9]*\).*/\1/p')
"$R" fail "${all[@]}" --member m1 >/dev/null
"$R" remove "${all[@]}" --member m1 >/dev/null
cp m1 spare-image   # a member-sized file to copy, and to overwrite in place
best_rb="" best_cp=""
for i in 1 2 3; do
    # A new member with its pages already allocated (like the copy's target below
    # after its first write), holding no superblock.
    head -c "$(stat -c %s m1)" /dev/zero > "n1.$i"
    t0=$(date +%s.%N); "${rt[@]}" "$R" add "${rest[@]}" --new "n1.$i" --force >/dev/null; t1=$(date +%s.%N)
    t=$(secs "$t0" "$t1"); [ -z "$best_rb" ] || [ "$(echo "$t < $best_rb" | bc)" = 1 ] && best_rb=$t
    "$R" fail "${rest[@]}" "n1.$i" --member "n1.$i" >/dev/null
    "$R" remove "${rest[@]}" "n1.$i" --member "n1.$i" >/dev/null
    rm -f "n1.$i"
    t0=$(date +%s.%N); "${rt[@]}" cp spare-image "copy.$i"; t1=$(date +%s.%N)
    t=$(secs "$t0" "$t1"); [ -z "$best_cp" ] || [ "$(echo "$t < $best_cp" | bc)" = 1 ] && best_cp=$t
    rm -f "copy.$i"
done
file_bytes=$(stat -c %s m1)
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; RAID $LEVEL, $MEMBERS x ${MIB} MiB members in /dev/shm; load $(cut -d' ' -f1-3 /proc/loadavg)${rt:+; under ${rt[*]}}"
printf "rebuild (raidlab add): %.0f MB/s of member data (%d bytes in %.3f s)\n" "$(echo "$member_data / $best_rb / 1000000" | bc -l)" "$member_data" "$best_rb"
printf "cp of one member file: %.0f MB/s (%d bytes in %.3f s)\n" "$(echo "$file_bytes / $best_cp / 1000000" | bc -l)" "$file_bytes" "$best_cp"
printf "ratio (MB/s rebuild / MB/s cp): %.2f\n" "$(echo "($member_data / $best_rb) / ($file_bytes / $best_cp)" | bc -l)"

# --max-rate: a rebuild limited to 100 MB/s.
head -c "$(stat -c %s m1)" /dev/zero > n2
t0=$(date +%s.%N); "$R" add "${rest[@]}" --new n2 --force --max-rate 100000000 >/dev/null; t1=$(date +%s.%N)
t=$(secs "$t0" "$t1")
printf "rebuild --max-rate 100000000: %.1f MB/s (%.1f%% of the limit)\n" "$(echo "$member_data / $t / 1000000" | bc -l)" "$(echo "100 * $member_data / $t / 100000000" | bc -l)"
