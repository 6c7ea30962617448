#!/usr/bin/env bash
# Two raidlab binaries side by side on the served path: a RAID 5 of four
# files in /dev/shm served by `raidlab serve`, fio's nbd engine on a Unix
# socket, 4K random writes and reads at queue depth 1 and 32. The binaries run
# alternately (A B B A ... ROUNDS pairs) on a fresh array each time, and the
# median IOPS of each side and their ratio (B/A) are printed per job as a
# Markdown table. Members in memory: this measures the CPU cost per request of
# the server and the engine (what a change to the write path costs), not disks.
#
#   A=old/raidlab B=target/release/raidlab scripts/bench-serve-ab.sh
#   ROUNDS=4 RUNTIME=5 MEMBER=256M A=... B=... scripts/bench-serve-ab.sh
#
# Needs fio (with its nbd engine, Debian's fio has it; it prints "connected
# to NBD server" on stdout, so the JSON goes to a file).
set -euo pipefail
A="${A:?A=path of the first raidlab binary}"
B="${B:?B=path of the second raidlab binary}"
ROUNDS="${ROUNDS:-3}"
RUNTIME="${RUNTIME:-5}"
MEMBER="${MEMBER:-256M}"
JOBS=("randwrite 1" "randwrite 32" "randread 1" "randread 32")
command -v fio >/dev/null || { echo "bench-serve-ab: fio is needed (apt-get install fio)" >&2; exit 1; }
work="$(mktemp -d /dev/shm/raidlab-ab.XXXXXX)"
srv=""
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# run BIN LABEL: one fresh array, every job once; appends "label job iops".
run() {
    local bin="$1" label="$2"
    rm -f "$work"/m* "$work"/s.sock
    "$bin" create -l 5 -c 64K --member-size "$MEMBER" "$work"/m0 "$work"/m1 "$work"/m2 "$work"/m3 >/dev/null 2>&1
    "$bin" serve --socket "$work/s.sock" -N a "$work"/m0 "$work"/m1 "$work"/m2 "$work"/m3 2>"$work/serve.log" &
    srv=$!
    for _ in $(seq 100); do [ -S "$work/s.sock" ] && break; sleep 0.05; done
    local uri="nbd+unix:///a?socket=$work/s.sock"
    # Write the whole region once so that reads read data, not holes.
    fio --name=fill --ioengine=nbd --uri="$uri" --rw=write --bs=1M --iodepth=8 \
        --size=512M --output-format=terse >/dev/null 2>&1 || true
    for j in "${JOBS[@]}"; do
        set -- $j
        local iops
        iops=$(fio --name=j --ioengine=nbd --uri="$uri" --rw="$1" --bs=4k --iodepth="$2" \
            --size=512M --time_based=1 --runtime="$RUNTIME" --randrepeat=0 \
            --output-format=json --output="$work/fio.json" >/dev/null 2>&1 &&
            python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["jobs"][0]; print(round(d["write"]["iops"]+d["read"]["iops"]))' "$work/fio.json")
        echo "$label $1-QD$2 $iops" >>"$work/results"
    done
    kill "$srv"; wait "$srv" 2>/dev/null || true; srv=""
}

for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then run "$A" A; run "$B" B; else run "$B" B; run "$A" A; fi
done
python3 - "$work/results" <<'EOF'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    side, job, iops = line.split()
    rows.setdefault(job, {}).setdefault(side, []).append(int(iops))
print("| job | A IOPS (runs) | B IOPS (runs) | B / A (medians) |")
print("|---|---|---|---|")
for job, s in rows.items():
    a, b = statistics.median(s["A"]), statistics.median(s["B"])
    print(f"| {job} | {a:.0f} ({', '.join(map(str, s['A']))}) | {b:.0f} ({', '.join(map(str, s['B']))}) | {b / a:.2f}x |")
EOF
