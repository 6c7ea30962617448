# Shared by bench-nbd-raid-devices.sh (PROFILE=hdd-seek) and sim-vs-real.sh
# (sourced, not run): a member whose service is known exactly, built from
# nbdkit's filters because this kernel has no dm-delay, null_blk or ublk.
#
# One member is `nbdkit file FILE` behind
#   noparallel (serialize=all-requests: one request at a time, whatever the
#              number of connections),
#   delay      (every read waits rdelay, every write, zero and trim wdelay;
#              nbdkit 1.32 reads "NNms" as whole milliseconds: "5.3ms" is 5 ms),
#   rate       (optional: a token bucket of RATE bits per second holding
#              BURST seconds of it, one for reads and one for writes, full
#              at the start),
# exported by nbdfuse as a file and attached as a loop device with direct I/O
# (so no page cache sits between the loop device and nbdkit), optionally with
# its queue's max_sectors_kb set (MAX_KB).
#
# Why MAX_KB: the loop queue (kernel 6.18) takes requests up to max_sectors_kb
# (1280 by default) and max_segments (128) physical segments, and the block
# layer splits a larger bio at whichever limit it reaches first. A page-aligned
# 1 MiB buffer of scattered 4 KiB pages is 256 segments, split in two 512 KiB
# halves; one whose pages happen to be physically contiguous is fewer
# segments and goes whole, or splits at odd sizes (nbdkit's log filter showed
# 1 MiB writes from raidlab reaching nbdkit whole in one run, as 512 KiB
# halves in the next, and as 488-536 KiB pieces in a third:
# docs/simulation.md, 'Checked against the real engine'). With
# max_sectors_kb 512, 512 KiB = 128 pages fits the segment limit whatever the
# buffer, so every request over 512 KiB is split at 512 KiB and the plug
# merges none beyond it: the member's transfer size is a setting, not the
# writer's memory layout.
#
# Needs nbdkit, nbdfuse (libnbd-bin), fuse3 (fusermount3), losetup, root.

# delayed_member_up DIR I FILE DELAY_MS [RATE_BITS_PER_S BURST_S [MAX_KB]]
# Starts member I's nbdkit and nbdfuse in DIR (k$I.pid, k$I.sock, f$I/) over
# FILE and sets DELAYED_LOOP to its loop device (with max_sectors_kb MAX_KB
# when given; RATE_BITS_PER_S empty: no rate filter). Returns 1, having said why on
# stderr, when a piece does not come up.
delayed_member_up() {
    local dir=$1 i=$2 file=$3 delay=$4 rate=${5:-} burst=${6:-} max_kb=${7:-}
    local filters=(--filter=noparallel --filter=delay)
    local args=(serialize=all-requests rdelay="${delay}ms" wdelay="${delay}ms")
    if [ -n "$rate" ]; then
        filters+=(--filter=rate)
        args+=(rate="$rate" burstiness="$burst")
    fi
    nbdkit -P "$dir/k$i.pid" -U "$dir/k$i.sock" "${filters[@]}" file "$file" "${args[@]}" >/dev/null || {
        echo "nbd-delay-lib.sh: nbdkit did not start over $file" >&2
        return 1
    }
    mkdir -p "$dir/f$i"
    setsid nbdfuse "$dir/f$i" --unix "$dir/k$i.sock" </dev/null >>"$dir/nbdfuse.log" 2>&1 &
    for _ in $(seq 100); do [ -e "$dir/f$i/nbd" ] && break; sleep 0.05; done
    [ -e "$dir/f$i/nbd" ] || {
        echo "nbd-delay-lib.sh: nbdfuse did not mount $dir/f$i:" >&2
        cat "$dir/nbdfuse.log" >&2
        return 1
    }
    DELAYED_LOOP=$(losetup -f --show --direct-io=on "$dir/f$i/nbd")
    if [ -n "$max_kb" ]; then
        local q=/sys/block/${DELAYED_LOOP#/dev/}/queue
        echo "$max_kb" >"$q/max_sectors_kb" && [ "$(cat "$q/max_sectors_kb")" = "$max_kb" ] || {
            echo "nbd-delay-lib.sh: could not set $DELAYED_LOOP's max_sectors_kb to $max_kb" >&2
            losetup -d "$DELAYED_LOOP"
            return 1
        }
    fi
}

# delayed_member_down DIR I: unmounts member I's nbdfuse and stops its nbdkit
# (its loop device must be detached first).
delayed_member_down() {
    local dir=$1 i=$2
    fusermount3 -u -z "$dir/f$i" 2>/dev/null || true
    [ -f "$dir/k$i.pid" ] && kill "$(cat "$dir/k$i.pid")" 2>/dev/null || true
    rm -f "$dir/k$i.pid" "$dir/k$i.sock"
}
