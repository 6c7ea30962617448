#!/usr/bin/env bash
# The real path's speed, two raidlab binaries side by side in one run (issue 19's
# before/after table): import and export of a RAID 5 and a RAID 6 on /dev/shm,
# the same arrays served over NBD (fio's nbd engine: 4K random reads at QD32 and
# 1M sequential reads), and a rebuild of one member (`raidlab add`). Each round
# runs OLD then NEW, the next NEW then OLD, so load drifts hit both alike.
# Prints one Markdown row per test: OLD and NEW medians and NEW/OLD.
#
#   OLD=/path/old/raidlab NEW=target/release/raidlab scripts/bench-before-after.sh
#   ROUNDS=3 MIB=256 RUNTIME=5 ...
#   POLICY=bitmap|ppl: arrays created with that consistency policy (the
#   write-intent bitmap's and the partial parity log's writes are then part of
#   every import and rebuild); PPL is RAID 5 only, so SPECS="5 4" with it.
#   SPECS="5 4;6 6": LEVEL MEMBERS pairs, separated by ';'.
# Needs fio with its nbd engine (Debian: fio) and bc.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$(realpath "${OLD:?set OLD to the older raidlab binary}")
NEW=$(realpath "${NEW:-target/release/raidlab}")
ROUNDS=${ROUNDS:-3}
POLICY=${POLICY:-}
SPECS=${SPECS:-"5 4;6 6"}
MIB=${MIB:-256}
RUNTIME=${RUNTIME:-5}
for t in fio bc; do
    command -v $t >/dev/null || { echo "bench-before-after.sh: $t is not installed" >&2; exit 2; }
done
dir=$(mktemp -d /dev/shm/raidlab-before-after.XXXXXX)
pid=""
cleanup() { [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
cd "$dir"
now() { date +%s.%N; }
declare -A res # res["test|bin"]="v1 v2 ..."
add() { res["$1|$2"]="${res["$1|$2"]:-} $3"; }

fresh() { # LEVEL N: a fresh array in a.* (random contents written by `import`
    # below come from data, made once per level)
    rm -f a.* n.*
    local all=() i
    for ((i = 0; i < $2; i++)); do all+=("a.$i"); done
    "$NEW" create --level "$1" --chunk 512K --member-size "${MIB}M" ${POLICY:+--consistency-policy "$POLICY"} --force "${all[@]}" >/dev/null
    size=$("$NEW" detail --json "${all[@]}" | sed -n 's/.*"array_size_bytes": \([0-9]*\).*/\1/p')
    [ -s data ] || head -c "$size" /dev/urandom > data
    members=("${all[@]}")
}

fio_mbs() { # SOCKET RW BS DEPTH -> MB/s
    fio --name=t --ioengine=nbd --uri="nbd+unix:///?socket=$1" --rw="$2" --bs="$3" \
        --iodepth="$4" --direct=1 --time_based --runtime="$RUNTIME" --output-format=json 2>/dev/null |
        python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; print(round((j["read"]["bw_bytes"]+j["write"]["bw_bytes"])/1e6,1))'
}

one() { # BIN LABEL LEVEL N: every test with one binary on a fresh array
    local R=$1 L=$2 t0 t1
    fresh "$3" "$4"
    t0=$(now); "$R" import "${members[@]}" < data 2>/dev/null; t1=$(now)
    add "$L import MB/s" "$R" "$(echo "$size / ($t1 - $t0) / 1000000" | bc -l | xargs printf %.0f)"
    t0=$(now); "$R" export "${members[@]}" > /dev/null 2>&1; t1=$(now)
    add "$L export MB/s" "$R" "$(echo "$size / ($t1 - $t0) / 1000000" | bc -l | xargs printf %.0f)"
    "$R" serve --socket "$dir/s" "${members[@]}" >/dev/null 2>&1 & pid=$!
    for _ in $(seq 100); do [ -S "$dir/s" ] && break; sleep 0.1; done
    add "$L served 4K rand read QD32 MB/s" "$R" "$(fio_mbs "$dir/s" randread 4k 32)"
    add "$L served 1M seq read QD8 MB/s" "$R" "$(fio_mbs "$dir/s" read 1M 8)"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; rm -f "$dir/s"
    # Rebuild member 1 onto a new file (pages allocated first, as cp's target).
    "$R" fail "${members[@]}" --member a.1 >/dev/null
    "$R" remove "${members[@]}" --member a.1 >/dev/null
    local rest=("${members[@]/a.1/}"); rest=(${rest[@]})
    head -c "$(stat -c %s a.1)" /dev/zero > n.1
    t0=$(now); "$R" add "${rest[@]}" --new n.1 --force >/dev/null; t1=$(now)
    add "$L rebuild MB/s" "$R" "$(echo "$(stat -c %s a.1) / ($t1 - $t0) / 1000000" | bc -l | xargs printf %.0f)"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

tests=()
IFS=';' read -ra specs <<< "$SPECS"
for spec in "${specs[@]}"; do
    set -- $spec
    rm -f data
    L="RAID $1 x$2${POLICY:+ $POLICY}"
    for t in import export "served 4K rand read QD32" "served 1M seq read QD8" rebuild; do
        tests+=("$L $t MB/s")
    done
    for ((r = 0; r < ROUNDS; r++)); do
        if ((r % 2 == 0)); then one "$OLD" "$L" "$@"; one "$NEW" "$L" "$@"; else one "$NEW" "$L" "$@"; one "$OLD" "$L" "$@"; fi
    done
done
echo "| test | old (median of $ROUNDS) | new | new/old |"
echo "|---|---|---|---|"
for t in "${tests[@]}"; do
    o=$(echo "${res["$t|$OLD"]}" | median); n=$(echo "${res["$t|$NEW"]}" | median)
    echo "| $t | $o | $n | $(echo "$n / $o" | bc -l | xargs printf %.2f) |"
done
echo
echo "Every run:"
for t in "${tests[@]}"; do echo "- $t: old${res["$t|$OLD"]}; new${res["$t|$NEW"]}"; done
