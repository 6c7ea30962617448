#!/bin/bash
# Build (or reuse) the tiny Linux guest used by raidlab's md compatibility
# harness: a stock Debian bookworm kernel plus an initramfs holding
# busybox, mdadm, util-linux losetup and the md/raid kernel modules.
#
# Everything downloaded or built lives under $MDVM_CACHE
# (default: tests/mdvm/cache, git-ignored).  The result directory is keyed
# by the exact package versions, so a second run is a no-op.
#
# On success the last line of stdout is the directory holding
#   vmlinuz  initrd.img  versions.txt
# Exit status is non-zero (with a reason on stderr) if the guest cannot be
# built on this machine.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${MDVM_CACHE:-$HERE/cache}"
mkdir -p "$CACHE"
log() { echo "mdvm-build: $*" >&2; }
# set -e ends the script silently; say where (a CI run once failed with an
# empty message).
trap 'rc=$?; log "failed (exit $rc) at line $LINENO: $BASH_COMMAND"' ERR

export DEBIAN_FRONTEND=noninteractive

# apt-get may be busy (other jobs on the machine); wait for the lock.
apt_retry() {
    local i
    for i in $(seq 1 60); do
        if "$@" >>"$CACHE/apt.log" 2>&1; then return 0; fi
        if grep -q "Could not get lock\|Unable to acquire\|Unable to lock" "$CACHE/apt.log"; then
            : >"$CACHE/apt.log"; sleep 5; continue
        fi
        return 1
    done
    return 1
}

need_cmds=(qemu-system-x86_64 cpio mdadm losetup dpkg-deb)
missing=()
for c in "${need_cmds[@]}"; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
if [ ! -e /usr/bin/busybox ] || ! /usr/bin/busybox --list >/dev/null 2>&1 || \
   ldd /usr/bin/busybox >/dev/null 2>&1; then
    # we want the *static* busybox (busybox-static), which ldd rejects
    missing+=(busybox-static)
fi
if [ ${#missing[@]} -gt 0 ]; then
    log "installing host packages (missing: ${missing[*]})"
    if [ "$(id -u)" != 0 ]; then log "not root, cannot apt-get install"; exit 2; fi
    # One consistent set (scripts/apt-install.sh says why: a plain install of
    # qemu-system-x86 removes the image's newer qemu-utils).
    "$HERE/../../scripts/apt-install.sh" \
        qemu-system-x86 cpio busybox-static mdadm util-linux kmod xz-utils zstd >>"$CACHE/apt.log" 2>&1 || {
        log "apt-get install failed (see $CACHE/apt.log)"; exit 2; }
fi

# ---- pick the kernel: whatever bookworm's linux-image-amd64 points at ----
KPKG="$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')"
if [ -z "$KPKG" ]; then
    apt_retry apt-get update || true
    KPKG="$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')"
fi
[ -n "$KPKG" ] || { log "cannot determine the current linux-image-*-amd64 package"; exit 2; }
KVER_PKG="$(apt-cache policy "$KPKG" | awk '/Candidate:/{print $2}')"
MDADM_VER="$(dpkg-query -W -f='${Version}' mdadm)"
BB_VER="$(dpkg-query -W -f='${Version}' busybox-static)"
UL_VER="$(dpkg-query -W -f='${Version}' util-linux)"
INIT_SUM="$(cat "$HERE/init.sh" "$HERE/build.sh" | sha256sum | cut -c1-12)"
KEY="$(printf '%s\n' "$KPKG=$KVER_PKG" "mdadm=$MDADM_VER" "busybox=$BB_VER" "util-linux=$UL_VER" "init=$INIT_SUM" | sha256sum | cut -c1-16)"
OUT="$CACHE/guest-$KEY"
if [ -s "$OUT/vmlinuz" ] && [ -s "$OUT/initrd.img" ]; then
    log "reusing $OUT"
    echo "$OUT"; exit 0
fi

# ---- download + extract the kernel package ----
DEBS="$CACHE/debs"; mkdir -p "$DEBS"
deb="$(ls "$DEBS"/"${KPKG}"_*.deb 2>/dev/null | head -n1 || true)"
if [ -z "$deb" ] || ! dpkg-deb -f "$deb" Version | grep -qxF "$KVER_PKG"; then
    rm -f "$DEBS"/"${KPKG}"_*.deb
    log "downloading $KPKG $KVER_PKG"
    (cd "$DEBS" && apt_retry apt-get download "$KPKG") || { log "apt-get download $KPKG failed"; exit 2; }
    deb="$(ls "$DEBS"/"${KPKG}"_*.deb | head -n1)"
fi
TMP="$(mktemp -d "$CACHE/tmp.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
dpkg-deb -x "$deb" "$TMP/k"
KREL="$(ls "$TMP/k/lib/modules" | head -n1)"
MODDIR="$TMP/k/lib/modules/$KREL"
# The .deb does not ship modules.dep (postinst runs depmod); generate it.
[ -f "$MODDIR/modules.dep" ] || depmod -b "$TMP/k" "$KREL"
cp "$TMP/k/boot/vmlinuz-$KREL" "$TMP/vmlinuz"

# ---- resolve modules (with dependencies, in load order) ----
# crc32c_generic first: libcrc32c looks the algorithm up when it loads and
# there is no modprobe in the guest to fetch it on demand.
WANT="crc32c_generic loop virtio_pci virtio_blk md_mod linear raid0 raid1 raid10 raid456"
ROOT="$TMP/root"
mkdir -p "$ROOT"/{bin,sbin,dev,proc,sys,tmp,run,etc,lib/modules,mnt,results,ctl}
ORDER="$ROOT/lib/modules/load-order"; : >"$ORDER"
declare -A seen=()
modpath() { # name -> relative path from modules.dep ("-" and "_" are equivalent)
    local n="${1//-/_}"
    awk -F: -v n="$n" '{p=$1; b=p; sub(/.*\//,"",b); sub(/\.ko(\.xz|\.zst|\.gz)?$/,"",b); gsub(/-/,"_",b); if (b==n) {print p; exit}}' "$MODDIR/modules.dep"
}
builtin() {
    local n="${1//-/_}"
    [ -f "$MODDIR/modules.builtin" ] && sed 's/-/_/g' "$MODDIR/modules.builtin" | grep -q "/$n\.ko$"
}
add_mod() { # path
    local p="$1" d
    [ -n "${seen[$p]:-}" ] && return 0
    seen[$p]=1
    for d in $(awk -F: -v p="$p" '$1==p {print $2}' "$MODDIR/modules.dep"); do add_mod "$d"; done
    local base; base="$(basename "$p")"
    case "$base" in
        *.ko.xz) xz -dc "$MODDIR/$p" >"$ROOT/lib/modules/${base%.xz}"; base="${base%.xz}";;
        *.ko.zst) zstd -qdc "$MODDIR/$p" >"$ROOT/lib/modules/${base%.zst}"; base="${base%.zst}";;
        *.ko.gz) gzip -dc "$MODDIR/$p" >"$ROOT/lib/modules/${base%.gz}"; base="${base%.gz}";;
        *) cp "$MODDIR/$p" "$ROOT/lib/modules/$base";;
    esac
    echo "$base" >>"$ORDER"
}
for m in $WANT; do
    p="$(modpath "$m")"
    if [ -n "$p" ]; then add_mod "$p"
    elif builtin "$m"; then log "$m is built into the kernel"
    else log "module $m not found in $KREL"; exit 2; fi
done
log "modules: $(tr '\n' ' ' <"$ORDER")"

# ---- userland: static busybox + host mdadm/losetup with their libraries ----
cp /usr/bin/busybox "$ROOT/bin/busybox"
for a in $("$ROOT/bin/busybox" --list); do
    [ -e "$ROOT/bin/$a" ] || ln -s busybox "$ROOT/bin/$a"
done
copy_with_libs() {
    local bin="$1" dst="$2" lib
    cp -L "$bin" "$ROOT$dst"
    for lib in $(ldd "$bin" | awk '/=>/ {print $3} /^\s*\/lib/ {print $1}'); do
        [ -e "$lib" ] || continue
        mkdir -p "$ROOT$(dirname "$lib")"
        cp -L "$lib" "$ROOT$lib"
    done
}
rm -f "$ROOT/bin/losetup" "$ROOT/sbin/mdadm"
copy_with_libs "$(command -v mdadm)" /sbin/mdadm
copy_with_libs "$(command -v losetup)" /sbin/losetup
# x86-64 dynamic loader at its canonical path
mkdir -p "$ROOT/lib64"; cp -L /lib64/ld-linux-x86-64.so.2 "$ROOT/lib64/"
echo "root:x:0:0:root:/:/bin/sh" >"$ROOT/etc/passwd"
echo "root:x:0:" >"$ROOT/etc/group"
# Stop mdadm from auto-assembling / looking for configuration.
printf 'DEVICE /dev/null\nAUTO -all\n' >"$ROOT/etc/mdadm.conf"
mkdir -p "$ROOT/etc/mdadm"; cp "$ROOT/etc/mdadm.conf" "$ROOT/etc/mdadm/mdadm.conf"
install -m 0755 "$HERE/init.sh" "$ROOT/init"

(cd "$ROOT" && find . | cpio -o -H newc --quiet | gzip -1) >"$TMP/initrd.img"
{
    echo "kernel_package=$KPKG"
    echo "kernel_package_version=$KVER_PKG"
    echo "kernel_release=$KREL"
    echo "mdadm=$MDADM_VER"
    echo "busybox-static=$BB_VER"
    echo "util-linux=$UL_VER"
} >"$TMP/versions.txt"
mkdir -p "$OUT.new"
mv "$TMP/vmlinuz" "$TMP/initrd.img" "$TMP/versions.txt" "$OUT.new/"
rm -rf "$OUT"; mv "$OUT.new" "$OUT"
log "built $OUT ($(du -sh "$OUT" | cut -f1))"
echo "$OUT"
