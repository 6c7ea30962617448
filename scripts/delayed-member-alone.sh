#!/usr/bin/env bash
# One member of sim-vs-real.sh's kind measured alone: fio straight on its
# loop device (O_DIRECT, io_uring, no raidlab), with nbdkit's log filter
# counting the requests that reach nbdkit by size. What it prints sets the
# nbdkit-hdd-seek preset's stack_latency_us (a 4 KiB request's completion
# time at QD1 less the 5 ms delay) and shows max_transfer_bytes holding (the
# pieces a large request arrives in: MAX_KB, the loop device's max_sectors_kb
# as sim-vs-real.sh sets it; MAX_KB= leaves the kernel's);
# crates/raidlab-sim/presets/devices.toml cites it.
#
#   scripts/delayed-member-alone.sh
#
# Needs root, fio, nbdkit (log, noparallel, delay and rate filters), nbdfuse
# (libnbd-bin), fuse3, python3, util-linux. Run it on a quiet machine: the
# latency it measures is this machine's stack.
set -euo pipefail
for t in fio nbdkit nbdfuse fusermount3 losetup python3; do
    command -v $t >/dev/null || { echo "delayed-member-alone.sh: $t is not installed (apt-get install fio nbdkit libnbd-bin fuse3 python3 util-linux)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "delayed-member-alone.sh: needs root (loop devices, FUSE mounts)" >&2; exit 2; }
DELAY_MS=5 RATE_MBPS=160 BURST_S=0.02 MAX_KB=${MAX_KB-512}   # sim-vs-real.sh's settings
dir=$(mktemp -d /dev/shm/raidlab-alone.XXXXXX)
loop=""
cleanup() {
    [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null || true
    fusermount3 -u -z "$dir/f" 2>/dev/null || true
    [ -f "$dir/k.pid" ] && kill "$(cat "$dir/k.pid")" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
truncate -s 512M "$dir/m"
mkdir -p "$dir/f"
nbdkit -P "$dir/k.pid" -U "$dir/k.sock" --filter=log --filter=noparallel --filter=delay --filter=rate \
    file "$dir/m" serialize=all-requests rdelay="${DELAY_MS}ms" wdelay="${DELAY_MS}ms" \
    rate="$((RATE_MBPS * 8))M" burstiness="$BURST_S" logfile="$dir/log"
setsid nbdfuse "$dir/f" --unix "$dir/k.sock" </dev/null >>"$dir/nbdfuse.log" 2>&1 &
for _ in $(seq 100); do [ -e "$dir/f/nbd" ] && break; sleep 0.05; done
loop=$(losetup -f --show --direct-io=on "$dir/f/nbd")
q=/sys/block/${loop#/dev/}/queue
[ -z "$MAX_KB" ] || echo "$MAX_KB" >"$q/max_sectors_kb"
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$loop: dio $(cat "/sys/block/${loop#/dev/}/loop/dio"), max_sectors_kb $(cat $q/max_sectors_kb), max_segments $(cat $q/max_segments)"
run() { # name rw bs depth
    local start
    start=$(wc -l <"$dir/log")
    fio --name="$1" --filename="$loop" --direct=1 --ioengine=io_uring --rw="$2" --bs="$3" \
        --iodepth="$4" --size=256M --runtime=4 --time_based --output-format=json >"$dir/out.json"
    python3 - "$dir/out.json" "$dir/log" "$start" "$1" "$DELAY_MS" <<'PY'
import collections, json, re, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] else j["write"]
sizes = collections.Counter()
for line in open(sys.argv[2]).readlines()[int(sys.argv[3]):]:
    m = re.search(r"(Read|Write) id=\d+ offset=0x[0-9a-f]+ count=0x([0-9a-f]+)", line)
    if m:
        sizes[int(m.group(2), 16) // 1024] += 1
mean = d["clat_ns"]["mean"] / 1e6
print("%-14s %7.1f IOPS %6.1f MiB/s  completion %.2f ms (%.0f us over the delay)  at nbdkit (KiB: count) %s"
      % (sys.argv[4], d["iops"], d["bw"] / 1024, mean, (mean - float(sys.argv[5])) * 1000,
         dict(sizes.most_common(3))))
PY
}
run 4k-read-qd1 randread 4k 1
run 4k-write-qd1 randwrite 4k 1
run 64k-read-qd1 read 64k 1
run 64k-write-qd1 write 64k 1
run 256k-write-qd1 write 256k 1
run 1m-write-qd1 write 1m 1
run 1m-read-qd1 read 1m 1
