#!/bin/bash
# Boot the mdvm guest once.
#
#   run.sh GUEST DATA_DISK [TIMEOUT_SECONDS]
#
# GUEST      a shell script (run as guest.sh) or a directory whose contents,
#            including a guest.sh, are handed to the guest on the control disk.
# DATA_DISK  raw image attached as /dev/vdc ($MDVM_DATA inside the guest);
#            the guest reads and writes it in place.
# TIMEOUT    wall-clock limit for the whole boot (default 900 s).
#
# Environment:
#   MDVM_OUT    directory receiving the guest's /results (default: a new
#               directory under tests/mdvm/work); its console.log holds the
#               serial console, accel.txt the accelerator used.
#   MDVM_ACCEL  kvm | tcg to skip the probe (default: probe KVM, else TCG).
#   MDVM_GUEST  directory from build.sh (default: run build.sh).
#   MDVM_MEM    guest RAM in MiB (default 1536).
#   MDVM_DRIVES more raw disks, space-separated paths (files or block
#               devices), attached after the data disk (/dev/vdd, /dev/vde,
#               ...) with the host page cache bypassed (cache=none), so the
#               guest's requests reach them as it makes them.
#
# Exit status: the guest script's exit status; 90 if no accelerator could
# boot the guest at all (the guest never printed MDVM-BOOTED), 91 if the
# guest booted but never reported MDVM-EXIT (timeout / crash), 92 if the
# results could not be read back.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GUEST="${1:?usage: run.sh GUEST DATA_DISK [TIMEOUT]}"
DATA="${2:?usage: run.sh GUEST DATA_DISK [TIMEOUT]}"
TIMEOUT="${3:-900}"
log() { echo "mdvm-run: $*" >&2; }

GDIR="${MDVM_GUEST:-}"
[ -n "$GDIR" ] || GDIR="$("$HERE/build.sh" | tail -n1)"
[ -s "$GDIR/vmlinuz" ] && [ -s "$GDIR/initrd.img" ] || { log "no guest kernel in $GDIR"; exit 90; }
command -v qemu-system-x86_64 >/dev/null || { log "qemu-system-x86_64 not installed"; exit 90; }
[ -f "$DATA" ] || { log "data disk $DATA missing"; exit 2; }

OUT="${MDVM_OUT:-}"
if [ -z "$OUT" ]; then mkdir -p "$HERE/work"; OUT="$(mktemp -d "$HERE/work/run.XXXXXX")"; fi
mkdir -p "$OUT"
CTL="$OUT/control.tar"; RES="$OUT/results.tar"
if [ -d "$GUEST" ]; then
    [ -f "$GUEST/guest.sh" ] || { log "$GUEST has no guest.sh"; exit 2; }
    tar -cf "$CTL" -C "$GUEST" .
else
    tmpd="$(mktemp -d)"; cp "$GUEST" "$tmpd/guest.sh"; tar -cf "$CTL" -C "$tmpd" .; rm -rf "$tmpd"
fi
# pad the control tar to whole sectors; make an empty results disk
truncate -s "%1M" "$CTL"
rm -f "$RES"; truncate -s 256M "$RES"

CONSOLE="$OUT/console.log"
QPID=""
cleanup() { if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then kill "$QPID" 2>/dev/null || true; fi; }
trap cleanup EXIT

start_qemu() { # accel
    local accel="$1" cpu
    : >"$CONSOLE"
    if [ "$accel" = kvm ]; then cpu=host; else cpu=max; fi
    local extra=() d
    # werror/rerror=report: a host disk that fills up (the data image is
    # sparse) must reach the guest as an I/O error that fails a line, not
    # pause the whole VM silently until the time limit (qemu's default for
    # ENOSPC is to stop the VM).
    local err=werror=report,rerror=report
    for d in ${MDVM_DRIVES:-}; do extra+=(-drive "file=$d,format=raw,if=virtio,cache=none,aio=threads,$err"); done
    qemu-system-x86_64 -machine q35,accel="$accel" -cpu "$cpu" -smp 2 -m "${MDVM_MEM:-1536}" \
        -nographic -no-reboot -nodefaults -serial "file:$CONSOLE" -monitor none \
        -kernel "$GDIR/vmlinuz" -initrd "$GDIR/initrd.img" \
        -append "console=ttyS0 panic=-1 quiet loglevel=3 raid=noautodetect" \
        -drive "file=$CTL,format=raw,if=virtio,cache=unsafe,$err" \
        -drive "file=$RES,format=raw,if=virtio,cache=unsafe,$err" \
        -drive "file=$DATA,format=raw,if=virtio,cache=unsafe,$err" \
        "${extra[@]}" </dev/null >"$OUT/qemu.$accel.out" 2>&1 &
    QPID=$!
}
wait_for() { # pattern seconds -> 0 when seen, 1 when qemu exited or timed out
    local pat="$1" deadline=$((SECONDS + $2))
    while [ $SECONDS -lt $deadline ]; do
        grep -q "$pat" "$CONSOLE" 2>/dev/null && return 0
        kill -0 "$QPID" 2>/dev/null || { grep -q "$pat" "$CONSOLE" 2>/dev/null; return $?; }
        sleep 0.5
    done
    return 1
}

t0=$SECONDS
booted=""
accels="${MDVM_ACCEL:-}"
# A failed KVM probe is remembered (per host kernel and guest build) for a
# day so repeated runs don't pay the probe timeout again; delete the file
# (or set MDVM_ACCEL=kvm) to probe again.
KVM_BROKEN="${MDVM_CACHE:-$HERE/cache}/kvm-failed-$(uname -r)-$(basename "$GDIR")"
if [ -z "$accels" ]; then
    if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then accels="kvm tcg"; else accels="tcg"; fi
    if [ -n "$(find "$KVM_BROKEN" -mmin -1440 2>/dev/null)" ]; then
        log "KVM failed to boot this guest earlier ($KVM_BROKEN); using TCG"
        accels="tcg"
    fi
fi
for accel in $accels; do
    # KVM boots in a few seconds when it works; a stock kernel that dies
    # under this host's KVM never prints the marker, so give up quickly.
    if [ "$accel" = kvm ]; then probe=${MDVM_KVM_PROBE:-25}; else probe=${MDVM_TCG_PROBE:-240}; fi
    tb=$SECONDS
    start_qemu "$accel"
    if wait_for MDVM-BOOTED "$probe"; then
        booted="$accel"; echo "$accel" >"$OUT/accel.txt"
        log "guest booted under $accel in $((SECONDS - tb)) s"
        echo "boot_seconds=$((SECONDS - tb))" >"$OUT/host-timing"
        break
    fi
    log "guest did not boot under $accel within ${probe}s"
    if [ "$accel" = kvm ]; then mkdir -p "$(dirname "$KVM_BROKEN")"; date >"$KVM_BROKEN"; fi
    cp "$CONSOLE" "$OUT/console.$accel.failed.log" 2>/dev/null || true
    cleanup; wait "$QPID" 2>/dev/null || true; QPID=""
done
if [ -z "$booted" ]; then
    log "guest never booted (tried: $accels); last console:"
    tail -n 40 "$OUT"/console.*.failed.log >&2 2>/dev/null || true
    exit 90
fi

remaining=$((TIMEOUT - (SECONDS - t0)))
[ $remaining -gt 10 ] || remaining=10
if ! wait_for MDVM-EXIT "$remaining"; then
    log "guest did not finish within ${TIMEOUT}s; console log follows"
    cat "$CONSOLE" >&2
    exit 91
fi
wait "$QPID" 2>/dev/null || true; QPID=""
echo "total_seconds=$((SECONDS - t0))" >>"$OUT/host-timing"
rc="$(sed -n 's/.*MDVM-EXIT \([0-9]*\).*/\1/p' "$CONSOLE" | tail -n1)"
mkdir -p "$OUT/results"
if ! tar -xf "$RES" -C "$OUT/results" 2>"$OUT/results.err"; then
    log "cannot read the guest's results disk"; cat "$CONSOLE" >&2; exit 92
fi
rm -f "$RES" "$CTL"
if [ "$rc" != 0 ]; then
    log "guest script exited with status $rc; console log follows"
    cat "$CONSOLE" >&2
fi
exit "$rc"
