#!/bin/sh
# The md side of bench-nbd-raid-devices.sh (MD=1), run inside the mdvm guest
# (busybox sh, tests/mdvm): Linux md's own array over the same member devices
# the host's raidlab and btrfs sides use, attached as /dev/vdd, /dev/vde, ...
#
# ./manifest, first line: "LEVEL MEMBERS NJOBS FILE_MB RUNTIME"; then one
# line per run, "KEY CLIENT RW BS QD SEED" (CLIENT 1: one fio job over the first
# FILE_MB of the array; N: NJOBS jobs, each its own slice; SEED fio's
# randseed, the host sides' own), in the host's
# order. fio's JSON of run k goes to /results/k.json, "k KEY CLIENT R0 W0 R1
# W1" (the members' completed reads and writes before and after) to
# /results/index. fio and its libraries come with this script (./fio, ./lib).
set -eu
export LD_LIBRARY_PATH="$PWD/lib"
FIO="$PWD/fio"
read -r level n njobs file_mb runtime <manifest
devs=""
for x in d e f g h i j k; do
    [ "$(echo "$devs" | wc -w)" -lt "$n" ] || break
    [ -b "/dev/vd$x" ] || { echo "bench-md-guest: /dev/vd$x missing: $n members wanted"; exit 3; }
    devs="$devs /dev/vd$x"
done
# The members hold zeros (the host zeroed them), so parity is already right:
# --assume-clean skips a resync that would only rewrite it. No bitmap, as
# mdadm chooses below 100 GiB and raidlab's create does.
# shellcheck disable=SC2086
mdadm --create /dev/md0 --run --quiet --metadata=1.2 --level="$level" \
    --raid-devices="$n" --chunk=64 --assume-clean --bitmap=none $devs
{
    cat /proc/mdstat
    for f in stripe_cache_size group_thread_cnt preread_bypass_threshold; do
        [ -e "/sys/block/md0/md/$f" ] && echo "$f $(cat "/sys/block/md0/md/$f")"
    done
    uname -r
} >/results/md.txt
member_ios() { # requests the members completed so far: "reads writes"
    # shellcheck disable=SC2086
    for d in $devs; do cat "/sys/block/${d#/dev/}/stat"; done | awk '{r += $1; w += $5} END {print r, w}'
}
slice=$((file_mb / njobs))
k=0
tail -n +2 manifest | while read -r key client rw bs qd seed; do
    case $client in
        1) o="--size=${file_mb}M" ;;
        *) o="--numjobs=$njobs --group_reporting --size=${slice}M --offset_increment=${slice}M" ;;
    esac
    case $rw in *write) o="$o --end_fsync=1" ;; esac
    before=$(member_ios)
    # shellcheck disable=SC2086
    "$FIO" --name=b --ioengine=libaio --direct=1 --filename=/dev/md0 $o --iodepth="$qd" \
        --time_based --rw="$rw" --bs="$bs" --runtime="$runtime" --randrepeat=0 --randseed="$seed" --output-format=json >"/results/$k.json"
    echo "$k $key $client $before $(member_ios)" >>/results/index
    k=$((k + 1))
done
mdadm --stop /dev/md0 >/dev/null
