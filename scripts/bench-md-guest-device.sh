#!/usr/bin/env bash
# What the mdvm guest's figures of bench-nbd-raid-devices.sh (MD=1) are worth
# against the host's, on one delayed member alone: the same hdd-seek device
# (a loop device over nbdfuse over nbdkit's noparallel and delay filters,
# nbd-delay-lib.sh) measured by fio 4K random writes with O_DIRECT from the
# host, then from inside the guest (the disk attached as md's members are,
# cache=none), then from the host again. The device serves one request at a
# time, so its IOPS are its service rate whoever asks; a guest figure above
# the host's means the guest's path or its clock, not md, made the
# difference. While the guest runs, the host samples the loop device's
# completed writes (/sys/block/loopN/stat) every 0.5 s, so the guest's
# figure is checked against the device's own count in host time.
#
# SPIN="0 1 2" (host only, GUEST=0 skips the guest) measures the device
# alone from the host while that many busy loops keep cores busy: whether
# the devices' user-space hops (loop, FUSE, nbdfuse, nbdkit) slow down when
# the CPUs are shared.
#
#   scripts/bench-md-guest-device.sh            # RUNTIME=10 QD=32 SEEK_MS=5.3
#   MDVM_CACHE=... RUNTIME=10 QD=1 scripts/bench-md-guest-device.sh
#   GUEST=0 SPIN="0 1 2 0 1 2" scripts/bench-md-guest-device.sh
#
# Needs root, fio, nbdkit, nbdfuse (libnbd-bin), fuse3, qemu (tests/mdvm).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${RUNTIME:-10}; QD=${QD:-32}; SEEK_MS=${SEEK_MS:-5.3}; SPIN=${SPIN:-}; GUEST=${GUEST:-1}
[ "$(id -u)" = 0 ] || { echo "bench-md-guest-device.sh: needs root (loop devices)" >&2; exit 2; }
for t in fio nbdkit nbdfuse fusermount3 qemu-system-x86_64 python3; do
    command -v $t >/dev/null || { echo "bench-md-guest-device.sh: $t is not installed" >&2; exit 2; }
done
# shellcheck source=scripts/nbd-delay-lib.sh
. scripts/nbd-delay-lib.sh
dir=$(mktemp -d /tmp/md-guest-device.XXXXXX)
loop=""
spinning=()
cleanup() {
    [ ${#spinning[@]} -eq 0 ] || kill "${spinning[@]}" 2>/dev/null || true
    [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null || true
    delayed_member_down "$dir" 0
    rm -rf "$dir" /dev/shm/mgd$$
}
trap cleanup EXIT
truncate -s 512M /dev/shm/mgd$$
delayed_member_up "$dir" 0 /dev/shm/mgd$$ "$SEEK_MS"
loop=$DELAYED_LOOP
dev=${loop#/dev/}
iops_of() { python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print("%.1f" % (j["write"]["iops"]))'; }
host_run() {
    fio --name=d --ioengine=libaio --direct=1 --filename="$loop" --size=128M --iodepth="$QD" \
        --time_based --rw=randwrite --bs=4k --runtime="$RUNTIME" --randrepeat=0 --randseed=7 \
        --output-format=json | iops_of
}
echo "device: $loop over nbdfuse over nbdkit (noparallel, delay ${SEEK_MS} ms); fio 4K randwrite QD$QD, ${RUNTIME}s; $(fio --version)"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
spin_stop() { [ ${#spinning[@]} -eq 0 ] || { kill "${spinning[@]}"; wait "${spinning[@]}" 2>/dev/null || true; }; spinning=(); }
for n in $SPIN; do
    for _ in $(seq "$n"); do (while :; do :; done) & spinning+=($!); done
    echo "host fio with $n core(s) kept busy by a spin loop: $(host_run) IOPS"
    spin_stop
done
[ "$GUEST" = 1 ] || exit 0
MDVM_GUEST=$(tests/mdvm/build.sh 2>"$dir/build.log" | tail -n1) && [ -s "$MDVM_GUEST/vmlinuz" ] || {
    echo "bench-md-guest-device.sh: the mdvm guest could not be built:" >&2; cat "$dir/build.log" >&2; exit 1
}
export MDVM_GUEST
mkdir -p "$dir/guest/lib"
cp -L "$(command -v fio)" "$dir/guest/fio"
for l in $(ldd "$(command -v fio)" | awk '/=>/ {print $3}'); do cp -L "$l" "$dir/guest/lib/"; done
cat >"$dir/guest/guest.sh" <<EOF
#!/bin/sh
set -eu
export LD_LIBRARY_PATH="\$PWD/lib"
w0=\$(awk '{print \$5}' /sys/block/vdd/stat)
"\$PWD/fio" --name=d --ioengine=libaio --direct=1 --filename=/dev/vdd --size=128M --iodepth=$QD \
    --time_based --rw=randwrite --bs=4k --runtime=$RUNTIME --randrepeat=0 --randseed=7 \
    --output-format=json >/results/fio.json
w1=\$(awk '{print \$5}' /sys/block/vdd/stat)
echo "\$w0 \$w1" >/results/writes
EOF
truncate -s 1M "$dir/data"
h1=$(host_run)
# The host's count of the device's completed writes, every 0.5 s, while
# the guest boots, runs fio and stops.
(while :; do echo "$(date +%s.%N) $(awk '{print $5}' "/sys/block/$dev/stat")"; sleep 0.5; done) >"$dir/samples" &
sampler=$!
MDVM_OUT="$dir/out" MDVM_MEM=1024 MDVM_DRIVES="$loop" tests/mdvm/run.sh "$dir/guest" "$dir/data" 900 >"$dir/run.log" 2>&1 || {
    kill $sampler; echo "bench-md-guest-device.sh: the guest failed:" >&2; tail -n 30 "$dir/run.log" >&2; exit 1
}
kill $sampler
g=$(iops_of <"$dir/out/results/fio.json")
read -r gw0 gw1 <"$dir/out/results/writes"
h2=$(host_run)
# The device's busiest RUNTIME-second window in host time while the guest
# ran: its fio run (boot and stop write nearly nothing to it).
busiest=$(python3 - "$dir/samples" "$RUNTIME" <<'PY'
import sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
t = float(sys.argv[2])
best = 0.0
for i, (t0, w0) in enumerate(rows):
    for t1, w1 in rows[i + 1:]:
        if t1 - t0 >= t:
            best = max(best, (w1 - w0) / (t1 - t0))
            break
print("%.1f" % best)
PY
)
echo "host fio (before):                    $h1 IOPS"
echo "guest fio on the same device:         $g IOPS ($((gw1 - gw0)) writes completed at the guest's disk)"
echo "the device in host time (busiest ${RUNTIME}s while the guest ran): $busiest writes/s"
echo "host fio (after):                     $h2 IOPS"
echo "guest accelerator: $(cat "$dir/out/accel.txt")"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
