# Shared by bench-nbd-raid.sh and bench-nbd-raid-devices.sh (sourced, not run):
# the job list, fio's JSON to "MiB/s IOPS", the median of runs, ratios and the
# figure compared. Both scripts must read the same jobs the same way.

# "name rw bs qd"
jobs=(
    "seq-write-1M-QD8 write 1M 8"
    "seq-read-1M-QD8 read 1M 8"
    "rand-write-4K-QD1 randwrite 4k 1"
    "rand-read-4K-QD1 randread 4k 1"
    "rand-write-4K-QD32 randwrite 4k 32"
    "rand-read-4K-QD32 randread 4k 32"
)

# fio's JSON (after any lines the nbd engine prints) -> "MiB/s IOPS" of the
# direction that moved bytes; a run with I/O errors has no meaningful figure.
# shellcheck disable=SC2034 # used by the scripts that source this
parse='
import json, sys
text = sys.stdin.read()
j = json.loads(text[text.index("{"):])["jobs"][0]
side = j["read"] if j["read"]["io_bytes"] > 0 else j["write"]
print("ERROR ERROR" if j["error"] else "%.1f %.0f" % (side["bw"] / 1024, side["iops"]))'

median() { # "bw iops"... -> the median run by bandwidth; with an even count, the
            # mean of the middle two (ERROR if any failed)
    python3 -c '
import sys
runs = sys.argv[1:]
if any("ERROR" in r for r in runs):
    print("ERROR ERROR")
else:
    runs = sorted((tuple(map(float, r.split())) for r in runs))
    k = len(runs) // 2
    mid = [runs[k]] if len(runs) % 2 else [runs[k - 1], runs[k]]
    print("%.1f %.0f" % tuple(sum(v) / len(mid) for v in zip(*mid)))' "$@"
}
ratio() { # a b -> "a/b" as "1.23x", n/a if either failed
    python3 -c "import sys; a, b = sys.argv[1:]; print('n/a' if 'ERROR' in (a, b) else '%.2fx' % (float(a) / max(float(b), 0.1)))" "$1" "$2"
}
# The figure compared: IOPS for 4K jobs, MiB/s for the others.
figure() { # bs "bw iops" -> the figure
    if [ "$1" = 4k ]; then echo "${2#* }"; else echo "${2% *}"; fi
}
