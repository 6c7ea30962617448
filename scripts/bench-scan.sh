#!/bin/bash
# Issue 16's speed figures, on sparse whole-disk images:
#  1. `raidlab scan DIR` of 12 GPT images of 4 GiB, each with a 256 MiB
#     partition 1 (a 12-way RAID 1, metadata 1.0, as NAS system arrays are) and
#     the rest as partition 2 (a 12-member RAID 6, metadata 1.2): target < 2 s.
#  2. `raidlab export` of a 2-member RAID 1 whose members are partition 2 of
#     two images, against the same member bytes as plain files: target >= 0.9x.
# Usage: scripts/bench-scan.sh [RAIDLAB_BINARY] [WORKDIR]
# (default: target/release/raidlab, a fresh directory under /tmp). Rounds
# alternate the order; the median of ROUNDS (default 5) is printed.
set -euo pipefail
RL="${1:-target/release/raidlab}"
W="${2:-$(mktemp -d /tmp/bench-scan.XXXXXX)}"
ROUNDS="${ROUNDS:-5}"
EXPORT_MIB="${EXPORT_MIB:-1024}"
mkdir -p "$W/scan" "$W/exp"
command -v sfdisk >/dev/null || { echo "needs sfdisk (package fdisk)"; exit 2; }

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }

# ---- 1. scan ----
p1=() p2=()
for i in $(seq 0 11); do
    img="$W/scan/disk$i.img"
    truncate -s 4G "$img"
    printf 'label: gpt\n,256MiB\n,\n' | sfdisk -q "$img"
    p1+=("$img@1"); p2+=("$img@2")
done
"$RL" create --level 1 --metadata 1.0 --name system --force "${p1[@]}" >/dev/null
"$RL" create --level 6 --name data "${p2[@]}" >/dev/null
"$RL" scan "$W/scan" | head -n 20
for r in $(seq 1 "$ROUNDS"); do secs "$RL" scan "$W/scan"; done | median | \
    awk '{printf "scan of 12 x 4 GiB images: median %.3f s\n", $1}'

# ---- 2. export through a partition vs a plain file ----
size=$((EXPORT_MIB * 1024 * 1024))
for i in 0 1; do
    truncate -s $((size + 64 * 1024 * 1024)) "$W/exp/img$i.img"
    printf 'label: gpt\n,16MiB\n,\n' | sfdisk -q "$W/exp/img$i.img"
done
"$RL" create --level 1 --name exp "$W/exp/img0.img@2" "$W/exp/img1.img@2" >/dev/null
asize=$("$RL" detail --json "$W/exp/img0.img@2" "$W/exp/img1.img@2" | sed -n 's/.*"array_size_bytes": *\([0-9]*\).*/\1/p')
head -c "$asize" /dev/urandom >"$W/exp/data.bin"
"$RL" import "$W/exp/img0.img@2" "$W/exp/img1.img@2" --input "$W/exp/data.bin" >/dev/null
rm -f "$W/exp/data.bin"
# The same member bytes as plain files: partition 2 copied out.
for i in 0 1; do
    start=$(sfdisk -J "$W/exp/img$i.img" | sed -n 's/.*"start": *\([0-9]*\).*/\1/p' | sed -n 2p)
    sectors=$(sfdisk -J "$W/exp/img$i.img" | sed -n 's/.*"size": *\([0-9]*\).*/\1/p' | sed -n 2p)
    dd if="$W/exp/img$i.img" of="$W/exp/plain$i.img" bs=1M iflag=skip_bytes,count_bytes \
        skip=$((start * 512)) count=$((sectors * 512)) 2>/dev/null
done
cmp -s <("$RL" export "$W/exp/img0.img@2" "$W/exp/img1.img@2") \
       <("$RL" export "$W/exp/plain0.img" "$W/exp/plain1.img") || { echo "the two exports differ"; exit 1; }
: >"$W/part.t"; : >"$W/plain.t"
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then
        secs "$RL" export "$W/exp/img0.img@2" "$W/exp/img1.img@2" -o /dev/null >>"$W/part.t"
        secs "$RL" export "$W/exp/plain0.img" "$W/exp/plain1.img" -o /dev/null >>"$W/plain.t"
    else
        secs "$RL" export "$W/exp/plain0.img" "$W/exp/plain1.img" -o /dev/null >>"$W/plain.t"
        secs "$RL" export "$W/exp/img0.img@2" "$W/exp/img1.img@2" -o /dev/null >>"$W/part.t"
    fi
done
tp=$(median <"$W/part.t"); tf=$(median <"$W/plain.t")
echo "$tp $tf $asize" | awk '{printf "export of %.0f MiB: through partitions %.3f s, plain files %.3f s: %.2fx\n", $3 / 1048576, $1, $2, $2/$1}'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); work dir $W"
