#!/usr/bin/env bash
# fio against raidlab on the same file: each CrystalDiskMark test (default
# profile, read and write) as one fio job, run by fio and by `raidlab bench job`
# from the very same job file, alternately, three times each; prints the median
# MB/s (10^6 B/s) of each and their ratio. Target (issue 5): within 10% for
# sequential and 15% for random tests.
#
# Usage: scripts/bench-accuracy.sh [DIR|DEVICE [SIZE [SECONDS]]]
#        scripts/bench-accuracy.sh --nbdkit [--known-only] [SECONDS]
#   --nbdkit: a device that holds still instead of a disk (issue 21): nbdkit's
#        memory plugin behind its delay filter (1 ms per read, 2 ms per write)
#        and rate filter (4000 Mbit/s), over a Unix socket, 16 server threads
#        per connection (-t 16, nbdkit's default). fio drives it with its nbd
#        engine (one connection per job, iodepth requests in flight on it),
#        raidlab with its NBD client target (the same: one connection per
#        thread, the queue depth in flight on it). First the known answers: the
#        client's own round trip on an export without delay, then read IOPS at
#        QD1 against 1/(served + round trip) and at QD32 against 16/(served +
#        round trip) (16 of the 32 are served at once), within 5%, where
#        "served" is the time nbdkit's stats filter measured per read around
#        the delay filter in that very run (1 ms asked; the sleep overshoots by
#        the timer slack and the wake-up, for fio as for raidlab); then the
#        CrystalDiskMark tests as below. Needs nbdkit (Debian nbdkit) and fio
#        built with its nbd engine (Debian's is).
#   --known-only: the known answers only (no CrystalDiskMark comparison).
#   RAIDLAB=BINARY: the raidlab to measure (default: build target/release/raidlab).
#   RAIDLAB_OLD=BINARY: also run the known answers with another raidlab binary
#        (e.g. one built before a client change), in the same run, the order of
#        the tools rotated from one measurement to the next; KA_ROUNDS=N repeats
#        the known answers N times (default 1).
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
if [ -n "${RAIDLAB:-}" ]; then
  R=$(realpath "$RAIDLAB")
else
  cargo build --release --quiet -p raidlab
  R="$PWD/target/release/raidlab"
fi
nbd_mode=
if [ "${1:-}" = --nbdkit ]; then
  nbd_mode=1
  shift
  known_only=
  if [ "${1:-}" = --known-only ]; then known_only=1; shift; fi
  command -v nbdkit >/dev/null || { echo "bench-accuracy: nbdkit is not installed (apt-get install nbdkit)" >&2; exit 1; }
  fio --enghelp 2>/dev/null | grep -qw nbd || { echo "bench-accuracy: this fio has no nbd engine" >&2; exit 1; }
  secs=${1:-5}
  size=256m
  sockdir=$(mktemp -d)
  nbdkit -U "$sockdir/plain.sock" -P "$sockdir/plain.pid" -t 16 memory 256M
  nbdkit -U "$sockdir/dev.sock" -P "$sockdir/dev.pid" -t 16 --filter=delay --filter=rate \
    memory 256M rdelay=1ms wdelay=2ms rate=4000M
  for _ in $(seq 50); do [ -S "$sockdir/dev.sock" ] && [ -S "$sockdir/plain.sock" ] && break; sleep 0.1; done
  stop_nbdkit() { kill "$(cat "$sockdir/plain.pid")" "$(cat "$sockdir/dev.pid")" 2>/dev/null || true; rm -rf "$sockdir"; }
fi
jobs=$(mktemp -d)
rlflags=()
if [ -n "$nbd_mode" ]; then
  trap 'rm -rf "$jobs"; stop_nbdkit' EXIT
  file="nbd+unix:///?socket=$sockdir/dev.sock"
  # fio's job names the export with uri= and its nbd engine; raidlab's the same
  # export as its target.
  fio_target() { printf 'ioengine=nbd\nuri=nbd+unix:///?socket=%s\n' "$1"; }
  rl_target() { printf 'filename=nbd+unix:///?socket=%s\n' "$1"; }
else
  where=${1:-$PWD/target/bench-accuracy}
  size=${2:-1g}
  secs=${3:-5}
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
  fio_target() { printf 'filename=%s\ndirect=1\nioengine=io_uring\n' "$1"; }
  rl_target() { fio_target "$1"; }
fi
# fio's nbd engine prints "fio: connected to NBD server" before the JSON.
bw='import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; print(j["read"]["bw_bytes"]+j["write"]["bw_bytes"])'
iops='import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; print(j["read"]["iops"]+j["write"]["iops"])'
# write_job FILE NAME TARGET_LINES RW BS QD
write_job() {
  cat >"$1" <<JOB
[$2]
$3
size=$size
rw=$4
bs=$5
iodepth=$6
numjobs=1
runtime=$secs
time_based
randrepeat=1
JOB
}

if [ -n "$nbd_mode" ]; then
  tools=(raidlab fio)
  if [ -n "${RAIDLAB_OLD:-}" ]; then
    [ -x "$RAIDLAB_OLD" ] || { echo "bench-accuracy: RAIDLAB_OLD=$RAIDLAB_OLD is not an executable" >&2; exit 1; }
    tools+=(raidlab-old)
  fi
  # run_tool TOOL JOB (JOB.rl and JOB.fio): the job's IOPS.
  run_tool() {
    case $1 in
      fio) fio --output-format=json "$2.fio" | python3 -c "$iops" ;;
      raidlab) "$R" bench job --json --output-format fio "$2.rl" | python3 -c "$iops" ;;
      raidlab-old) "$RAIDLAB_OLD" bench job --json --output-format fio "$2.rl" | python3 -c "$iops" ;;
    esac
  }
  # The tools in an order rotated by $1, so none always runs first.
  rotated() { local n=${#tools[@]} i; for ((i = 0; i < n; i++)); do echo "${tools[(i + $1) % n]}"; done; }
  write_job "$jobs/rt.rl" rt "$(rl_target "$sockdir/plain.sock")" randread 4k 1
  write_job "$jobs/rt.fio" rt "$(fio_target "$sockdir/plain.sock")" randread 4k 1
  for qd in 1 32; do
    write_job "$jobs/ka$qd.rl" ka$qd "$(rl_target "$sockdir/ka.sock")" randread 4k $qd
    write_job "$jobs/ka$qd.fio" ka$qd "$(fio_target "$sockdir/ka.sock")" randread 4k $qd
  done
  # ka_run TOOL QD: "IOPS SECONDS_PER_READ" of one known-answer run, on an
  # export of its own whose stats filter (outermost, so it times the delay
  # filter's sleep as served) says how long each read took inside nbdkit: a
  # sleep of 1 ms overshoots by the timer slack (50 us by default) and the
  # wake-up, more on a loaded machine, for every client alike.
  ka_run() {
    rm -f "$sockdir/ka.sock" "$sockdir/ka.stats"
    nbdkit -U "$sockdir/ka.sock" -P "$sockdir/ka.pid" -t 16 --filter=stats --filter=delay \
      memory 256M rdelay=1ms statsfile="$sockdir/ka.stats"
    for _ in $(seq 50); do [ -S "$sockdir/ka.sock" ] && break; sleep 0.1; done
    local got pid
    got=$(run_tool "$1" "$jobs/ka$2")
    pid=$(cat "$sockdir/ka.pid")
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    for _ in $(seq 50); do [ -s "$sockdir/ka.stats" ] && break; sleep 0.1; done
    echo "$got $(sed -n 's/^read: \([0-9]*\) ops, \([0-9.]*\) s.*/\2 \1/p' "$sockdir/ka.stats" | awk '{ if ($2 > 0) printf "%.9f", $1 / $2; else print "nan" }')"
  }
  turn=0
  for round in $(seq "${KA_ROUNDS:-1}"); do
    echo "known answers (round $round): nbdkit memory, delay filter rdelay=1ms, 16 threads per connection; ${secs} s per run, load $(cut -d' ' -f1-3 /proc/loadavg)"
    declare -A rt=() got1=() got32=()
    for who in $(rotated $turn); do rt[$who]=$(run_tool "$who" "$jobs/rt"); done
    turn=$((turn + 1))
    for who in $(rotated $turn); do got1[$who]=$(ka_run "$who" 1); done
    turn=$((turn + 1))
    for who in $(rotated $turn); do got32[$who]=$(ka_run "$who" 32); done
    turn=$((turn + 1))
    for qd in 1 32; do
      for who in "${tools[@]}"; do
        if [ "$qd" = 1 ]; then got=${got1[$who]}; else got=${got32[$who]}; fi
        python3 - "$qd" "$who" "${rt[$who]}" $got <<'PY'
import sys
qd, who = int(sys.argv[1]), sys.argv[2]
rt_iops, got, served = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
busy = min(qd, 16)
rt = 1 / rt_iops
want = busy / (served + rt)
ok = "ok" if abs(got / want - 1) <= 0.05 else "MISS"
print(f"RND4K Q{qd}T1 read {who:<12} {got:10.0f} IOPS, known answer {busy}/({served * 1e6:.0f} us served + {rt * 1e6:.0f} us round trip) = {want:10.0f}: {got / want:6.3f}  {ok}")
PY
      done
    done
  done
  echo "load after the known answers: $(cut -d' ' -f1-3 /proc/loadavg)"
  [ -n "$known_only" ] && exit 0
fi

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
echo "fio $(fio --version), raidlab $("$R" --version), target $file ($size), ${secs} s per run, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-20s %12s %12s %8s\n' test "fio MB/s" "raidlab MB/s" ratio
# The share of CPU time a VM's host took from this machine during the run
# (/proc/stat "steal"): on a shared VM it says how much to trust the figures.
steal() { awk '/^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i; print $9, t}' /proc/stat; }
read -r steal0 total0 < <(steal)
for t in "${tests[@]}"; do
  read -r name rw bs qd <<<"$t"
  dev=${sockdir:+$sockdir/dev.sock}
  write_job "$jobs/$name.fio" "$name" "$(fio_target "${dev:-$file}")" "$rw" "$bs" "$qd"
  write_job "$jobs/$name.rl" "$name" "$(rl_target "${dev:-$file}")" "$rw" "$bs" "$qd"
  run_fio() { fio --output-format=json "$jobs/$name.fio" | python3 -c "$bw"; }
  run_rl() { "$R" bench job "${rlflags[@]}" --json --output-format fio "$jobs/$name.rl" | python3 -c "$bw"; }
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
