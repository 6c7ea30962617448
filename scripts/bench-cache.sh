#!/usr/bin/env bash
# The cache tier against the devices under it (issue 18), on throttled
# in-memory devices: an SSD-like cache device (500 MB/s, 50,000 IOPS) in front
# of a RAID 5 of three HDD-like members (150 MB/s, 150 IOPS, 512K chunks).
# Cache hits and write-back writes against the SSD alone, misses against the
# RAID 5 alone, a flush of 64 MiB of contiguous dirty blocks against the
# RAID 5's 1 MiB sequential writes; each side ROUNDS times, alternating which
# goes first; Markdown table of medians and ratios against the issue's targets.
# Everything runs in one process (crates/raidlab-cache/examples/cache_bench.rs);
# nothing is written outside memory. About 5 minutes with the defaults.
#   scripts/bench-cache.sh                  # 3 rounds of 5 s per side
#   ROUNDS=5 SECONDS_EACH=10 scripts/bench-cache.sh
#   scripts/bench-cache.sh seed-b           # SEEDS.md seed B (IOzone, 4K records)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
SECONDS_EACH=${SECONDS_EACH:-5}
cargo build --release --quiet -p raidlab-cache --example cache_bench
bin="${CARGO_TARGET_DIR:-target}/release/examples/cache_bench"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${1:-}" = seed-b ]; then
    "$bin" seed-b
else
    "$bin" --rounds "$ROUNDS" --seconds "$SECONDS_EACH" "$@"
fi
echo "# done $(date -u '+%H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
