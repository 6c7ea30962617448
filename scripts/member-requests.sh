#!/usr/bin/env bash
# One fio job through `raidlab serve` on an array of sim-vs-real.sh's delayed
# members, with nbdkit's log filter in front of each member: the figure, and
# the requests each member received by size (what the block layer merged,
# what the stack split).
#
#   LEVEL=0 RW=read scripts/member-requests.sh
#   LEVEL=10 RW=write BS=1M QD=8 N=4 scripts/member-requests.sh
#   FAIL=1 ...            # serve without role 0 (degraded)
#   SERVE_ARGS=--copy-reads ...
#   MAX_KB= ...           # the loop devices' own max_sectors_kb (default: 512)
#   KEEP=/tmp/logs ...    # keep nbdkit's logs (with timestamps) there
#   RAIDLAB=/path/to/raidlab ...
#
# Needs root, fio, nbdkit, nbdfuse (libnbd-bin), fuse3, python3, util-linux
# and a release build of raidlab.
set -euo pipefail
cd "$(dirname "$0")/.."
RAIDLAB=${RAIDLAB:-target/release/raidlab}
LEVEL=${LEVEL:-0} RW=${RW:-read} BS=${BS:-1M} QD=${QD:-8} N=${N:-4} FAIL=${FAIL:-}
RUNTIME=${RUNTIME:-3} SERVE_ARGS=${SERVE_ARGS:-}
MAX_KB=${MAX_KB:-512}   # each loop device's max_sectors_kb, as sim-vs-real.sh sets it ('': the kernel's)
for t in fio nbdkit nbdfuse fusermount3 losetup python3; do
    command -v $t >/dev/null || { echo "member-requests.sh: $t is not installed (apt-get install fio nbdkit libnbd-bin fuse3 python3 util-linux)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "member-requests.sh: needs root (loop devices, FUSE mounts)" >&2; exit 2; }
[ -x "$RAIDLAB" ] || { echo "member-requests.sh: no raidlab binary at $RAIDLAB (cargo build --release -p raidlab, or set RAIDLAB)" >&2; exit 2; }
dir=$(mktemp -d /dev/shm/raidlab-requests.XXXXXX)
loops=() srv=""
cleanup() {
    [ -n "$srv" ] && { kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null || true; }
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    for i in $(seq 0 $((N - 1))); do
        fusermount3 -u -z "$dir/f$i" 2>/dev/null || true
        [ -f "$dir/k$i.pid" ] && kill "$(cat "$dir/k$i.pid")" 2>/dev/null || true
    done
    # KEEP=DIR: nbdkit's logs (log$I, start$I: the line the job began at) kept
    [ -n "${KEEP:-}" ] && { mkdir -p "$KEEP"; cp "$dir"/log* "$dir"/start* "$KEEP"/; } || true
    rm -rf "$dir"
}
trap cleanup EXIT
for i in $(seq 0 $((N - 1))); do
    truncate -s 512M "$dir/d$i"
    mkdir -p "$dir/f$i"
    nbdkit -P "$dir/k$i.pid" -U "$dir/k$i.sock" --filter=log --filter=noparallel --filter=delay --filter=rate \
        file "$dir/d$i" serialize=all-requests rdelay=5ms wdelay=5ms rate=1280M burstiness=0.02 logfile="$dir/log$i"
    setsid nbdfuse "$dir/f$i" --unix "$dir/k$i.sock" </dev/null >>"$dir/nbdfuse.log" 2>&1 &
    for _ in $(seq 100); do [ -e "$dir/f$i/nbd" ] && break; sleep 0.05; done
    loops+=("$(losetup -f --show --direct-io=on "$dir/f$i/nbd")")
    [ -z "$MAX_KB" ] || echo "$MAX_KB" >"/sys/block/${loops[-1]#/dev/}/queue/max_sectors_kb"
done
"$RAIDLAB" create -f -l "$LEVEL" -c 64K "${loops[@]}" >"$dir/create.log" 2>&1
"$RAIDLAB" resync "${loops[@]}" >/dev/null 2>&1 || true
served=("${loops[@]}"); [ -n "$FAIL" ] && served=("${loops[@]:1}")
# shellcheck disable=SC2086
"$RAIDLAB" serve $SERVE_ARGS --socket "$dir/s.sock" -N a "${served[@]}" 2>>"$dir/serve.log" >/dev/null </dev/null &
srv=$!
for _ in $(seq 200); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
[ -S "$dir/s.sock" ] || { echo "member-requests.sh: raidlab serve did not start:" >&2; cat "$dir/serve.log" >&2; exit 1; }
for i in $(seq 0 $((N - 1))); do wc -l <"$dir/log$i" >"$dir/start$i"; done
fio --name=b --ioengine=nbd --uri="nbd+unix:///a?socket=$dir/s.sock" --size=64M --rw="$RW" --bs="$BS" \
    --iodepth="$QD" --runtime="$RUNTIME" --time_based --output-format=json 2>/dev/null | sed -n '/^{/,$p' >"$dir/out.json"
echo "RAID $LEVEL of $N${FAIL:+ (role 0 out)}, $RW $BS QD$QD, max_sectors_kb $(cat "/sys/block/${loops[0]#/dev/}/queue/max_sectors_kb"), $("$RAIDLAB" --version | head -1), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$dir" "$N" <<'PY'
import collections, json, re, sys
d, n = sys.argv[1], int(sys.argv[2])
j = json.load(open(d + "/out.json"))["jobs"][0]
x = j["read"] if j["read"]["io_bytes"] else j["write"]
print("%.1f MiB/s, %.0f IOPS" % (x["bw"] / 1024, x["iops"]))
for i in range(n):
    start = int(open("%s/start%d" % (d, i)).read())
    sizes = collections.Counter()
    for line in open("%s/log%d" % (d, i)).readlines()[start:]:
        m = re.search(r"(Read|Write) id=\d+ offset=0x[0-9a-f]+ count=0x([0-9a-f]+)", line)
        if m:
            sizes["%s %d KiB" % (m.group(1).lower(), int(m.group(2), 16) // 1024)] += 1
    print("member %d received: %s" % (i, ", ".join("%s x%d" % kv for kv in sizes.most_common(4))))
# How long nbdkit held each request (its log's request line to its reply
# line: the delay and the file I/O, serialized by noparallel, so never two
# at once): about 5.1 ms when the device is what its settings say. On a
# loaded machine the delay filter's sleep overruns, and the device is slower
# than the simulator's preset.
held = []
for i in range(n):
    start = int(open("%s/start%d" % (d, i)).read())
    begun = {}
    for line in open("%s/log%d" % (d, i)).readlines()[start:]:
        m = re.match(r"\S+ (\d+):(\d+):([\d.]+) connection=(\d+) (\.\.\.)?(Read|Write) id=(\d+)", line)
        if not m:
            continue
        t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
        key = (m.group(4), m.group(7))
        if m.group(5) is None:
            begun[key] = t
        elif key in begun:
            held.append(1e3 * (t - begun.pop(key)))
if held:
    held.sort()
    q = lambda p: held[int(p * (len(held) - 1))]
    print("nbdkit held each request (ms): median %.2f, p90 %.2f, p99 %.2f, mean %.2f; over 5.5 ms: %.0f%%"
          % (q(0.5), q(0.9), q(0.99), sum(held) / len(held), 100 * sum(h > 5.5 for h in held) / len(held)))
PY
