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
#   scripts/bench-cache.sh seed-b-files     # seed B through `raidlab bench iozone`
#                                           # on real member files, throttled
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
SECONDS_EACH=${SECONDS_EACH:-5}
if [ "${1:-}" = seed-b-files ]; then
    # Seed B as a user runs it: a RAID 5 of three member files made by
    # `raidlab create` (512K chunks, 64 MiB of data each), a 256 MiB
    # write-back cache of 4K blocks made by `raidlab cache create` at its
    # other defaults, and `raidlab bench iozone -I`-style runs (1 MiB and
    # 16 MiB files, 4 KiB records) on the array alone and on the cached
    # array, each member throttled to an HDD's 150 MB/s and 150 IOPS and the
    # cache file to an SSD's 500 MB/s and 50,000 IOPS (the target options
    # bw= and iops=). The files go in $DIR (default a new directory under
    # /var/tmp), removed at the end. Ten minutes or so.
    cargo build --release --quiet -p raidlab
    raidlab="${CARGO_TARGET_DIR:-target}/release/raidlab"
    dir=${DIR:-$(mktemp -d /var/tmp/raidlab-seed-b.XXXXXX)}
    trap 'rm -f "$dir"/hdd?.img "$dir"/ssd.img; rmdir "$dir" 2>/dev/null || true' EXIT
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); files in $dir"
    m="$dir/hdd0.img,$dir/hdd1.img,$dir/hdd2.img"
    "$raidlab" create --level 5 --chunk 512K --member-size 72M "$dir"/hdd0.img "$dir"/hdd1.img "$dir"/hdd2.img >/dev/null
    truncate -s 260M "$dir/ssd.img"
    "$raidlab" cache create --cache "$dir/ssd.img" --mode writeback --block 4K \
        "$dir"/hdd0.img "$dir"/hdd1.img "$dir"/hdd2.img >/dev/null
    hdd="bw=150000000,iops=150"
    for target in "array:$m,$hdd" "cache:$dir/ssd.img,bw=500000000,iops=50000@array:$m,$hdd"; do
        echo "## $target"
        "$raidlab" bench iozone --file-sizes 1M,16M --record-sizes 4K --direct --include-flush "$target"
    done
    echo "# done $(date -u '+%H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
    exit 0
fi
cargo build --release --quiet -p raidlab-cache --example cache_bench
bin="${CARGO_TARGET_DIR:-target}/release/examples/cache_bench"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${1:-}" = seed-b ]; then
    "$bin" seed-b
else
    "$bin" --rounds "$ROUNDS" --seconds "$SECONDS_EACH" "$@"
fi
echo "# done $(date -u '+%H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
