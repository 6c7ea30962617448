#!/bin/sh
# Guest side of the md compatibility matrix (busybox sh + mdadm 4.2).
# Copied to the control disk as guest.sh next to a `manifest`.
#
# $MDVM_DATA is one raw disk holding the pattern at offset 0 and a region
# ("slot") per array member.  Members are loop devices over those regions,
# so whatever md writes lands directly in the host's image.
#
# Manifest lines (fields separated by single spaces, '-' = none/default):
#   A NAME LEVEL LAYOUT CHUNK_KIB NDEV MEMBER_BYTES OFF1,OFF2,...
#       (MEMBER_BYTES may be one size per member, comma-separated, for
#       linear and multi-zone RAID 0; LEVEL may be `linear`)
#       md creates the array, lets the initial sync finish, writes the
#       first ARRAY_BYTES of the pattern, stops it; the examine output of
#       every member is saved in results/A/NAME/; then the guest assembles
#       it read-only and checks the bytes once more.
#   B NAME LEVEL NDEV MEMBER_BYTES OFF1,... ARRAY_BYTES OUT DEGRADED [FLAGS]
#       (MEMBER_BYTES one per member for linear (LEVEL -1) and multi-zone
#       RAID 0, as in A lines)
#       members written by raidlab: md assembles them (must be clean, not
#       degraded, no resync, ARRAY_BYTES long), a `check` must find
#       mismatch_cnt 0; then, read-only, each DEGRADED set (';'-separated
#       sets of ','-separated member indices) is left out.  Every read of
#       the whole array (complete first, then each degraded set) is copied
#       to the data disk at OUT + k * ARRAY_BYTES rounded up to 1 MiB
#       (OUT is MiB-aligned) for the host to compare byte for byte: a
#       plain copy is several times faster than hashing under TCG and
#       shows where a difference is.
#   R NAME NDEV MEMBER_BYTES OFFS SHIFT
#       md creates a RAID 5 (64K chunk), writes the pattern, fails and
#       removes member 1, writes the pattern from byte SHIFT over the whole
#       array, stops it; examine output in results/R/NAME/.
#   K NAME NDEV MEMBER_BYTES OFFS ARRAY_BYTES OUT KICK
#       md assembles all members; member KICK is a former member that must
#       stay out (degraded 1); the array is copied to OUT.
#   S NAME NDEV MEMBER_BYTES OFFS MIB
#       md creates a RAID 5 (512K chunk, --assume-clean: no initial sync),
#       then a sequential stream of MIB 1 MiB writes goes to it through the
#       page cache (dd, then sync); the members' sectors read and
#       written during the stream (from /sys/block/loopN/stat) are reported:
#       how md's stripe cache turns a sequential stream into whole stripes.
#   G NAME NDEV MEMBER_BYTES OFFS [MODE]
#       md's reshapes, stopped part-way for raidlab to read.  MODE `grow`
#       (default): md creates a RAID 5 of NDEV-1 members (64K chunk), writes
#       the pattern, adds the last slot and grows the array onto it with the
#       reshape slowed down, and stops it once a reshape position is
#       recorded.  `r10grow`: the same with a RAID 10 near=2 (md's RAID 10
#       reshape).  `chunk`: a RAID 5 of NDEV members, its chunk changed from
#       64K to 128K.  `r6`: a RAID 5 of NDEV-1 members converted to RAID 6
#       onto the last slot (`--grow --level=6`).  `r6p`: the same with
#       `--layout=preserve`, which md finishes (Q rebuilt onto the last slot,
#       left-symmetric-6, no reshape); the array is stopped when it is idle.
#       `r0grow`: a RAID 0 of NDEV-1 members grown onto the last one
#       (`--grow --raid-devices=NDEV --add`: mdadm takes it over as a RAID 4
#       whose parity member is missing and reshapes that); mdadm's
#       background process, which would take the finished RAID 4 back as a
#       RAID 0, is killed first, so what is left is md's RAID 4 mid-reshape.
#       `shrink`: a RAID 5 of NDEV members shrunk to NDEV-1 (md's backwards
#       reshape): `--grow --array-size` to NDEV-2 members' worth first, then
#       `--grow --raid-devices=NDEV-1 --backup-file` (mdadm 4.2 refuses the
#       shrink without a backup file: "Cannot set new_offset"); array_bytes
#       is the reduced size.  `shrinkroom`: the same shrink of members
#       grown down to `--size` 6 MiB first (room after the data), without a backup
#       file: mdadm moves the data offset up (new_offset) and the kernel
#       reshapes alone.  `r10shrink`: a RAID 10 near=2 of NDEV members
#       (all of each used, as mdadm makes it) shrunk to NDEV-1: the array
#       size first to what NDEV-1 members hold once mdadm's move of the data
#       offset up (one 64K chunk) comes out of the component size, then
#       `--grow --raid-devices=NDEV-1` (mdadm's RAID 10 shrink: no backup
#       file, reshape_direction backwards); array_bytes is the reduced size.
#       `r10shrinkbm`, `r10growbm`: r10shrink, r10grow with an internal
#       bitmap of 64K chunks; the bitmap md left on the first member is in
#       bitmap.md (mdadm -X).
#   W NAME LEVEL NDEV MEMBER_BYTES OFFS SHIFT REGIONS
#       a member leaves and md writes around it (re-add, issue 36): md
#       creates a RAID LEVEL (1 or 5, 64K chunk) with an internal bitmap of
#       64K chunks, writes the pattern, waits until the bitmap is clean on
#       disk, fails and removes member 1, then writes the pattern from byte
#       SHIFT + o over each REGION `o:len` (bytes, ','-separated, 64K
#       multiples) while degraded, stops it; reports md's dirty bits
#       (`mdadm -X` of member 0): what a re-add must resync.
#   E NAME NDEV MEMBER_BYTES OFFS ABYTES OUT READD
#       md re-adds a member raidlab removed and wrote around: md assembles
#       every member but READD (degraded 1), `mdadm --re-add`s it, waits
#       until it is in sync, and reports the bytes md wrote to it (its loop
#       device's write sectors) beside the bitmap's dirty bits; all members
#       must be active, a `check` must find mismatch_cnt 0, and the array is
#       copied to OUT for the host.
#   T NAME LEVEL NMEMBERS MEMBER_BYTES OFFS ABYTES OUT MISSING [force]
#       a torture run's final images (`raidlab sim torture --save-images`):
#       md assembles them (active members, then a journal device; `force`:
#       unclean and degraded, so with --force), degraded by MISSING roles,
#       clean, every member active, raidlab's size; copies
#       the array to OUT; a complete redundant array passes `check` with 0.
#   X NAME LEVEL LAYOUT CHUNK_KIB NDEV MEMBER_BYTES OFFS MDN SHIFT WRITES
#       md's write-back journal left by a crash of md itself (issue 36): md
#       creates a RAID LEVEL of NDEV members on /dev/mdMDN with the last
#       slot (OFFS has NDEV+1) as its write journal, writes the pattern over
#       the whole array (write-through), switches the journal to
#       write-back, then writes the pattern from byte SHIFT + o over each
#       WRITE `o:len[:out]` (bytes, ','-separated, 512-byte multiples; `out`:
#       wait until md has written to the members before going on; partial
#       stripes stay in md's r5c cache, whole ones go out in batches, a
#       partial page goes out at once) with O_DIRECT in pieces of at most a
#       page and an fsync each; the array stays running. Reports the sectors
#       written to the members and to the journal meanwhile.
#   CRASH
#       the guest ends as a power cut would leave md: the results are
#       written and MDVM-EXIT printed, then the kernel reboots at once
#       (sysrq b: no sync, no md stop; qemu runs with -no-reboot and exits).
#       Whatever md still held in memory (its cached stripes) never reaches
#       the members. Must be the last line.
#   SET a_verify 0|1   (default 1) whether A arrays are read back in the
#       guest too (the host does the real comparison).
# FLAGS of A and B lines (comma-separated, '-' = none) that change where the
# members are: `v1.0` / `v1.1` / `v0.90` = md metadata 1.0 / 1.1 / 0.90
# (default 1.2);
# `mbr6` / `gpt2` = each slot is a whole-disk image (table written by the
# host with sfdisk) and the member is its partition 6 (MBR, logical) or 2
# (GPT), as the kernel itself finds it (losetup -P, /dev/loopNpM).
# `reshaping` (B lines) = raidlab stopped a reshape part-way: md must find
# it under way right after assembly (sync_action reshape or frozen, mdadm
# carrying it on), finish it by itself, and be ARRAY_BYTES long afterwards.
# `backup=OFF:LEN` (B lines) = the mdadm backup file of a 0.90 restripe
# raidlab stopped, LEN bytes at OFF of the data disk: copied to a file and
# given to `mdadm --assemble --backup-file`; mdadm removes it at the end.
# Each config reports one line in results/results.txt:
#   RESULT NAME A|B PASS|FAIL detail...
# plus `NOTE` lines with measurements.
set -u
R="$MDVM_RESULTS"
RES="$R/results.txt"
: >"$RES"
D="$MDVM_DATA"
LOSETUP=/sbin/losetup           # busybox' own losetup lacks --sizelimit
MD=/dev/md0
SYS=/sys/block/md0/md
echo 1000000 >/proc/sys/dev/raid/speed_limit_min
echo 2000000 >/proc/sys/dev/raid/speed_limit_max
FAILS=0
A_VERIFY=1     # manifest "SET a_verify 0" skips md's own read-back of A arrays
PHASES=""
phase() { PHASES="$PHASES $1=$(echo "$(now) $PT" | awk '{printf "%.1f", $1-$2}')"; PT=$(now); echo "$1" >/tmp/mdvm.phase; }

now() { cut -d' ' -f1 /proc/uptime; }
note() { echo "NOTE $*" >>"$RES"; echo "NOTE $*"; }
result() { # name dir status detail...
    echo "RESULT $*" >>"$RES"; echo "RESULT $*"
    [ "$3" = PASS ] || FAILS=$((FAILS + 1))
}
loops=""
bases=""
META=1.2
PART=""
set_flags() { # FLAGS -> META, PART
    META=1.2; PART=""
    case ",$1," in *,v1.0,*) META=1.0 ;; *,v1.1,*) META=1.1 ;; *,v0.90,*) META=0.90 ;; esac
    case ",$1," in *,mbr6,*) PART=6 ;; *,gpt2,*) PART=2 ;; esac
}
attach() { # member_bytes(_csv) offsets_csv -> sets $loops (members) and $bases (loops)
    # One size for every member, or (linear / multi-zone RAID 0) one per member.
    loops=""; bases=""; k=0
    for off in $(echo "$2" | tr ',' ' '); do
        k=$((k + 1))
        size=$(echo "$1" | cut -d, -f"$k")   # a lone size has no comma: cut prints it whole
        if [ -n "$PART" ]; then
            l=$($LOSETUP -f --show -P --direct-io=on -o "$off" --sizelimit "$size" "$D") || return 1
            bases="$bases $l"
            i=0
            while [ ! -b "${l}p$PART" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
            [ -b "${l}p$PART" ] || { echo "no ${l}p$PART after losetup -P"; return 1; }
            loops="$loops ${l}p$PART"
        else
            l=$($LOSETUP -f --show --direct-io=on -o "$off" --sizelimit "$size" "$D") || return 1
            loops="$loops $l"; bases="$bases $l"
        fi
    done
}
detach() { for l in $bases; do $LOSETUP -d "$l" 2>/dev/null; done; loops=""; bases=""; }
stop_md() { mdadm --stop "$MD" >/dev/null 2>&1 || { sleep 1; mdadm --stop "$MD" >/dev/null 2>&1; }; }
wait_idle() { # seconds
    i=0
    while [ $i -lt $(($1 * 10)) ]; do
        a=$(cat "$SYS/sync_action" 2>/dev/null || echo idle)
        [ "$a" = idle ] && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
wait_insync() { # seconds: until md has no member missing and nothing runs
    # After `--grow --level=6` md starts the Q rebuild from its own thread, so
    # sync_action can still read idle for a moment after mdadm returns; wait
    # for `degraded` to reach 0 as well.
    i=0
    while [ $i -lt $(($1 * 10)) ]; do
        a=$(cat "$SYS/sync_action" 2>/dev/null || echo idle)
        d=$(cat "$SYS/degraded" 2>/dev/null || echo 0)
        [ "$a" = idle ] && [ "$d" = 0 ] && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
# Buffered writes through md's page cache crawl under TCG (~5 MB/s); O_DIRECT
# in large blocks is ~10x faster.  bsfor SIZE MAX: the largest power of two
# <= MAX dividing SIZE (array sizes are multiples of 4K here).
bsfor() {
    b=$2
    while [ $(($1 % b)) != 0 ] && [ "$b" -gt 512 ]; do b=$((b / 2)); done
    echo "$b"
}
pattern_sha() { # bytes
    c="$R/.sha.$1"
    [ -f "$c" ] || head -c "$1" "$D" | sha256sum | cut -d' ' -f1 >"$c"
    cat "$c"
}
examine_all() { # outfile
    : >"$1"
    for l in $loops; do mdadm --examine "$l" >>"$1" 2>&1; done
}
pick() { # "list" indices_csv -> the members NOT in indices
    out=""; idx=0
    for m in $1; do
        case ",$2," in *",$idx,"*) ;; *) out="$out $m";; esac
        idx=$((idx + 1))
    done
    echo "$out"
}

run_a() { # NAME LEVEL LAYOUT CHUNK NDEV MBYTES OFFS [FLAGS]
    name=$1 level=$2 layout=$3 chunk=$4 n=$5 mb=$6 offs=$7 flags=${8:--}
    dir="$R/A/$name"; mkdir -p "$dir"
    t0=$(now); PT=$t0; PHASES=""
    set_flags "$flags"
    attach "$mb" "$offs" || { result "$name" A FAIL "losetup failed"; detach; return; }
    opts="--metadata=$META --level=$level --raid-devices=$n"
    [ "$layout" = - ] || opts="$opts --layout=$layout"
    [ "$chunk" = - ] || opts="$opts --chunk=$chunk"
    case ",$flags," in *,bitmap,*) opts="$opts --bitmap=internal --bitmap-chunk=1M" ;; esac
    case ",$flags," in *,ppl,*) opts="$opts --consistency-policy=ppl" ;; esac
    devs=$loops
    case ",$flags," in *,journal,*)
        # the last slot is md's write journal, the others the members
        jl=$(echo "$loops" | awk '{print $NF}')
        devs=$(echo "$loops" | awk '{$NF=""; print}')
        opts="$opts --write-journal=$jl" ;;
    esac
    # shellcheck disable=SC2086
    if ! mdadm --create "$MD" $opts --name="$name" --run --quiet $devs >"$dir/create.log" 2>&1 </dev/null; then
        result "$name" A FAIL "mdadm --create $opts failed: $(tr '\n' ' ' <"$dir/create.log")"; detach; return
    fi
    cat /proc/mdstat >"$dir/mdstat.create"
    phase create
    wait_idle 300 || { result "$name" A FAIL "initial sync did not finish"; stop_md; detach; return; }
    phase sync
    size=$(blockdev --getsize64 "$MD")
    echo "$size" >"$dir/array_bytes"
    bs=$(bsfor "$size" 4194304)
    dd if="$D" of="$MD" bs="$bs" count=$((size / bs)) oflag=direct 2>"$dir/dd.log" || {
        result "$name" A FAIL "writing the pattern failed: $(tr '\n' ' ' <"$dir/dd.log")"; stop_md; detach; return; }
    sync
    blockdev --flushbufs "$MD"
    phase write
    # `mdfail`: md marks the second member faulty (it stays attached, stale).
    case ",$flags," in *,mdfail,*)
        second=$(echo $loops | awk '{print $2}')
        mdadm "$MD" --fail "$second" >"$dir/fail.log" 2>&1 || {
            result "$name" A FAIL "mdadm --fail $second failed: $(tr '\n' ' ' <"$dir/fail.log")"; stop_md; detach; return; }
        phase fail ;;
    esac
    # `badblocks`: md lists 8 sectors of the second member, 32 KiB into its
    # data area, as bad (sysfs takes device sectors); a write makes md
    # update the superblocks, which writes the log.
    case ",$flags," in *,badblocks,*)
        second=$(echo $loops | awk '{print $2}')
        doff=$(mdadm --examine "$second" | awk '/Data Offset/{print $4}')
        echo "$((doff + 64)) 8" >"$SYS/dev-$(basename "$second")/bad_blocks" 2>"$dir/bb.log" || {
            result "$name" A FAIL "cannot list a bad block: $(tr '\n' ' ' <"$dir/bb.log")"; stop_md; detach; return; }
        dd if="$D" of="$MD" bs=4096 count=1 oflag=direct conv=notrunc 2>>"$dir/bb.log"
        sync; sleep 1 ;;
    esac
    mdadm --detail "$MD" >"$dir/detail" 2>&1
    cat "$SYS/layout" >"$dir/sys_layout" 2>/dev/null
    stop_md
    phase stop
    i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
    case ",$flags," in *,badblocks,*)
        i=0; for l in $loops; do mdadm --examine-badblocks "$l" >"$dir/badblocks.$i" 2>&1; i=$((i + 1)); done ;;
    esac
    phase examine
    if [ "$A_VERIFY" = 0 ]; then
        result "$name" A PASS "array_bytes=$size seconds=$(echo "$(now) $t0" | awk '{printf "%.1f", $1-$2}')$PHASES"
        detach; return
    fi
    examine_all "$dir/.before"
    # read it back through md once more, read-only, from the members alone
    # shellcheck disable=SC2086
    if ! mdadm --assemble "$MD" --readonly --run $loops >"$dir/assemble.log" 2>&1; then
        result "$name" A FAIL "re-assembly failed: $(tr '\n' ' ' <"$dir/assemble.log")"; detach; return
    fi
    got=$(dd if="$MD" bs=1M iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
    stop_md
    examine_all "$dir/.after"
    want=$(pattern_sha "$size")
    if [ "$got" != "$want" ]; then
        result "$name" A FAIL "md read back sha256 $got, pattern prefix of $size bytes is $want"
    elif ! cmp -s "$dir/.before" "$dir/.after"; then
        result "$name" A FAIL "read-only re-assembly changed member superblocks"
    else
        phase verify
        result "$name" A PASS "array_bytes=$size seconds=$(echo "$(now) $t0" | awk '{printf "%.1f", $1-$2}')$PHASES"
    fi
    rm -f "$dir/.before" "$dir/.after"
    detach
}

copy_out() { # index -> copies $MD to OUT slot index
    cb=$(bsfor "$ABYTES" 1048576)
    dd if="$MD" of="$D" bs="$cb" count=$((ABYTES / cb)) iflag=direct oflag=direct \
        seek=$(((OUT_MIB + $1 * ASTRIDE_MIB) * (1048576 / cb))) 2>"$dir/copy.$1.log"
}
run_b() { # NAME LEVEL NDEV MBYTES OFFS ABYTES OUT DEGRADED [FLAGS]
    name=$1 level=$2 n=$3 mb=$4 offs=$5 abytes=$6 out=$7 degr=$8
    set_flags "${9:--}"
    OUT_MIB=$((out / 1048576)); ASTRIDE_MIB=$(((abytes + 1048575) / 1048576)); ABYTES=$abytes
    dir="$R/B/$name"; mkdir -p "$dir"
    t0=$(now); PT=$t0; PHASES=""
    attach "$mb" "$offs" || { result "$name" B FAIL "losetup failed"; detach; return; }
    i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
    phase examine
    # backup=OFF:LEN: the mdadm backup file raidlab's restripe of a 0.90
    # array left, LEN bytes at OFF of the data disk, which md must be given
    # to assemble (Grow_restart) and to carry the restripe on.
    bfile=""
    bk=$(echo ",${9:--}," | sed -n 's/.*,backup=\([0-9]*\):\([0-9]*\),.*/\1 \2/p')
    if [ -n "$bk" ]; then
        boff=${bk% *}; blen=${bk#* }
        bfile="$dir/backup"
        dd if="$D" of="$bfile" bs=512 skip=$((boff / 512)) count=$(((blen + 511) / 512)) 2>"$dir/backup.log" || {
            result "$name" B FAIL "cannot copy the backup file out of the data disk"; detach; return; }
        bfile="--backup-file=$bfile"
    fi
    # shellcheck disable=SC2086
    mdadm --assemble "$MD" --run $bfile $loops >"$dir/assemble.log" 2>&1; rc=$?
    # mdadm 4.2, resuming a reshape that needs its backup file, forks the
    # process that carries the reshape on, and the parent then reopens the
    # md device through the descriptor it closed before the fork and dies
    # of SIGSEGV (mdadm's own bug, fixed after 4.2 by 548e9b91 "Fix use
    # after close bug by closing after fork"): the array runs and the
    # child goes on. Taken as assembled only when that is what happened.
    st=$(cat "$SYS/array_state" 2>/dev/null || echo none)
    if [ "$rc" = 139 ] && [ -n "$bfile" ] && [ "$st" != none ] && [ "$st" != inactive ] && [ "$st" != clear ]; then
        note "$name: mdadm 4.2 died of SIGSEGV after forking the process that carries the reshape on (mdadm's 548e9b91 fixes it); the array runs ($st)"
    elif [ "$rc" != 0 ]; then
        result "$name" B FAIL "mdadm --assemble failed ($rc): $(tr '\n' ' ' <"$dir/assemble.log")"; detach; return
    fi
    cat /proc/mdstat >"$dir/mdstat"
    mdadm --detail "$MD" >"$dir/detail" 2>&1
    deg=$(cat "$SYS/degraded" 2>/dev/null || echo 0)
    rs=$(cat "$SYS/resync_start" 2>/dev/null || echo none)
    act=$(cat "$SYS/sync_action" 2>/dev/null || echo idle)
    size=$(blockdev --getsize64 "$MD")
    bad=""
    [ "$deg" = 0 ] || bad="$bad degraded=$deg"
    case ",${9:--}," in
    *,reshaping,*)
        # raidlab stopped a reshape part-way (killed or Ctrl-C): md must
        # carry it on from raidlab's checkpoint by itself and finish it.
        # The members must record it; md may be through it before the
        # first look (a small array, a RAID 10, which md then resyncs past
        # the old size: raid10_finish_reshape), so what counts is where md
        # ends: no reshape left, raidlab's size, clean.
        grep -q "Reshape pos'n" "$dir/examine.0" || bad="$bad no-reshape-recorded-before-assembly"
        echo "right after assembly: sync_action=$act resync_start=$rs" >"$dir/first-look"
        i=0
        while [ $i -lt 3000 ]; do
            a=$(cat "$SYS/sync_action" 2>/dev/null || echo idle)
            [ "$a" = idle ] && ! mdadm --detail "$MD" 2>/dev/null | grep -q "Reshape" && break
            sleep 0.1; i=$((i + 1))
        done
        [ $i -lt 3000 ] || bad="$bad reshape-did-not-finish"
        # Then clean: md's own resync after it (RAID 10) run to its end.
        i=0
        while [ $i -lt 3000 ]; do
            rs=$(cat "$SYS/resync_start" 2>/dev/null || echo none)
            a=$(cat "$SYS/sync_action" 2>/dev/null || echo idle)
            [ "$rs" = none ] && [ "$a" = idle ] && break
            sleep 0.1; i=$((i + 1))
        done
        [ $i -lt 3000 ] || bad="$bad resync_start=$rs(not-clean-after-the-reshape)"
        mdadm --detail "$MD" >"$dir/detail.reshaped" 2>&1
        # mdadm's process removes the backup file once it has carried the
        # reshape to its end (and only then).
        if [ -n "$bfile" ]; then
            i=0
            while [ -e "$dir/backup" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
            [ -e "$dir/backup" ] && bad="$bad mdadm-kept-the-backup-file(its-reshape-did-not-end)"
        fi
        size=$(blockdev --getsize64 "$MD")
        [ "$size" = "$abytes" ] || bad="$bad md-size-after-the-reshape=$size-raidlab-size=$abytes"
        phase reshape
        ;;
    *)
        [ "$rs" = none ] || bad="$bad resync_start=$rs(not-clean)"
        [ "$act" = idle ] || bad="$bad sync_action=$act-right-after-assembly"
        [ "$size" = "$abytes" ] || bad="$bad md-size=$size-raidlab-size=$abytes"
        ;;
    esac
    # A bitmap raidlab wrote must be taken up by md, not ignored.
    if grep -q "Internal Bitmap" "$dir/examine.0" && ! grep -q "Intent Bitmap : Internal" "$dir/detail"; then
        bad="$bad md-did-not-use-the-bitmap"
    fi
    # A partial parity log raidlab wrote must be taken up by md too.
    if grep -q "PPL :" "$dir/examine.0" && ! grep -q "Consistency Policy : ppl" "$dir/detail"; then
        bad="$bad md-did-not-use-the-ppl"
    fi
    # A write journal raidlab made must be taken up by md as its journal.
    if cat "$dir"/examine.* | grep -q "Device Role : Journal"; then
        grep -q "Consistency Policy : journal" "$dir/detail" || bad="$bad md-did-not-use-the-journal"
        grep -q "journal" "$dir/detail" || bad="$bad no-journal-device-in-detail"
    fi
    # leavesK: a shrink raidlab stopped, which md finishes with the K
    # members past the new count as spares (counted once md is through).
    leaves=0; case ",${9:--}," in *,leaves[0-9]*) leaves=$(echo ",$9," | sed 's/.*,leaves\([0-9]*\),.*/\1/') ;; esac
    if [ "$leaves" = 0 ]; then
        nact=$(grep -c 'active sync' "$dir/detail")
    else
        nact=$(grep -c 'active sync' "$dir/detail.reshaped")
    fi
    [ "$nact" = "$((n - leaves))" ] || bad="$bad active-members=$nact/$((n - leaves))"
    phase assemble
    wait_idle 300
    copy_out 0 || bad="$bad read-failed"
    phase read
    if [ "$level" != 0 ] && [ "$level" != -1 ]; then
        if [ -n "$bfile" ]; then
            # mdadm 4.2's process that carried a backup-file reshape on
            # (its parent died of SIGSEGV above) can leave its sync_max
            # limit behind, at which md's check waits for ever: kept for
            # the record, then lifted.
            for f in sync_min sync_max suspend_lo suspend_hi; do
                echo "$f $(cat "$SYS/$f" 2>/dev/null)"
            done >"$dir/limits"
            echo max >"$SYS/sync_max" 2>/dev/null || true
        fi
        echo check >"$SYS/sync_action"
        sleep 0.1
        wait_idle 120 || bad="$bad check-did-not-finish"
        mm=$(cat "$SYS/mismatch_cnt")
        echo "$mm" >"$dir/mismatch_cnt"
        [ "$mm" = 0 ] || bad="$bad mismatch_cnt=$mm"
        phase check
    fi
    stop_md
    examine_all "$dir/.before"
    if [ "$degr" != - ]; then
        k=1
        for set in $(echo "$degr" | tr ';' ' '); do
            sub=$(pick "$loops" "$set")
            # shellcheck disable=SC2086
            if ! mdadm --assemble "$MD" --readonly --run $sub >"$dir/assemble.missing-$set.log" 2>&1; then
                bad="$bad missing[$set]:assemble-failed:$(tr '\n' ' ' <"$dir/assemble.missing-$set.log")"
                k=$((k + 1)); continue
            fi
            d=$(cat "$SYS/degraded" 2>/dev/null || echo '?')
            w=$(echo "$set" | tr ',' ' ' | wc -w)
            [ "$d" = "$w" ] || bad="$bad missing[$set]:degraded=$d"
            copy_out "$k" || bad="$bad missing[$set]:read-failed"
            stop_md
            k=$((k + 1))
        done
        phase degraded
    fi
    examine_all "$dir/.after"
    cmp -s "$dir/.before" "$dir/.after" || bad="$bad read-only-assembly-changed-superblocks"
    rm -f "$dir/.before" "$dir/.after"
    if [ -z "$bad" ]; then
        result "$name" B PASS "array_bytes=$size degraded_sets=$degr seconds=$(echo "$(now) $t0" | awk '{printf "%.1f", $1-$2}')$PHASES"
    else
        result "$name" B FAIL "$bad"
    fi
    detach
}

run_t() { # NAME LEVEL NMEMBERS MBYTES OFFS ABYTES OUT MISSING [force]: a torture run's final images
    # The devices are the active members in role order, then the journal
    # device if any; MISSING roles have no member (a degraded end). md must
    # assemble them clean (the run stopped the array cleanly), degraded by
    # exactly MISSING, with every member active and raidlab's size, and read
    # the array (to OUT, for the host to hold to the run's reference read);
    # a complete array with redundancy must pass a `check` with 0 mismatches.
    name=$1 level=$2 n=$3 mb=$4 offs=$5 abytes=$6 out=$7 miss=$8 force=""
    # `force`: unclean and degraded (started forced after a power cut and
    # never rebuilt): md, like raidlab, starts it only when told to.
    [ "${9:--}" = force ] && force=--force
    set_flags -
    OUT_MIB=$((out / 1048576)); ASTRIDE_MIB=$(((abytes + 1048575) / 1048576)); ABYTES=$abytes
    dir="$R/T/$name"; mkdir -p "$dir"
    t0=$(now); PT=$t0; PHASES=""
    attach "$mb" "$offs" || { result "$name" T FAIL "losetup failed"; detach; return; }
    i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
    # shellcheck disable=SC2086
    if ! mdadm --assemble "$MD" --run $force $loops >"$dir/assemble.log" 2>&1; then
        result "$name" T FAIL "mdadm --assemble failed: $(tr '\n' ' ' <"$dir/assemble.log")"; detach; return
    fi
    phase assemble
    mdadm --detail "$MD" >"$dir/detail" 2>&1
    bad=""
    deg=$(cat "$SYS/degraded" 2>/dev/null || echo 0)
    rs=$(cat "$SYS/resync_start" 2>/dev/null || echo none)
    act=$(cat "$SYS/sync_action" 2>/dev/null || echo idle)
    size=$(blockdev --getsize64 "$MD")
    [ "$deg" = "$miss" ] || bad="$bad degraded=$deg-raidlab-missing=$miss"
    [ "$rs" = none ] || bad="$bad resync_start=$rs(not-clean)"
    [ "$act" = idle ] || bad="$bad sync_action=$act-right-after-assembly"
    [ "$size" = "$abytes" ] || bad="$bad md-size=$size-raidlab-size=$abytes"
    nact=$(grep -c 'active sync' "$dir/detail")
    [ "$nact" = "$n" ] || bad="$bad active-members=$nact/$n"
    if cat "$dir"/examine.* | grep -q "Device Role : Journal"; then
        grep -q "Consistency Policy : journal" "$dir/detail" || bad="$bad md-did-not-use-the-journal"
    fi
    copy_out 0 || bad="$bad read-failed"
    phase read
    if [ "$level" != 0 ] && [ "$miss" = 0 ]; then
        echo check >"$SYS/sync_action"
        sleep 0.1
        wait_idle 300 || bad="$bad check-did-not-finish"
        mm=$(cat "$SYS/mismatch_cnt")
        [ "$mm" = 0 ] || bad="$bad mismatch_cnt=$mm"
        phase check
    fi
    stop_md
    if [ -z "$bad" ]; then
        result "$name" T PASS "array_bytes=$size degraded=$deg seconds=$(echo "$(now) $t0" | awk '{printf "%.1f", $1-$2}')$PHASES"
    else
        result "$name" T FAIL "$bad"
    fi
    detach
}

run_c() { # NAME NDEV MBYTES OFFS ABYTES OUT MISSING: start a crashed PPL/journal array degraded
    name=$1 n=$2 mb=$3 offs=$4 abytes=$5 out=$6 miss=$7
    set_flags -
    OUT_MIB=$((out / 1048576)); ASTRIDE_MIB=$(((abytes + 1048575) / 1048576)); ABYTES=$abytes
    dir="$R/C/$name"; mkdir -p "$dir"
    t0=$(now); PT=$t0; PHASES=""
    attach "$mb" "$offs" || { result "$name" C FAIL "losetup failed"; detach; return; }
    i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
    sub=$(pick "$loops" "$miss")
    bad=""
    # shellcheck disable=SC2086
    if ! mdadm --assemble "$MD" --run $sub >"$dir/assemble.log" 2>&1; then
        result "$name" C FAIL "md would not start the dirty degraded PPL array: $(tr '\n' ' ' <"$dir/assemble.log")"; detach; return
    fi
    phase assemble
    mdadm --detail "$MD" >"$dir/detail" 2>&1
    grep -q "Consistency Policy : \(ppl\|journal\)" "$dir/detail" || bad="$bad md-did-not-use-the-ppl-or-journal"
    d=$(cat "$SYS/degraded" 2>/dev/null || echo '?')
    [ "$d" = 1 ] || bad="$bad degraded=$d"
    copy_out 0 || bad="$bad read-failed"
    phase read
    dmesg | grep -i 'raid\|ppl\|journal' | tail -20 >"$dir/dmesg"
    stop_md
    if [ -z "$bad" ]; then
        result "$name" C PASS "missing=$miss seconds=$(echo "$(now) $t0" | awk '{printf "%.1f", $1-$2}')$PHASES"
    else
        result "$name" C FAIL "$bad"
    fi
    detach
}

loop_writes() { # loop devices -> sectors each has written (/sys/block/loopN/stat field 7)
    for l in $1; do awk '{printf "%s ", $7}' "/sys/block/$(basename "$l")/stat"; done
}
run_x() { # NAME LEVEL LAYOUT CHUNK NDEV MBYTES OFFS MDN SHIFT WRITES: md's write-back journal, left running for CRASH
    name=$1 level=$2 layout=$3 chunk=$4 n=$5 mb=$6 offs=$7 xmd=/dev/md$8 shift=$9 writes=${10}
    xsys=/sys/block/md$8/md
    set_flags -
    dir="$R/X/$name"; mkdir -p "$dir"
    t0=$(now); PT=$t0; PHASES=""
    attach "$mb" "$offs" || { result "$name" X FAIL "losetup failed"; detach; return; }
    jl=$(echo "$loops" | awk '{print $NF}')
    devs=$(echo "$loops" | awk '{$NF=""; print}')
    # shellcheck disable=SC2086
    if ! mdadm --create "$xmd" --metadata=1.2 --level="$level" --layout="$layout" --chunk="$chunk" \
            --raid-devices="$n" --write-journal="$jl" --name="$name" --run --quiet $devs \
            >"$dir/create.log" 2>&1 </dev/null; then
        result "$name" X FAIL "mdadm --create failed: $(tr '\n' ' ' <"$dir/create.log")"; detach; return
    fi
    i=0
    while [ "$(cat "$xsys/sync_action" 2>/dev/null)" != idle ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i + 1)); done
    phase sync
    size=$(blockdev --getsize64 "$xmd")
    echo "$size" >"$dir/array_bytes"
    bs=$(bsfor "$size" 4194304)
    dd if="$D" of="$xmd" bs="$bs" count=$((size / bs)) oflag=direct conv=fsync 2>"$dir/dd.log" || {
        result "$name" X FAIL "writing the pattern failed: $(tr '\n' ' ' <"$dir/dd.log")"; detach; return; }
    phase write
    echo write-back >"$xsys/journal_mode" 2>"$dir/mode.log"
    mode=$(cat "$xsys/journal_mode" 2>/dev/null)
    case "$mode" in *"[write-back]"*) ;; *)
        result "$name" X FAIL "md did not take write-back: journal_mode reads '$mode' $(tr '\n' ' ' <"$dir/mode.log")"; detach; return ;;
    esac
    before=$(loop_writes "$loops")
    mdw0=$(awk '{print $5}' "/sys/block/md$8/stat")
    bad=""
    for w in $(echo "$writes" | tr ',' ' '); do
        o=${w%%:*} len=${w#*:}
        # `o:len:out`: md is to write this out before the next write (whole
        # stripes past its batch, which its reclaim thread takes on its
        # next round): wait until the members have taken writes.
        out=""; case "$len" in *:out) len=${len%:out}; out=1 ;; esac
        m0=$(loop_writes "$devs" | awk '{s=0; for (i=1;i<=NF;i++) s+=$i; print s}')
        # bs of a page: busybox dd maps a buffer that large page-aligned, but
        # mallocs a smaller one, whose O_DIRECT write fails and which it then
        # writes through the page cache without a word.
        dd if="$D" of="$xmd" bs=4096 skip=$((shift + o)) seek="$o" count="$len" \
            iflag=skip_bytes,count_bytes oflag=seek_bytes,direct conv=notrunc,fsync \
            2>>"$dir/dd.wb.log" || bad="$bad write-$o:$len-failed"
        [ -n "$out" ] || continue
        i=0
        while [ $i -lt 150 ]; do
            m=$(loop_writes "$devs" | awk '{s=0; for (i=1;i<=NF;i++) s+=$i; print s}')
            [ "$m" -gt "$m0" ] && break
            sleep 0.1; i=$((i + 1))
        done
        [ $i -lt 150 ] || bad="$bad md-wrote-nothing-of-$o:$len-out-in-15s"
    done
    after=$(loop_writes "$loops")
    mdw=$(($(awk '{print $5}' "/sys/block/md$8/stat") - mdw0))
    note "$name: md took $mdw write requests; logical block size $(cat /sys/block/md$8/queue/logical_block_size)"
    phase writeback
    echo "$before" >"$dir/sectors.before"; echo "$after" >"$dir/sectors.after"
    mdadm --detail "$xmd" >"$dir/detail" 2>&1
    i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
    # What md wrote while in write-back: the members (all but the last) and
    # the journal (the last), in sectors.
    set -- $before; b="$*"
    set -- $after
    k=0 mem=0 jw=0
    for a in "$@"; do
        k=$((k + 1)); p=$(echo "$b" | cut -d' ' -f"$k")
        if [ "$k" -le "$n" ]; then mem=$((mem + a - p)); else jw=$((jw + a - p)); fi
    done
    note "$name: in write-back md wrote $mem sectors to the members and $jw to the journal"
    if [ -z "$bad" ]; then
        result "$name" X PASS "array_bytes=$size member_sectors=$mem journal_sectors=$jw seconds=$(echo "$(now) $t0" | awk '{printf "%.1f", $1-$2}')$PHASES"
    else
        result "$name" X FAIL "$bad"
    fi
    # left running (no stop, no detach): CRASH ends the guest under it
    loops=""; bases=""
}
crash() { # the guest ends with md's arrays running: what only md's memory held is lost
    note "crashing with md running: $(cat /proc/mdstat | tr '\n' ' ')"
    echo "DONE fails=$FAILS" >>"$RES"
    # As init.sh would, but only the results disk is written and flushed: a
    # `sync` or md stop would be a clean shutdown, not a crash.
    (cd "$R" && tar -cf /dev/vdb .) || echo "MDVM-RESULTS-WRITE-FAILED"
    blockdev --flushbufs /dev/vdb
    rc=0; [ "$FAILS" = 0 ] || rc=1
    echo "MDVM-EXIT $rc"
    # the console line must be out before the reset
    sleep 1
    echo 1 >/proc/sys/kernel/sysrq
    echo b >/proc/sysrq-trigger
    sleep 10
    echo "MDVM-CRASH-FAILED: the kernel did not reboot on sysrq b"
    poweroff -f
}
run_r() { # NAME NDEV MBYTES OFFS SHIFT: md fails and removes member 1, then writes
    # RAID 5, 64K chunk: the pattern from offset 0 of the data disk first,
    set_flags -
    # then (member 1 failed and removed) the pattern from byte SHIFT, so the
    # removed member holds data that is out of date everywhere.
    name=$1 n=$2 mb=$3 offs=$4 shift=$5
    dir="$R/R/$name"; mkdir -p "$dir"
    t0=$(now); PT=$t0; PHASES=""
    attach "$mb" "$offs" || { result "$name" R FAIL "losetup failed"; detach; return; }
    # shellcheck disable=SC2086
    if ! mdadm --create "$MD" --metadata=1.2 --level=5 --chunk=64 --raid-devices="$n" --name="$name" --run --quiet $loops >"$dir/create.log" 2>&1 </dev/null; then
        result "$name" R FAIL "mdadm --create failed: $(tr '\n' ' ' <"$dir/create.log")"; detach; return
    fi
    wait_idle 300 || { result "$name" R FAIL "initial sync did not finish"; stop_md; detach; return; }
    size=$(blockdev --getsize64 "$MD")
    echo "$size" >"$dir/array_bytes"
    bs=$(bsfor "$size" 4194304)
    dd if="$D" of="$MD" bs="$bs" count=$((size / bs)) oflag=direct 2>"$dir/dd1.log" || {
        result "$name" R FAIL "first write failed"; stop_md; detach; return; }
    second=$(echo $loops | awk '{print $2}')
    { mdadm "$MD" --fail "$second" && mdadm "$MD" --remove "$second"; } >"$dir/remove.log" 2>&1 || {
        result "$name" R FAIL "fail/remove: $(tr '\n' ' ' <"$dir/remove.log")"; stop_md; detach; return; }
    dd if="$D" of="$MD" bs="$bs" count=$((size / bs)) skip=$((shift / bs)) oflag=direct 2>"$dir/dd2.log" || {
        result "$name" R FAIL "second write failed"; stop_md; detach; return; }
    sync
    mdadm --detail "$MD" >"$dir/detail" 2>&1
    stop_md
    i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
    result "$name" R PASS "array_bytes=$size seconds=$(echo "$(now) $t0" | awk '{printf "%.1f", $1-$2}')"
    detach
}

run_k() { # NAME NDEV MBYTES OFFS ABYTES OUT KICK: md must leave member KICK out
    # All members are given to md; member KICK is a former member (failed and
    set_flags -
    # removed, out of date). md must assemble the others degraded, never take
    # KICK in, and read the array (copied to OUT for the host to compare).
    name=$1 n=$2 mb=$3 offs=$4 abytes=$5 out=$6 kick=$7
    OUT_MIB=$((out / 1048576)); ASTRIDE_MIB=$(((abytes + 1048575) / 1048576)); ABYTES=$abytes
    dir="$R/K/$name"; mkdir -p "$dir"
    attach "$mb" "$offs" || { result "$name" K FAIL "losetup failed"; detach; return; }
    i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
    bad=""
    # shellcheck disable=SC2086
    if ! mdadm --assemble "$MD" --run $loops >"$dir/assemble.log" 2>&1; then
        result "$name" K FAIL "mdadm --assemble failed: $(tr '\n' ' ' <"$dir/assemble.log")"; detach; return
    fi
    mdadm --detail "$MD" >"$dir/detail" 2>&1
    d=$(cat "$SYS/degraded" 2>/dev/null || echo '?')
    [ "$d" = 1 ] || bad="$bad degraded=$d(md-took-the-former-member-in)"
    kl=$(echo $loops | awk -v k=$((kick + 1)) '{print $k}')
    grep -w "$kl" "$dir/detail" | grep -q "active sync" && bad="$bad former-member-active"
    copy_out 0 || bad="$bad read-failed"
    stop_md
    if [ -z "$bad" ]; then
        result "$name" K PASS "degraded=$d"
    else
        result "$name" K FAIL "$bad :: $(tr '\n' ' ' <"$dir/assemble.log")"
    fi
    detach
}

member_sectors() { # field (3: sectors read, 7: written) summed over $loops
    t=0
    for l in $loops; do
        v=$(awk -v f="$1" '{print $f}' "/sys/block/${l#/dev/}/stat")
        t=$((t + v))
    done
    echo $t
}

run_s() { # NAME NDEV MBYTES OFFS MIB: member I/O of a sequential write stream
    name=$1 n=$2 mb=$3 offs=$4 mib=$5
    dir="$R/S/$name"; mkdir -p "$dir"
    attach "$mb" "$offs" || { result "$name" S FAIL "losetup failed"; detach; return; }
    # shellcheck disable=SC2086
    if ! mdadm --create "$MD" --metadata=1.2 --level=5 --chunk=512 --raid-devices="$n" --assume-clean --run --quiet $loops >"$dir/create.log" 2>&1 </dev/null; then
        result "$name" S FAIL "mdadm --create failed: $(tr '\n' ' ' <"$dir/create.log")"; detach; return
    fi
    cat "$SYS/stripe_cache_size" >"$dir/stripe_cache_size" 2>/dev/null
    r0=$(member_sectors 3); w0=$(member_sectors 7)
    { dd if="$D" of="$MD" bs=1048576 count="$mib" && sync; } 2>"$dir/dd.log" || {
        result "$name" S FAIL "write failed: $(tr '\n' ' ' <"$dir/dd.log")"; stop_md; detach; return; }
    r1=$(member_sectors 3); w1=$(member_sectors 7)
    stop_md
    result "$name" S PASS "read_sectors=$((r1 - r0)) write_sectors=$((w1 - w0)) stripe_cache_size=$(cat "$dir/stripe_cache_size" 2>/dev/null || echo '?')"
    detach
}

dirty_bits() { # member -> md's count of dirty bits in its bitmap (mdadm -X), or ?
    # md writes the bitmap below the member's page cache: drop what an
    # earlier read left there, or mdadm reads stale bits.
    blockdev --flushbufs "$1" 2>/dev/null
    mdadm -X "$1" 2>/dev/null | sed -n 's/.* \([0-9]*\) dirty.*/\1/p' | head -n1 | grep . || echo '?'
}
run_w() { # NAME LEVEL NDEV MBYTES OFFS SHIFT REGIONS: md writes around a removed member
    name=$1 level=$2 n=$3 mb=$4 offs=$5 shift=$6 regions=$7
    set_flags -
    dir="$R/W/$name"; mkdir -p "$dir"
    t0=$(now); PT=$t0; PHASES=""
    attach "$mb" "$offs" || { result "$name" W FAIL "losetup failed"; detach; return; }
    opts="--metadata=1.2 --level=$level --raid-devices=$n --bitmap=internal --bitmap-chunk=64K"
    [ "$level" = 1 ] || opts="$opts --chunk=64"
    # shellcheck disable=SC2086
    if ! mdadm --create "$MD" $opts --name="$name" --run --quiet $loops >"$dir/create.log" 2>&1 </dev/null; then
        result "$name" W FAIL "mdadm --create $opts failed: $(tr '\n' ' ' <"$dir/create.log")"; detach; return
    fi
    wait_idle 300 || { result "$name" W FAIL "initial sync did not finish"; stop_md; detach; return; }
    # md clears bits a second daemon pass after the writes end; one second
    # a pass instead of five.
    echo 1 >"$SYS/bitmap/time_base" 2>/dev/null
    size=$(blockdev --getsize64 "$MD")
    bs=$(bsfor "$size" 4194304)
    dd if="$D" of="$MD" bs="$bs" count=$((size / bs)) oflag=direct 2>"$dir/dd1.log" || {
        result "$name" W FAIL "writing the pattern failed"; stop_md; detach; return; }
    sync
    phase write
    first=$(echo $loops | awk '{print $1}')
    i=0
    while [ "$(dirty_bits "$first")" != 0 ] && [ $i -lt 120 ]; do sleep 0.5; i=$((i + 1)); done
    clean=$(dirty_bits "$first")
    phase bitmap-clean
    second=$(echo $loops | awk '{print $2}')
    { mdadm "$MD" --fail "$second" && mdadm "$MD" --remove "$second"; } >"$dir/remove.log" 2>&1 || {
        result "$name" W FAIL "fail/remove: $(tr '\n' ' ' <"$dir/remove.log")"; stop_md; detach; return; }
    for r in $(echo "$regions" | tr ',' ' '); do
        o=${r%%:*} l=${r#*:}
        dd if="$D" of="$MD" bs=65536 skip=$(((shift + o) / 65536)) seek=$((o / 65536)) \
            count=$((l / 65536)) oflag=direct conv=notrunc 2>>"$dir/dd2.log" || {
            result "$name" W FAIL "degraded write $r failed"; stop_md; detach; return; }
    done
    sync
    mdadm --detail "$MD" >"$dir/detail" 2>&1
    stop_md
    phase degraded-write
    dirty=$(dirty_bits "$first")
    mdadm -X "$first" >"$dir/bitmap.0" 2>&1
    i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
    result "$name" W PASS "array_bytes=$size dirty=$dirty dirty_before_fail=$clean seconds=$(echo "$(now) $t0" | awk '{printf "%.1f", $1-$2}')$PHASES"
    detach
}

run_m() { # NAME LEVEL NDEV MBYTES OFFS SIZE_KIB OP: md grows an array in place
    # OP: size (--size=max), bitmap (--bitmap=internal, 64K chunks),
    # raid1add (a RAID 1 of NDEV-1 mirrors grows to NDEV with the last device),
    # raid0add (the same for a RAID 0: md reshapes it as a RAID 4 without
    # parity and takes it back as a RAID 0), raid10add (the same for a
    # RAID 10 near=2: md's RAID 10 reshape, then its resync of the new
    # space), r1to5 (a RAID 1 of 2 taken over as a RAID 5 of 2),
    # chunk (--chunk=256 of a 64K-chunk array) or layout
    # (--layout=right-asymmetric): reshapes over the same members;
    # size-ppl and size-journal (a RAID 5 with md's partial parity log, or
    # of NDEV-1 members with the last device as its write journal: md must
    # refuse --size=max, the array left as it was, md's message recorded).
    name=$1 level=$2 n=$3 mb=$4 offs=$5 kib=$6 op=$7
    set_flags -
    dir="$R/M/$name"; mkdir -p "$dir"
    t0=$(now); PT=$t0; PHASES=""
    attach "$mb" "$offs" || { result "$name" M FAIL "losetup failed"; detach; return; }
    devs=$loops; k=$n
    if [ "$op" = raid1add ] || [ "$op" = raid0add ] || [ "$op" = raid10add ] || [ "$op" = size-journal ]; then
        k=$((n - 1)); devs=$(echo $loops | cut -d' ' -f1-$k); extra=$(echo $loops | cut -d' ' -f$n)
    fi
    opts="--metadata=1.2 --level=$level --raid-devices=$k"
    # md sizes a RAID 0 from its members (mdadm refuses to grow one whose
    # members hold more than its size uses).
    [ "$level" = 0 ] || opts="$opts --size=$kib"
    [ "$level" = 1 ] || opts="$opts --chunk=64"
    [ "$op" = size ] && [ "$level" != 1 ] && opts="$opts --bitmap=internal --bitmap-chunk=64K"
    [ "$op" = size-ppl ] && opts="$opts --consistency-policy=ppl"
    [ "$op" = size-journal ] && opts="$opts --write-journal $extra"
    # shellcheck disable=SC2086
    if ! mdadm --create "$MD" $opts --name="$name" --run --quiet $devs >"$dir/create.log" 2>&1 </dev/null; then
        result "$name" M FAIL "mdadm --create $opts failed: $(tr '\n' ' ' <"$dir/create.log")"; detach; return
    fi
    wait_idle 300 || { result "$name" M FAIL "initial sync did not finish"; stop_md; detach; return; }
    old=$(blockdev --getsize64 "$MD")
    bs=$(bsfor "$old" 4194304)
    dd if="$D" of="$MD" bs="$bs" count=$((old / bs)) oflag=direct 2>"$dir/dd.log" || {
        result "$name" M FAIL "writing the pattern failed"; stop_md; detach; return; }
    sync
    phase write
    if [ "$op" = size-ppl ] || [ "$op" = size-journal ]; then
        if mdadm --grow "$MD" --size=max >"$dir/grow.log" 2>&1; then
            result "$name" M FAIL "md took --size=max on a $op array: $(tr '\n' ' ' <"$dir/grow.log")"; stop_md; detach; return
        fi
        now_bytes=$(blockdev --getsize64 "$MD")
        [ "$now_bytes" = "$old" ] || { result "$name" M FAIL "md refused --size=max but the array is $now_bytes bytes, was $old"; stop_md; detach; return; }
        phase refused
        mdadm --detail "$MD" >"$dir/detail" 2>&1
        stop_md
        i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
        # The message as one word: the results line is split at spaces.
        said=$(tr -s ' \n' '__' <"$dir/grow.log" | cut -c1-200)
        result "$name" M PASS "array_bytes=$old old_bytes=$old refused=$said seconds=$(echo "$(now) $t0" | awk '{printf "%.1f", $1-$2}')$PHASES"
        detach; return
    fi
    case "$op" in
        size) g="--size=max" ;;
        bitmap) g="--bitmap=internal --bitmap-chunk=64K" ;;
        raid1add|raid0add|raid10add) g="--raid-devices=$n --add $extra" ;;
        r1to5) g="--level=5" ;;
        chunk) g="--chunk=256" ;;
        layout) g="--layout=right-asymmetric" ;;
        *) result "$name" M FAIL "unknown op $op"; stop_md; detach; return ;;
    esac
    # shellcheck disable=SC2086
    mdadm --grow "$MD" $g >"$dir/grow.log" 2>&1 || {
        result "$name" M FAIL "mdadm --grow $g: $(tr '\n' ' ' <"$dir/grow.log")"; stop_md; detach; return; }
    sleep 0.5
    wait_idle 300 || { result "$name" M FAIL "the sync after the grow did not finish"; stop_md; detach; return; }
    if [ "$op" = raid0add ]; then
        # mdadm's background process takes the RAID 4 it reshaped back as
        # a RAID 0 once the reshape ends.
        i=0
        while [ "$(cat "$SYS/level" 2>/dev/null)" != raid0 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
        [ $i -lt 600 ] || { result "$name" M FAIL "md did not take the reshaped RAID 4 back as a RAID 0: level $(cat "$SYS/level" 2>/dev/null)"; stop_md; detach; return; }
    fi
    if [ "$op" = raid10add ]; then
        # md resyncs a RAID 10's new space once its reshape ends
        # (raid10_finish_reshape), started after a moment: wait until clean.
        i=0
        while [ $i -lt 3000 ]; do
            [ "$(cat "$SYS/resync_start" 2>/dev/null)" = none ] && [ "$(cat "$SYS/sync_action" 2>/dev/null)" = idle ] && break
            sleep 0.1; i=$((i + 1))
        done
        [ $i -lt 3000 ] || { result "$name" M FAIL "md's resync after its RAID 10 reshape did not finish"; stop_md; detach; return; }
    fi
    phase grow
    size=$(blockdev --getsize64 "$MD")
    mdadm --detail "$MD" >"$dir/detail" 2>&1
    stop_md
    i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
    result "$name" M PASS "array_bytes=$size old_bytes=$old seconds=$(echo "$(now) $t0" | awk '{printf "%.1f", $1-$2}')$PHASES"
    detach
}

run_e() { # NAME NDEV MBYTES OFFS ABYTES OUT READD: md re-adds a member raidlab wrote around
    name=$1 n=$2 mb=$3 offs=$4 abytes=$5 out=$6 readd=$7
    set_flags -
    OUT_MIB=$((out / 1048576)); ASTRIDE_MIB=$(((abytes + 1048575) / 1048576)); ABYTES=$abytes
    dir="$R/E/$name"; mkdir -p "$dir"
    t0=$(now); PT=$t0; PHASES=""
    attach "$mb" "$offs" || { result "$name" E FAIL "losetup failed"; detach; return; }
    i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
    first=$(echo $loops | awk '{print $1}')
    dirty=$(dirty_bits "$first")
    mdadm -X "$first" >"$dir/bitmap.before" 2>&1
    sub=$(pick "$loops" "$readd")
    back=$(echo $loops | awk -v k=$((readd + 1)) '{print $k}')
    bad=""
    # shellcheck disable=SC2086
    if ! mdadm --assemble "$MD" --run $sub >"$dir/assemble.log" 2>&1; then
        result "$name" E FAIL "mdadm --assemble without member $readd failed: $(tr '\n' ' ' <"$dir/assemble.log")"; detach; return
    fi
    d=$(cat "$SYS/degraded" 2>/dev/null || echo '?')
    [ "$d" = 1 ] || bad="$bad degraded-before=$d"
    w0=$(awk '{print $7}' "/sys/block/${back#/dev/}/stat")
    phase assemble
    if ! mdadm "$MD" --re-add "$back" >"$dir/readd.log" 2>&1; then
        result "$name" E FAIL "mdadm --re-add refused raidlab's member: $(tr '\n' ' ' <"$dir/readd.log")"; stop_md; detach; return
    fi
    sleep 0.2
    wait_insync 300 || bad="$bad recovery-did-not-finish"
    w1=$(awk '{print $7}' "/sys/block/${back#/dev/}/stat")
    phase recovery
    dmesg | grep -i 'md\|raid\|bitmap' | tail -n 20 >"$dir/dmesg"
    mdadm --detail "$MD" >"$dir/detail" 2>&1
    nact=$(grep -c 'active sync' "$dir/detail")
    [ "$nact" = "$n" ] || bad="$bad active-members=$nact/$n"
    echo check >"$SYS/sync_action"
    sleep 0.1
    wait_idle 300 || bad="$bad check-did-not-finish"
    mm=$(cat "$SYS/mismatch_cnt")
    [ "$mm" = 0 ] || bad="$bad mismatch_cnt=$mm"
    phase check
    copy_out 0 || bad="$bad read-failed"
    stop_md
    mdadm -X "$first" >"$dir/bitmap.after" 2>&1
    phase read
    if [ -z "$bad" ]; then
        result "$name" E PASS "dirty=$dirty written_bytes=$(((w1 - w0) * 512)) mismatch_cnt=$mm seconds=$(echo "$(now) $t0" | awk '{printf "%.1f", $1-$2}')$PHASES"
    else
        result "$name" E FAIL "$bad dirty=$dirty written_bytes=$(((w1 - w0) * 512)) :: $(tr '\n' ' ' <"$dir/readd.log")"
    fi
    detach
}

reshape_pos() { # seconds -> waits for md to record a reshape position; prints it or none
    i=0; pos=none
    while [ $i -lt $(($1 * 10)) ]; do
        pos=$(cat "$SYS/reshape_position" 2>/dev/null || echo none)
        case "$pos" in none|0) ;; *) break ;; esac
        sleep 0.1; i=$((i + 1))
    done
    echo "$pos"
}

run_g() { # NAME NDEV MBYTES OFFS [MODE]: an md reshape, stopped part-way
    # RAID 5 (1.2, 64K chunk) holding the pattern; then the reshape MODE
    # (see the manifest notes above) with the reshape slowed down, stopped
    # once md has recorded a reshape position.
    name=$1 n=$2 mb=$3 offs=$4 mode=${5:-grow}
    # r10shrinkbm, r10growbm: r10shrink, r10grow of an array with md's
    # internal bitmap.
    gmode=$mode; bm=""
    case "$mode" in
        r10shrinkbm|r10growbm) mode=${mode%bm}; bm="--bitmap=internal --bitmap-chunk=64K" ;;
    esac
    set_flags -
    dir="$R/G/$name"; mkdir -p "$dir"
    attach "$mb" "$offs" || { result "$name" G FAIL "losetup failed"; detach; return; }
    first=$(echo $loops | awk '{$NF=""; print}')
    last=$(echo $loops | awk '{print $NF}')
    created=$((n - 1)); members=$first
    [ "$mode" = chunk ] || [ "$mode" = shrink ] || [ "$mode" = shrinkroom ] || [ "$mode" = r10shrink ] && { created=$n; members=$loops; }
    backup=""; [ "$mode" = shrink ] && backup="--backup-file=$dir/backup" 
    # r10grow: a RAID 10 near=2 grown onto the last member (md's RAID 10
    # reshape), the rest RAID 5.
    level="--level=5"; [ "$mode" = r10grow ] || [ "$mode" = r10shrink ] && level="--level=10 --layout=n2"
    [ "$mode" = r0grow ] && level="--level=0"
    # shellcheck disable=SC2086
    if ! mdadm --create "$MD" --metadata=1.2 $level --chunk=64 $bm --raid-devices=$created --name="$name" --run --quiet $members >"$dir/create.log" 2>&1 </dev/null; then
        result "$name" G FAIL "mdadm --create failed: $(tr '\n' ' ' <"$dir/create.log")"; detach; return
    fi
    wait_idle 300 || { result "$name" G FAIL "initial sync did not finish"; stop_md; detach; return; }
    if [ "$mode" = shrinkroom ]; then
        # 6 MiB of each member used, so each has room after its data and
        # mdadm moves the data offset up instead of needing a backup (with
        # `--create --size` the members' data size is the component size
        # and mdadm fails to set new_offset).
        if ! mdadm --grow "$MD" --size=6144 >"$dir/size0.log" 2>&1 </dev/null; then
            result "$name" G FAIL "mdadm --grow --size=6144: $(tr '\n' ' ' <"$dir/size0.log")"; stop_md; detach; return
        fi
        wait_idle 300 || { result "$name" G FAIL "resync after --size did not finish"; stop_md; detach; return; }
    fi
    size=$(blockdev --getsize64 "$MD")
    bs=$(bsfor "$size" 4194304)
    dd if="$D" of="$MD" bs="$bs" count=$((size / bs)) oflag=direct 2>"$dir/dd.log" || {
        result "$name" G FAIL "writing the pattern failed"; stop_md; detach; return; }
    sync
    if [ "$mode" = shrink ] || [ "$mode" = shrinkroom ]; then
        # md refuses to shrink the members' count while the array is larger
        # than the smaller geometry holds: the array size first.
        comp=$(cat "$SYS/component_size")
        if ! mdadm --grow "$MD" --array-size=$(((n - 2) * comp)) >"$dir/size.log" 2>&1 </dev/null; then
            result "$name" G FAIL "mdadm --grow --array-size: $(tr '\n' ' ' <"$dir/size.log")"; stop_md; detach; return
        fi
        size=$(blockdev --getsize64 "$MD")
    fi
    if [ "$mode" = r10shrink ]; then
        # near=2 over NDEV-1 members, each holding one 64K chunk less
        # (mdadm's raid10_reshape takes the move up out of the component
        # size when there is no room after the data).
        comp=$(cat "$SYS/component_size")
        if ! mdadm --grow "$MD" --array-size=$(((comp - 64) * (n - 1) / 2)) >"$dir/size.log" 2>&1 </dev/null; then
            result "$name" G FAIL "mdadm --grow --array-size: $(tr '\n' ' ' <"$dir/size.log")"; stop_md; detach; return
        fi
        size=$(blockdev --getsize64 "$MD")
    fi
    # A RAID 0 takes no spare: its new member comes with the grow.
    if [ "$mode" != chunk ] && [ "$mode" != shrink ] && [ "$mode" != shrinkroom ] && [ "$mode" != r10shrink ] && [ "$mode" != r0grow ]; then
        mdadm "$MD" --add "$last" >"$dir/add.log" 2>&1 || {
            result "$name" G FAIL "mdadm --add: $(tr '\n' ' ' <"$dir/add.log")"; stop_md; detach; return; }
    fi
    case "$mode" in
        grow|r10grow) set -- --raid-devices="$n" ;;
        r0grow) set -- --raid-devices="$n" --add "$last" ;;
        chunk) set -- --chunk=128 ;;
        r6|r6p) set -- --level=6 --raid-devices="$n" --layout=preserve ;;
        shrink) set -- --raid-devices=$((n - 1)) "$backup" ;;
        shrinkroom|r10shrink) set -- --raid-devices=$((n - 1)) ;;
    esac
    # mdadm 4.2 raises the members' data offset for a shrink without saying
    # the direction first, which the kernel refuses for a forwards one
    # ("Cannot set new_offset"): shrinkroom says it, as mdadm does for a
    # RAID 10 shrink.
    if [ "$mode" = shrinkroom ]; then echo backwards >"$SYS/reshape_direction"; fi
    # The conversion's Q rebuild runs at full speed; only the reshape is slowed.
    # A RAID 0 has no sync_speed files (writing them is refused): its RAID 4
    # reshape is slowed by the kernel-wide limits, set for this case alone
    # (unslowed, a CI run on a loaded host saw it reach 27 of 29 MiB before
    # the stop in every try).
    if [ "$mode" = r0grow ]; then
        limits="$(cat /proc/sys/dev/raid/speed_limit_min) $(cat /proc/sys/dev/raid/speed_limit_max)"
        echo 1 >/proc/sys/dev/raid/speed_limit_min; echo 64 >/proc/sys/dev/raid/speed_limit_max
    elif [ "$mode" != r6 ] && [ "$mode" != r6p ]; then
        echo 1 >"$SYS/sync_speed_min"; echo 64 >"$SYS/sync_speed_max"
    fi
    if ! mdadm --grow "$MD" "$@" >"$dir/grow.log" 2>&1 </dev/null; then
        result "$name" G FAIL "mdadm --grow $*: $(tr '\n' ' ' <"$dir/grow.log")"; stop_md
        # shellcheck disable=SC2086
        [ "$mode" = r0grow ] && { set -- $limits; echo "$1" >/proc/sys/dev/raid/speed_limit_min; echo "$2" >/proc/sys/dev/raid/speed_limit_max; }
        detach; return
    fi
    if [ "$mode" = r6 ] || [ "$mode" = r6p ]; then
        wait_insync 300 || { result "$name" G FAIL "the conversion's rebuild did not finish (degraded=$(cat "$SYS/degraded" 2>/dev/null))"; stop_md; detach; return; }
        cat "$SYS/layout" >"$dir/layout.r6" 2>/dev/null
    fi
    if [ "$mode" = r6p ]; then
        layout=$(cat "$dir/layout.r6" 2>/dev/null || echo '?')
        cat /proc/mdstat >"$dir/mdstat"
        stop_md
        i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
        result "$name" G PASS "md_layout=$layout array_bytes=$size"
        detach; return
    fi
    if [ "$mode" = r6 ]; then
        # From left-symmetric-6 to the ordinary RAID 6 layout: a reshape over
        # the same members.
        echo 1 >"$SYS/sync_speed_min"; echo 64 >"$SYS/sync_speed_max"
        if ! mdadm --grow "$MD" --layout=left-symmetric >"$dir/grow2.log" 2>&1 </dev/null; then
            result "$name" G FAIL "mdadm --grow --layout=left-symmetric: $(tr '\n' ' ' <"$dir/grow2.log")"; stop_md; detach; return
        fi
    fi
    pos=$(reshape_pos 120)
    cat /proc/mdstat >"$dir/mdstat"
    if [ "$mode" = r0grow ]; then
        # mdadm's background process waits for the end to take the RAID 4
        # back as a RAID 0 (failing its parity role first); it must not do
        # that to the array stopped below or assembled again read-only. The
        # kernel carries the reshape on alone (the data offset moved: no
        # backup), and the stop records its position.
        for p in $(pidof mdadm); do kill -9 "$p" 2>/dev/null; done
        cat "$SYS/level" "$SYS/layout" "$SYS/raid_disks" >"$dir/md-shape" 2>/dev/null
    fi
    # mdadm --stop brings a running reshape to a position md records (it
    # freezes it, sets sync_max where it got to and waits). Over the same
    # members (chunk, r6) md still stops past the position its superblocks
    # record, having overwritten the old copy of what lies right above it:
    # md's own reading below differs from the pattern there.
    stop_md
    if [ "$mode" = r0grow ]; then
        # shellcheck disable=SC2086
        set -- $limits
        echo "$1" >/proc/sys/dev/raid/speed_limit_min; echo "$2" >/proc/sys/dev/raid/speed_limit_max
    fi
    i=0; for l in $loops; do mdadm --examine "$l" >"$dir/examine.$i" 2>&1; i=$((i + 1)); done
    # The bitmap md left on the first member (its sync size mid-reshape).
    # shellcheck disable=SC2086
    [ -n "$bm" ] && mdadm -X $(echo $loops | awk '{print $1}') >"$dir/bitmap.md" 2>&1
    # A shrink is not slowed by sync_speed_max: md runs it at once up to
    # the last window mdadm's backup child holds back, so the stop sometimes
    # comes after the end (1 run in ~10 here). The case needs a reshape cut
    # short: make the array again, up to five times.
    # A RAID 0 grow's RAID 4 reshape, on a quiet host, can also get to
    # its end before the stop (its position recorded at or past the old
    # array's end, mdadm killed before it took the RAID 0 back): the same.
    finished=0
    grep -q "Reshape pos'n" "$dir/examine.0" || finished=1
    if [ "$mode" = r0grow ]; then
        rpos=$(sed -n "s/.*Reshape pos'n : \([0-9]*\).*/\1/p" "$dir/examine.0" | head -n 1)
        [ -n "$rpos" ] && [ $((rpos * 1024)) -ge "$size" ] && finished=1
    fi
    # A shrink walks backwards from the array's end. Stopped before any
    # member recorded a step (every member's position still at the end;
    # CI once: 22020096 of 22020096), nothing lies on one side of the
    # position to read: made again too. The furthest member counts.
    if [ "$mode" = shrink ] || [ "$mode" = shrinkroom ] || [ "$mode" = r10shrink ]; then
        low=""
        for e in "$dir"/examine.*; do
            p=$(sed -n "s/.*Reshape pos'n : \([0-9]*\).*/\1/p" "$e" | head -n 1)
            [ -n "$p" ] || continue
            if [ -z "$low" ] || [ "$p" -lt "$low" ]; then low=$p; fi
        done
        if [ -n "$low" ] && [ $((low * 1024)) -ge "$size" ]; then finished=1; fi
    fi
    if { [ "$mode" = shrink ] || [ "$mode" = shrinkroom ] || [ "$mode" = r10shrink ] || [ "$mode" = r0grow ]; } && [ "$finished" = 1 ] && [ "${G_TRY:-1}" -lt 5 ]; then
        note "$name: md finished the reshape before it was stopped (try ${G_TRY:-1}); again"
        detach
        rm -f "$dir/backup"     # mdadm makes its backup file afresh (O_EXCL)
        G_TRY=$((${G_TRY:-1} + 1))
        run_g "$name" "$n" "$mb" "$offs" "$gmode"
        G_TRY=1
        return
    fi
    # What md itself reads of the stopped array, from the recorded position
    # on (read-only: md does not carry the reshape on), for the host to set
    # beside the pattern and raidlab's reading.
    # shellcheck disable=SC2086
    # A stopped shrink needs its backup file to assemble; mdadm 4.2 then
    # carries the reshape on unless told to freeze it (and segfaulted with
    # --readonly and the backup file alone).
    freeze=""; [ -n "$backup" ] && freeze=--freeze-reshape
    if mdadm --assemble --readonly $freeze "$MD" $backup $loops >"$dir/reassemble.log" 2>&1 </dev/null; then
        rp=$(cat "$SYS/reshape_position" 2>/dev/null || echo 0)
        echo "$rp" >"$dir/md-read.pos"
        dd if="$MD" of="$dir/md-read.bin" bs=512 skip="$rp" count=8192 2>>"$dir/reassemble.log"
        stop_md
    fi
    if [ "$pos" = none ] || [ "$pos" = 0 ]; then
        result "$name" G FAIL "no reshape position recorded in 120 s: $(tr '\n' ' ' <"$dir/mdstat")"
    else
        result "$name" G PASS "reshape_position=$pos array_bytes=$size"
    fi
    detach
}

# A configuration that hangs (md or a loop device stuck in the kernel, seen
# once under TCG) must not eat the whole boot's time limit in silence: a
# watchdog per manifest line reports where it stuck (the last finished
# phase, /proc/mdstat, the kernel's blocked tasks), writes the results disk
# as init does, and powers off with MDVM-EXIT 124, so the host can see what
# is done and boot again for the rest.
STALL_LIMIT=300                 # manifest "SET stall_limit N"; the slowest line takes ~20 s
HANG=""                         # manifest "SET hang KIND NAME": hang there (checks the watchdog)
stall() { # kind name
    echo "RESULT $2 $1 STALL after=$(cat /tmp/mdvm.phase 2>/dev/null || echo start) limit=${STALL_LIMIT}s" >>"$RES"
    {
        echo "MDVM-STALL $1 $2 after $(cat /tmp/mdvm.phase 2>/dev/null || echo start) (${STALL_LIMIT} s)"
        cat /proc/mdstat
        echo w >/proc/sysrq-trigger 2>/dev/null
        sleep 1
        dmesg | tail -n 80
    } >"$R/stall.txt" 2>&1
    cat "$R/stall.txt"
    (cd "$R" && tar -cf /dev/vdb .) || echo "MDVM-RESULTS-WRITE-FAILED"
    sync
    echo "MDVM-EXIT 124"
    poweroff -f
}
watchdog() { # kind name
    w=0
    while [ $w -lt "$STALL_LIMIT" ]; do sleep 1; w=$((w + 1)); done
    stall "$1" "$2"
}

T0=$(now)
note "kernel $(uname -r) mdadm $(mdadm --version 2>&1)"
while read -r kind rest <&3; do
    wd=""
    case "$kind" in
        A|B|C|R|K|S|G|W|E|M|T|X)
            # shellcheck disable=SC2086
            set -- $rest
            echo start >/tmp/mdvm.phase
            watchdog "$kind" "$1" & wd=$!
            [ "$kind $1" = "$HANG" ] && { echo "hanging in $kind $1 on purpose (SET hang)"; sleep 100000; } ;;
    esac
    case "$kind" in
        A) # shellcheck disable=SC2086
           run_a $rest ;;
        B) # shellcheck disable=SC2086
           run_b $rest ;;
        T) # shellcheck disable=SC2086
           run_t $rest ;;
        C) # shellcheck disable=SC2086
           run_c $rest ;;
        R) # shellcheck disable=SC2086
           run_r $rest ;;
        K) # shellcheck disable=SC2086
           run_k $rest ;;
        S) # shellcheck disable=SC2086
           run_s $rest ;;
        G) # shellcheck disable=SC2086
           run_g $rest ;;
        W) # shellcheck disable=SC2086
           run_w $rest ;;
        E) # shellcheck disable=SC2086
           run_e $rest ;;
        M) # shellcheck disable=SC2086
           run_m $rest ;;
        X) # shellcheck disable=SC2086
           run_x $rest ;;
        CRASH) crash ;;
        SET) set -- $rest
             case "$1" in
                 a_verify) A_VERIFY=$2 ;;
                 stall_limit) STALL_LIMIT=$2 ;;
                 hang) HANG="$2 $3" ;;
             esac ;;
        ''|'#'*) ;;
        *) echo "bad manifest line: $kind $rest" ;;
    esac
    [ -b "$MD" ] && [ -e "$SYS/array_state" ] && stop_md
    [ -n "$wd" ] && { kill "$wd" 2>/dev/null; wait "$wd" 2>/dev/null; }
done 3<./manifest
note "matrix_seconds $(echo "$(now) $T0" | awk '{printf "%.1f", $1-$2}')"
echo "DONE fails=$FAILS" >>"$RES"
[ "$FAILS" = 0 ]
