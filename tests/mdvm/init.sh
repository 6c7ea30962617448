#!/bin/sh
# /init of the mdvm guest (busybox sh).  Disks, in qemu command-line order:
#   /dev/vda  control disk: a tar archive holding guest.sh (+ any inputs)
#   /dev/vdb  results disk: /results is written here as a tar archive
#   /dev/vdc  data disk:    handed to guest.sh as $MDVM_DATA
# Console markers (parsed by run.sh):
#   MDVM-BOOTED           userspace is up (used by the KVM probe)
#   MDVM-EXIT <status>    guest.sh finished with <status>
export PATH=/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null || mdev -s
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
hostname mdvm
echo "MDVM-BOOTED $(cat /proc/sys/kernel/osrelease)"
echo 1 >/proc/sys/kernel/printk 2>/dev/null
while read -r m; do
    insmod "/lib/modules/$m" 2>/tmp/insmod.err || {
        grep -q "File exists" /tmp/insmod.err || { echo "insmod $m failed:"; cat /tmp/insmod.err; }
    }
done </lib/modules/load-order
i=0
while [ ! -b /dev/vdc ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
echo "MDVM-MODULES-LOADED"
mkdir -p /ctl /results
if ! tar -xf /dev/vda -C /ctl; then echo "MDVM-EXIT 125"; poweroff -f; fi
export MDVM_DATA=/dev/vdc MDVM_RESULTS=/results MDVM_CTL=/ctl
start=$(cut -d' ' -f1 /proc/uptime)
( cd /ctl && sh ./guest.sh; echo $? >/tmp/guest.rc ) 2>&1 | tee /results/guest.log
rc=$(cat /tmp/guest.rc 2>/dev/null || echo 126)
end=$(cut -d' ' -f1 /proc/uptime)
echo "boot_to_guest_s=$start guest_end_s=$end" >/results/timing
(cd /results && tar -cf /dev/vdb .) || echo "MDVM-RESULTS-WRITE-FAILED"
sync
echo "MDVM-EXIT $rc"
poweroff -f
