#!/usr/bin/env bash
# The stripe cache on fast members: `import` and served writes to RAID 5 of 4
# and RAID 6 of 6 (512K chunks) whose members are files in /dev/shm, with the
# stripe cache at its defaults against `--stripe-cache 0`, alternating in one
# run (best of ROUNDS each). `import` moves whole stripes (about 8 MiB at a
# time), which go straight past the cache: that row checks it costs nothing.
# Served: nbdcopy of a file (sequential 1 MiB-ish
# requests, several in flight) and fio's nbd engine, 4 KiB random writes at
# QD32 for RUNTIME seconds. Prints a Markdown table: MB/s or IOPS, on/off.
# Needs nbdcopy (libnbd-bin) and fio.
#   scripts/bench-stripe-cache.sh            # 256M members, 3 rounds, 5 s fio
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p raidlab
R="$PWD/target/release/raidlab"
MIB=${MIB:-256}
ROUNDS=${ROUNDS:-3}
RUNTIME=${RUNTIME:-5}
dir=$(mktemp -d /dev/shm/raidlab-sc.XXXXXX)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
cd "$dir"
now() { date +%s.%N; }
best() { sort -g | tail -1; }

echo "| array | test | cache on | cache off | on/off |"
echo "|---|---|---|---|---|"
for spec in "5 4" "6 6"; do
    set -- $spec
    level=$1 n=$2
    members=(); for ((i = 0; i < n; i++)); do members+=("m$i"); done
    rm -f m* src
    "$R" create --level "$level" --chunk 512K --member-size "${MIB}M" "${members[@]}" >/dev/null
    size=$("$R" detail --json "${members[@]}" | sed -n 's/.*"array_size_bytes": \([0-9]*\).*/\1/p')
    head -c "$size" /dev/urandom > src
    # Allocate every member page first: first-touch allocation would weigh on
    # whichever side ran first.
    "$R" import -i src "${members[@]}" 2>/dev/null
    declare -A res=()
    for ((r = 0; r < ROUNDS; r++)); do
        for side in $([ $((r % 2)) = 0 ] && echo "on off" || echo "off on"); do
            flag=(); [ "$side" = off ] && flag=(--stripe-cache 0)
            t0=$(now); "$R" import "${flag[@]}" -i src "${members[@]}" 2>/dev/null; t1=$(now)
            res[import-$side]+="$(echo "$size / ($t1 - $t0) / 1000000" | bc -l)"$'\n'
            "$R" serve "${flag[@]}" --socket "$dir/s" "${members[@]}" 2>/dev/null &
            server=$!
            for _ in $(seq 100); do [ -S "$dir/s" ] && break; sleep 0.05; done
            t0=$(now); nbdcopy src "nbd+unix:///?socket=$dir/s"; t1=$(now)
            res[nbdcopy-$side]+="$(echo "$size / ($t1 - $t0) / 1000000" | bc -l)"$'\n'
            iops=$(fio --name=rw --ioengine=nbd --uri="nbd+unix:///?socket=$dir/s" \
                --rw=randwrite --bs=4k --iodepth=32 --size="$((size / 2))" \
                --time_based --runtime="$RUNTIME" --output-format=json 2>/dev/null |
                python3 -c 'import json,sys; t=sys.stdin.read(); print(json.loads(t[t.index("{"):])["jobs"][0]["write"]["iops"])')
            res[rand-$side]+="$iops"$'\n'
            "$R" stop "${members[@]}" >/dev/null 2>&1 || kill "$server"
            wait "$server" 2>/dev/null || true
            server=""
        done
    done
    for t in import nbdcopy rand; do
        on=$(printf '%s' "${res[$t-on]}" | best)
        off=$(printf '%s' "${res[$t-off]}" | best)
        unit=MB/s; [ "$t" = rand ] && unit=IOPS
        case $t in
            import) name="import (whole stripes, about 8 MiB at a time)" ;;
            nbdcopy) name="served: nbdcopy of a file" ;;
            rand) name="served: fio 4K randwrite QD32" ;;
        esac
        printf '| RAID %s of %s | %s | %.0f %s | %.0f %s | %.2f |\n' "$level" "$n" "$name" "$on" "$unit" "$off" "$unit" "$(echo "$on / $off" | bc -l)"
    done
    unset res
done
