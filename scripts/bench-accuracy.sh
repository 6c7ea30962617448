#!/usr/bin/env bash
# fio against raidlab on the same file: each CrystalDiskMark test (default
# profile, read and write) as one fio job, run by fio and by `raidlab bench job`
# from the very same job file, alternately, three times each; prints the median
# MB/s (10^6 B/s) of each and their ratio. Target (issue 5): within 10% for
# sequential and 15% for random tests.
#
# Usage: scripts/bench-accuracy.sh [DIR|DEVICE [SIZE [SECONDS]]]
#   DIR: where the test file goes (default: a new directory under the repository's
#        target/, i.e. on the disk you build on); or a block DEVICE, used directly
#        and OVERWRITTEN (e.g. a loop device over a file in /dev/shm, which keeps a
#        VM host's disk cache out of the comparison); or a directory in /dev/shm
#        (tmpfs takes O_DIRECT on current kernels, and no loop worker thread sits
#        between the tools and memory); SIZE default 1g; SECONDS per run 5, as
#        CrystalDiskMark measures.
# Both tools run fio's defaults, which include stamping every written buffer
# (scramble_buffers): raidlab's job runner does it too.
# Needs fio (Debian package fio) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v fio >/dev/null || { echo "bench-accuracy: fio is not installed (apt-get install fio)" >&2; exit 1; }
cargo build --release --quiet -p raidlab
R="$PWD/target/release/raidlab"
where=${1:-$PWD/target/bench-accuracy}
size=${2:-1g}
secs=${3:-5}
jobs=$(mktemp -d)
rlflags=()
if [ -b "$where" ]; then
  file=$where
  rlflags=(--write-device)
  trap 'rm -rf "$jobs"' EXIT
else
  mkdir -p "$where"
  file="$where/accuracy.dat"
  trap 'rm -rf "$jobs" "$file"' EXIT
fi

# Lay the file out once with real data, so no test reads holes.
fio --name=layout --filename="$file" --rw=write --bs=1m --size="$size" --direct=1 \
    --ioengine=io_uring --iodepth=8 --output=/dev/null

# name rw bs iodepth
tests=(
  "SEQ1M_Q8T1_read read 1m 8"
  "SEQ1M_Q1T1_read read 1m 1"
  "RND4K_Q32T1_read randread 4k 32"
  "RND4K_Q1T1_read randread 4k 1"
  "SEQ1M_Q8T1_write write 1m 8"
  "SEQ1M_Q1T1_write write 1m 1"
  "RND4K_Q32T1_write randwrite 4k 32"
  "RND4K_Q1T1_write randwrite 4k 1"
)
echo "fio $(fio --version), raidlab $("$R" --version), file $file ($size), ${secs} s per run, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-20s %12s %12s %8s\n' test "fio MB/s" "raidlab MB/s" ratio
# The share of CPU time a VM's host took from this machine during the run
# (/proc/stat "steal"): on a shared VM it says how much to trust the figures.
steal() { awk '/^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i; print $9, t}' /proc/stat; }
read -r steal0 total0 < <(steal)
for t in "${tests[@]}"; do
  read -r name rw bs qd <<<"$t"
  job="$jobs/$name.fio"
  cat >"$job" <<JOB
[$name]
filename=$file
size=$size
rw=$rw
bs=$bs
iodepth=$qd
numjobs=1
direct=1
ioengine=io_uring
runtime=$secs
time_based
randrepeat=1
JOB
  bw='import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(j["read"]["bw_bytes"]+j["write"]["bw_bytes"])'
  run_fio() { fio --output-format=json "$job" | python3 -c "$bw"; }
  run_rl() { "$R" bench job "${rlflags[@]}" --json --output-format fio "$job" | python3 -c "$bw"; }
  # One unrecorded run first (caches below the file system, e.g. a VM host's,
  # warm up during the first runs), then alternate which tool goes first, so
  # neither is always the one that runs on a warmer cache.
  run_fio >/dev/null
  fio_bw=(); rl_bw=()
  for i in 1 2 3; do
    if [ $((i % 2)) = 1 ]; then
      fio_bw+=("$(run_fio)"); rl_bw+=("$(run_rl)")
    else
      rl_bw+=("$(run_rl)"); fio_bw+=("$(run_fio)")
    fi
  done
  python3 - "$name" "${fio_bw[@]}" "${rl_bw[@]}" <<'PY'
import sys, statistics
name = sys.argv[1]
v = [float(x) for x in sys.argv[2:]]
f, r = statistics.median(v[:3]) / 1e6, statistics.median(v[3:]) / 1e6
limit = 0.10 if name.startswith("SEQ") else 0.15
ok = "ok" if abs(r / f - 1) <= limit else "MISS"
print(f"{name:<20} {f:12.2f} {r:12.2f} {r / f:8.3f}  {ok} (runs fio {[round(x / 1e6, 1) for x in v[:3]]}, raidlab {[round(x / 1e6, 1) for x in v[3:]]})")
PY
done
read -r steal1 total1 < <(steal)
echo "host steal during the run: $(( (steal1 - steal0) * 100 / (total1 - total0 + 1) ))% of CPU time; load $(cut -d' ' -f1-3 /proc/loadavg)"
