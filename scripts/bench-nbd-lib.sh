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
# The runs recorded by the caller in the associative array `runs`, keyed
# "order,name,client,side" with space-separated "bw:iops" values.
side_median() { # name client bs side orders... -> the figure of the median run of those set-ups
    local name=$1 client=$2 bs=$3 side=$4 o x all=()
    shift 4
    for o in "$@"; do
        for x in ${runs[$o,$name,$client,$side]}; do all+=("${x/:/ }"); done
    done
    figure "$bs" "$(median "${all[@]}")"
}
# One table row per test of `selected` ("name client rw bs qd"), pooled and
# per set-up order; `label CLIENT` (the caller's) names the client column.
# With `with_md` set, two more columns: the md side (`m`) and raidlab / md.
print_rows() { # level
    local t name client rw bs qd unit x y z first last
    for t in "${selected[@]}"; do
        read -r name client rw bs qd <<<"$t"
        unit="MiB/s"; [ "$bs" = 4k ] && unit=IOPS
        x=$(side_median "$name" "$client" "$bs" r raidlab-first btrfs-first)
        y=$(side_median "$name" "$client" "$bs" b raidlab-first btrfs-first)
        first=$(ratio "$(side_median "$name" "$client" "$bs" r raidlab-first)" "$(side_median "$name" "$client" "$bs" b raidlab-first)")
        last=$(ratio "$(side_median "$name" "$client" "$bs" r btrfs-first)" "$(side_median "$name" "$client" "$bs" b btrfs-first)")
        if [ -n "${with_md:-}" ] && [ -z "${runs[raidlab-first,$name,$client,m]:-}${runs[btrfs-first,$name,$client,m]:-}" ]; then
            # md runs only the levels asked of it (MD_LEVELS).
            echo "| RAID $1 | $name | $(label "$client") | $x $unit | $y $unit | $(ratio "$x" "$y") | $first | $last | - | - |"
        elif [ -n "${with_md:-}" ]; then
            z=$(side_median "$name" "$client" "$bs" m raidlab-first btrfs-first)
            echo "| RAID $1 | $name | $(label "$client") | $x $unit | $y $unit | $(ratio "$x" "$y") | $first | $last | $z $unit | $(ratio "$x" "$z") |"
        else
            echo "| RAID $1 | $name | $(label "$client") | $x $unit | $y $unit | $(ratio "$x" "$y") | $first | $last |"
        fi
    done
}
# nbdcopy of the whole export to null:, over and over for RUNTIME seconds;
# prints "MiB/s requests/s" like the fio sides (1 MiB requests).
copy_nbd() { # uses URI, NJOBS, RUNTIME
    local size t0 t1 copies=0
    size=$(nbdinfo --size "$URI")
    t0=$(date +%s.%N)
    while :; do
        nbdcopy --connections="$NJOBS" --threads="$NJOBS" --requests=8 --request-size=1048576 \
            --queue-size=$((8 << 20)) "$URI" null: || { echo "ERROR ERROR"; return; }
        copies=$((copies + 1))
        t1=$(date +%s.%N)
        python3 -c "import sys; sys.exit(float(sys.argv[2]) - float(sys.argv[1]) < $RUNTIME)" "$t0" "$t1" && break
    done
    python3 -c "import sys; b, t = int(sys.argv[1]), float(sys.argv[3]) - float(sys.argv[2]); m = b / 1048576 / t; print('%.1f %.0f' % (m, m))" \
        $((size * copies)) "$t0" "$t1"
}
# The tests, "name client rw bs qd": the job list (only names containing a
# word of JOBS, if given) once per fio client kind of CLIENTS, then the copy.
select_tests() {
    local c j name rw bs qd w keep
    selected=()
    for c in $CLIENTS; do
        [ "$c" = copy ] && continue
        for j in "${jobs[@]}"; do
            read -r name rw bs qd <<<"$j"
            if [ -n "$JOBS" ]; then
                keep=""
                for w in $JOBS; do [[ $name == *"$w"* ]] && keep=1; done
                [ -n "$keep" ] || continue
            fi
            selected+=("$name $c $rw $bs $qd")
        done
    done
    [[ " $CLIENTS " == *" copy "* ]] && selected+=("whole-export-read-1M copy read 1M 8")
    return 0
}
# mkfs.btrfs with data and metadata profile $1 on devices $2...; log in $dir.
# mkfs.btrfs checks every mount point in /proc/mounts and gives up on one it
# cannot stat (a FUSE mount whose daemon died: "cannot check mount status ...
# Transport endpoint is not connected"). Run it in a private mount namespace
# with such mounts detached there only.
mkfs_btrfs() { # profile devices...
    # shellcheck disable=SC2016
    unshare -m --propagation private sh -c '
        for m in $(cut -d" " -f2 /proc/mounts); do stat -t "$m" >/dev/null 2>&1 || umount -l "$m"; done
        exec mkfs.btrfs -q -f -d "$0" -m "$0" "$@"' "$@" >"$dir/mkfs.log" 2>&1 || {
        echo "$(basename "$0"): mkfs.btrfs -d $1 -m $1 failed:" >&2
        cat "$dir/mkfs.log" >&2
        exit 1
    }
}
