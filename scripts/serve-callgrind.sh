#!/usr/bin/env bash
# Instructions per served 4K write, for comparing raidlab binaries where
# IOPS on a shared VM swing too much (docs/benchmarks.md): a RAID 5 of four
# files in /dev/shm served by `raidlab serve` under valgrind's callgrind,
# fio's nbd engine writing N random 4K blocks at queue depth 1. Prints the
# instructions of the whole server per write, the same less those spent
# spinning for the next request (that depends on time, not on work), and
# those of the safe-mode gate (0 for a binary without one).
#
#   scripts/serve-callgrind.sh target/release/raidlab [N]
#
# Needs valgrind and fio. Run each binary twice: the counts move by ~1%.
set -euo pipefail
BIN="${1:?the raidlab binary}"
N="${2:-30000}"
work="$(mktemp -d /dev/shm/raidlab-cg.XXXXXX)"
srv=""
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
"$BIN" create -l 5 -c 64K --member-size 256M "$work"/m0 "$work"/m1 "$work"/m2 "$work"/m3 >/dev/null 2>&1
valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
    "$BIN" serve --socket "$work/s.sock" -N a "$work"/m0 "$work"/m1 "$work"/m2 "$work"/m3 \
    2>"$work/serve.log" &
srv=$!
for _ in $(seq 600); do [ -S "$work/s.sock" ] && break; sleep 0.1; done
fio --name=j --ioengine=nbd --uri="nbd+unix:///a?socket=$work/s.sock" --rw=randwrite --bs=4k \
    --iodepth=1 --size=512M --number_ios="$N" --output-format=terse >/dev/null 2>&1
# A stop writes callgrind's counts out as the server exits.
kill -TERM "$srv"; wait "$srv" 2>/dev/null || true; srv=""
callgrind_annotate --inclusive=yes --threshold=100 "$work/cg.out" 2>/dev/null >"$work/cg.txt"
python3 - "$work/cg.txt" "$N" <<'PY'
import sys
text, n = open(sys.argv[1]).read().splitlines(), int(sys.argv[2])
def count(what):
    for line in text:
        if what in line:
            return int(line.split()[0].replace(",", ""))
    return 0
total = count("PROGRAM TOTALS")
spin = count("raidlab_nbd::server::spin_for_request")
gated = count("<raidlab_raid::live::safe_mode::Gated as raidlab_core::volume::Volume>::write_at")
array = count("<raidlab_raid::array::Array as raidlab_core::volume::Volume>::write_at")
print(f"instructions per write: {total / n:.0f} in all, {(total - spin) / n:.0f} less spinning, "
      f"{(gated - array) / n if gated else 0:.0f} in the gate")
PY
