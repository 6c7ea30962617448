#!/usr/bin/env bash
# The simulator against the real engine on members whose behaviour is known.
#
# Real side: `raidlab serve` of RAID 0, 1, 5, 6 and 10 arrays whose members are
# /dev/shm files behind nbdkit's noparallel, delay and rate filters (one
# request at a time, DELAY_MS per request, a token bucket of RATE_MBPS MB/s
# holding BURST_S seconds of it; scripts/nbd-delay-lib.sh, the member set-up of
# bench-nbd-raid-devices.sh's hdd-seek profile), each loop device's
# max_sectors_kb set to MAX_KB (so every larger request splits the same way
# whatever the writer's buffer), measured by fio through its
# nbd engine, one connection. Simulated side: the same arrays in raidlab's
# simulator (`raidlab bench job` on `sim:LEVEL:NxPRESET:...`) on the preset
# nbdkit-hdd-seek (crates/raidlab-sim/presets/devices.toml), whose parameters
# are these filter settings and nothing else. Both sides: chunk 64K, raidlab's
# defaults otherwise (metadata 1.2, md's default layout, stripe cache of 64
# stripes), the same fio jobs (bench-nbd-lib.sh's list: 1M sequential QD8, 4K
# random QD1 and QD32, reads and writes) over the same region, complete and
# with role 0 failed (RAID 0 complete only).
#
# Prints one row per cell: the real figure and the simulated one (each the
# median of ROUNDS runs), simulated/real - 1; then the median
# |error| and the worst cell. IOPS for 4K jobs, MiB/s for 1M jobs.
#
#   scripts/sim-vs-real.sh                  # the whole matrix (~30 min on 2 cores)
#   QUICK=1 scripts/sim-vs-real.sh          # a smoke check: RAID 5, 3 jobs, 1 run
#   LEVELS="5 6" STATES=degraded ROUNDS=1 scripts/sim-vs-real.sh
#   REAL_FROM=old.log scripts/sim-vs-real.sh  # simulate again against the real
#                                           # figures an earlier run printed
#
# Needs root (loop devices, FUSE), fio, nbdkit (with the noparallel, delay and
# rate filters), nbdfuse (libnbd-bin), fuse3, python3, util-linux, and a
# release build of raidlab (`cargo build --release -p raidlab`); it installs
# and builds nothing itself.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-nbd-lib.sh
. scripts/bench-nbd-lib.sh
# shellcheck source=scripts/nbd-delay-lib.sh
. scripts/nbd-delay-lib.sh

RAIDLAB=${RAIDLAB:-target/release/raidlab}
MEMBER=512M                # each member file: the preset's capacity_bytes
REGION=${REGION:-256M}     # the part of the array the jobs run over
RUNTIME=${RUNTIME:-5}      # seconds measured per run
RAMP=${RAMP:-1}            # seconds run first, uncounted, on both sides (real:
                           # a fresh server's threads; both: a parity array's
                           # stripe cache takes a writer's first 64 stripes at
                           # once, which a measured run must not count on one
                           # side only)
ROUNDS=${ROUNDS:-3}        # real runs per cell (median reported)
LEVELS=${LEVELS:-0 1 5 6 10}
STATES=${STATES:-complete degraded}
JOBS=${JOBS:-}             # only jobs whose names contain one of these words
# The real figures from an earlier run's output instead of measuring them:
# the simulated side is the same on any machine, the real one needs a quiet
# machine, so a model change can be checked against a quiet run's figures.
REAL_FROM=${REAL_FROM:-}
# The simulator runs raidlab's engine live (the replay of recorded plans
# was removed in stop 53): one simulated column.
ENGINES=live
# The member's service: these are the preset nbdkit-hdd-seek's parameters;
# change them only together with the preset (tests/fixed.rs checks).
DELAY_MS=5                 # rdelay and wdelay, whole milliseconds
RATE_MBPS=160              # decimal MB/s, the rate filter's rate in bits/s / 8
BURST_S=0.02               # the rate filter's burstiness (bucket capacity)
MAX_KB=512                 # each member loop device's max_sectors_kb: the
                           # preset's max_transfer_bytes (nbd-delay-lib.sh)
PRESET=nbdkit-hdd-seek
if [ -n "${QUICK:-}" ]; then
    LEVELS=5; STATES=complete; ROUNDS=1
    JOBS="seq-read rand-read-4K-QD1 rand-write-4K-QD32"
fi

needs="fio nbdkit nbdfuse fusermount3 losetup python3 numfmt"
if [ -n "$REAL_FROM" ]; then
    [ -r "$REAL_FROM" ] || { echo "sim-vs-real.sh: REAL_FROM=$REAL_FROM cannot be read" >&2; exit 2; }
    needs="python3 numfmt"
fi
for t in $needs; do
    command -v $t >/dev/null || { echo "sim-vs-real.sh: $t is not installed (apt-get install fio nbdkit libnbd-bin fuse3 python3 util-linux)" >&2; exit 2; }
done
[ -n "$REAL_FROM" ] || [ "$(id -u)" = 0 ] || { echo "sim-vs-real.sh: needs root (loop devices, FUSE mounts)" >&2; exit 2; }
[ -x "$RAIDLAB" ] || { echo "sim-vs-real.sh: no raidlab binary at $RAIDLAB (cargo build --release -p raidlab, or set RAIDLAB)" >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "sim-vs-real.sh: ROUNDS must be a positive integer, not '$ROUNDS'" >&2; exit 2; }

members_of() { # level -> members
    case $1 in 0) echo 4 ;; 1) echo 2 ;; 5) echo 4 ;; 6) echo 5 ;; 10) echo 4 ;;
        *) echo "sim-vs-real.sh: LEVELS: $1 is not one of 0 1 5 6 10" >&2; exit 2 ;; esac
}
for l in $LEVELS; do members_of "$l" >/dev/null; done
for s in $STATES; do
    case $s in complete | degraded) ;; *) echo "sim-vs-real.sh: STATES: '$s' is not complete or degraded" >&2; exit 2 ;; esac
done

dir=$(mktemp -d /dev/shm/raidlab-simreal.XXXXXX)
srv=""
loops=()
nmem=0
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null || true
    detach
    rm -rf "$dir"
}
detach() { # the loop devices and, when delayed, their nbdkit and nbdfuse
    local l i
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    loops=()
    for i in $(seq 0 $((nmem - 1))); do delayed_member_down "$dir" "$i"; done
}
trap cleanup EXIT
URI="nbd+unix:///a?socket=$dir/s.sock"
REGION_MB=$(( $(numfmt --from=iec "$REGION") / 1048576 ))

serve() { # members... : serve them as export `a`
    "$RAIDLAB" serve --socket "$dir/s.sock" -N a "$@" 2>>"$dir/serve.log" &
    srv=$!
    for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
    [ -S "$dir/s.sock" ] || { echo "sim-vs-real.sh: raidlab serve did not start:" >&2; cat "$dir/serve.log" >&2; exit 1; }
}
unserve() {
    kill "$srv"; wait "$srv" 2>/dev/null || true; srv=""; rm -f "$dir/s.sock"
}
seed_of() { printf '%s' "$*" | cksum | cut -d' ' -f1; }

real_run() { # rw bs qd seed -> "MiB/s IOPS"
    fio --name=b --ioengine=nbd --uri="$URI" --size="${REGION_MB}M" --rw="$1" --bs="$2" \
        --iodepth="$3" --time_based --runtime="$RUNTIME" --ramp_time="$RAMP" \
        --randrepeat=0 --randseed="$4" --output-format=json | python3 -c "$parse"
}
# No randrepeat=0 here: raidlab's job files take randseed only with randrepeat
# (as fio does), and a simulated run is then the same every time.
sim_run() { # level members failed rw bs qd seed engine -> "MiB/s IOPS"
    local spec="sim:raid$1:$2x$PRESET:chunk=64K:engine=$8"  # engine: live
    [ "$3" = degraded ] && spec+=":failed=0"
    cat >"$dir/sim.fio" <<EOF
[b]
filename=$spec
rw=$4
bs=$5
iodepth=$6
size=${REGION_MB}M
time_based=1
runtime=$RUNTIME
ramp_time=$RAMP
randseed=$7
EOF
    "$RAIDLAB" bench job --json --output-format fio "$dir/sim.fio" 2>"$dir/sim.err" | python3 -c "$parse" || {
        echo "sim-vs-real.sh: the simulated run failed ($spec $4 $5 QD$6):" >&2; cat "$dir/sim.err" >&2; exit 1
    }
}

selected=()
for j in "${jobs[@]}"; do
    read -r name rw bs qd <<<"$j"
    if [ -n "$JOBS" ]; then
        keep=""
        for w in $JOBS; do [[ $name == *"$w"* ]] && keep=1; done
        [ -n "$keep" ] || continue
    fi
    selected+=("$j")
done

echo "raidlab $("$RAIDLAB" --version 2>/dev/null | head -1) ($RAIDLAB), fio $(fio --version), $(nbdkit --version), kernel $(uname -r), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "members: $MEMBER files in /dev/shm behind nbdkit noparallel + delay ${DELAY_MS} ms + rate ${RATE_MBPS} MB/s (burstiness ${BURST_S} s), nbdfuse, loop (direct I/O, max_sectors_kb $MAX_KB); chunk 64K; ${REGION} region; ${RAMP}s ramp + ${RUNTIME}s per run; real and simulated: median of $ROUNDS; simulated: preset $PRESET"
echo
header="| cell | real |"
rule="|---|---|"
for e in $ENGINES; do header+=" simulated ($e) | simulated/real - 1 |"; rule+="---|---|"; done
echo "$header"
echo "$rule"
set_up() { # level members: the array created and filled, its members delayed
    local level=$1 n=$2 i
    for i in $(seq 0 $((n - 1))); do
        truncate -s "$MEMBER" "$dir/d$i"
        loops+=("$(losetup -f --show "$dir/d$i")")
    done
    # Set up on plain loop devices (memory speed): create, and write the
    # region once so every read reads written data.
    "$RAIDLAB" create -f -l "$level" -c 64K "${loops[@]}" >"$dir/create.log" 2>&1 || {
        echo "sim-vs-real.sh: raidlab create failed:" >&2; cat "$dir/create.log" >&2; exit 1
    }
    "$RAIDLAB" resync "${loops[@]}" >/dev/null 2>&1 || true
    serve "${loops[@]}"
    fio --name=fill --ioengine=nbd --uri="$URI" --rw=write --bs=1M --iodepth=8 --size="${REGION_MB}M" >/dev/null
    unserve
    detach
    for i in $(seq 0 $((n - 1))); do
        delayed_member_up "$dir" "$i" "$dir/d$i" "$DELAY_MS" "$((RATE_MBPS * 8))M" "$BURST_S" "$MAX_KB" || exit 1
        loops+=("$DELAYED_LOOP")
        [ "$(cat "/sys/block/${DELAYED_LOOP#/dev/}/loop/dio")" = 1 ] ||
            echo "sim-vs-real.sh: warning: $DELAYED_LOOP has no direct I/O (the page cache sits between it and nbdkit)" >&2
    done
}
for e in $ENGINES; do : >"$dir/rows.$e"; done
for level in $LEVELS; do
    n=$(members_of "$level")
    nmem=$n
    [ -n "$REAL_FROM" ] && nmem=0
    [ -n "$REAL_FROM" ] || set_up "$level" "$n"
    for state in $STATES; do
        [ "$level" = 0 ] && [ "$state" = degraded ] && continue
        if [ -z "$REAL_FROM" ]; then
            echo "RAID $level $state: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$dir/loads"
            if [ "$state" = complete ]; then serve "${loops[@]}"; else serve "${loops[@]:1}"; fi
        fi
        for j in "${selected[@]}"; do
            read -r name rw bs qd <<<"$j"
            if [ -n "$REAL_FROM" ]; then
                real=$(awk -F' [|] ' -v c="| RAID $level ($n) $state $name" '$1 == c { split($2, f, " "); print f[1]; exit }' "$REAL_FROM")
                [ -n "$real" ] || { echo "sim-vs-real.sh: REAL_FROM has no row for RAID $level ($n) $state $name" >&2; exit 1; }
            else
                runs=()
                for round in $(seq "$ROUNDS"); do
                    runs+=("$(real_run "$rw" "$bs" "$qd" "$(seed_of "$level" "$state" "$name" "$round")")")
                done
                real=$(figure "$bs" "$(median "${runs[@]}")")
            fi
            # The simulated side runs with the real runs' seeds: one run per
            # seed is repeatable, and the median over the same offsets' draws
            # is what the real side's median is.
            unit="MiB/s"; [ "$bs" = 4k ] && unit=IOPS
            cell="RAID $level ($n) $state $name"
            line="| $cell | $real $unit |"
            for e in $ENGINES; do
                runs=()
                for round in $(seq "$ROUNDS"); do
                    runs+=("$(sim_run "$level" "$n" "$state" "$rw" "$bs" "$qd" "$(seed_of "$level" "$state" "$name" "$round")" "$e")")
                done
                sim=$(figure "$bs" "$(median "${runs[@]}")")
                err=$(python3 -c "import sys; r, s = map(float, sys.argv[1:]); print('%+.1f%%' % (100 * (s / r - 1)))" "$real" "$sim")
                line+=" $sim $unit | $err |"
                echo "$cell|$real|$sim" >>"$dir/rows.$e"
            done
            echo "$line"
        done
        [ -n "$REAL_FROM" ] || unserve
    done
    detach
    rm -f "$dir"/d*
done
for e in $ENGINES; do
echo
printf 'engine %s: ' "$e"
python3 - "$dir/rows.$e" <<'EOF'
import sys
rows = [l.rstrip("\n").split("|") for l in open(sys.argv[1]) if l.strip()]
errs = sorted(((float(s) / float(r) - 1, c) for c, r, s in rows), key=lambda e: abs(e[0]))
if errs:
    mid = [abs(e[0]) for e in errs]
    k = len(mid) // 2
    med = mid[k] if len(mid) % 2 else (mid[k - 1] + mid[k]) / 2
    print("cells: %d; median |simulated/real - 1|: %.1f%%; worst: %s (%+.1f%%); within 10%%: %d of %d"
          % (len(errs), 100 * med, errs[-1][1], 100 * errs[-1][0],
             sum(abs(e) <= 0.10 for e, _ in errs), len(errs)))
EOF
done
if [ -n "$REAL_FROM" ]; then
    echo "real figures: from $REAL_FROM"
else
echo "load average (1, 5, 15 min) before each set of real runs:"
sed 's/^/  /' "$dir/loads"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
