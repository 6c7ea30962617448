#!/usr/bin/env bash
# Where a served array's member time goes under a queue-depth load: an
# array (RAID LEVEL of N members, 64K chunks) on bench-nbd-raid-devices.sh's
# hdd-seek members (each a loop device over nbdfuse over nbdkit's delay and
# noparallel filters: SEEK_MS a request, one at a time), served by raidlab,
# fio's 4K random writes (RW=randwrite, or randread) at QD over one NBD
# connection for SECONDS, while a sampler reads every member's
# /sys/block/*/inflight every 0.2 ms. It prints fio's IOPS, the member
# requests per fio I/O, and for the steady state (from 1 s after the first
# member request to 1 s before the last) each member's share of samples
# with nothing in flight, its mean queue, and the length of its idle spells.
# A member idle while requests wait elsewhere is time the array leaves on
# the table; a member never idle means the array is device-bound.
#
#   scripts/bench-member-queues.sh [RAIDLAB] [SECONDS] [LEVEL] [N]
#   QD=1 RW=randread scripts/bench-member-queues.sh target/release/raidlab 10 6 5
#   SERVE_ARGS="--stripe-hold 100" scripts/bench-member-queues.sh
#
# Needs root, fio, nbdkit, nbdfuse (libnbd-bin), fuse3, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
R=${1:-target/release/raidlab}; T=${2:-10}; LEVEL=${3:-5}; N=${4:-4}
QD=${QD:-32}; RW=${RW:-randwrite}; SEEK_MS=${SEEK_MS:-5.3}
SERVE_ARGS=${SERVE_ARGS:-}   # more options for `raidlab serve` (e.g. --stripe-hold 100)
[ "$(id -u)" = 0 ] || { echo "bench-member-queues.sh: needs root (loop devices)" >&2; exit 2; }
for t in fio nbdkit nbdfuse fusermount3 python3; do
    command -v $t >/dev/null || { echo "bench-member-queues.sh: $t is not installed (apt-get install fio nbdkit libnbd-bin fuse3 python3)" >&2; exit 2; }
done
[ -x "$R" ] || cargo build --release -p raidlab
# shellcheck source=scripts/nbd-delay-lib.sh
. scripts/nbd-delay-lib.sh
D=$(mktemp -d /tmp/member-queues.XXXXXX)
loops=()
files=()
for i in $(seq 0 $((N - 1))); do
    truncate -s 0 /dev/shm/mq$$-$i; truncate -s 512M /dev/shm/mq$$-$i; files+=(/dev/shm/mq$$-$i)
done
# Created and made consistent on the files themselves (fast), then served
# through the delayed members over the same files.
"$R" create -f -l $LEVEL -c 64K "${files[@]}" >$D/create.log 2>&1
"$R" resync "${files[@]}" >>$D/create.log 2>&1 || true
for i in $(seq 0 $((N - 1))); do
    delayed_member_up $D $i /dev/shm/mq$$-$i "$SEEK_MS"
    loops+=("$DELAYED_LOOP")
done
cleanup() {
    [ -n "${PY_PID:-}" ] && kill -9 $PY_PID 2>/dev/null
    [ -n "${SP:-}" ] && kill $SP 2>/dev/null && wait $SP 2>/dev/null || true
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    for i in $(seq 0 $((N - 1))); do delayed_member_down $D $i; rm -f /dev/shm/mq$$-$i; done
    rm -rf "$D"
}
trap cleanup EXIT
# shellcheck disable=SC2086
"$R" serve --socket $D/s.sock -N a $SERVE_ARGS "${loops[@]}" 2>$D/serve.log &
SP=$!
for _ in $(seq 600); do [ -S $D/s.sock ] && break; sleep 0.1; done
URI="nbd+unix:///a?socket=$D/s.sock"
python3 - "${loops[@]}" > $D/inflight.txt <<'PY' &
import sys, time, os, signal
signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
devs=[d.split('/')[-1] for d in sys.argv[1:]]
fds=[open('/sys/block/%s/inflight'%d) for d in devs]
rows=[]
try:
    while True:
        t=time.monotonic(); q=[]
        for f in fds:
            f.seek(0); r,w=map(int,f.read().split()); q.append(r+w)
        rows.append((t,q))
        time.sleep(0.0002)
except (Exception, KeyboardInterrupt):
    pass
busy=[i for i,(t,q) in enumerate(rows) if sum(q)>0]
if busy:
    t0=rows[busy[0]][0]+1.0; t1=rows[busy[-1]][0]-1.0
    mid=[(t,q) for t,q in rows if t0<=t<=t1]
    n=len(mid) or 1
    for i,d in enumerate(devs):
        print(d,'idle %.2f%%'%(100*sum(1 for t,q in mid if q[i]==0)/n),'mean q %.1f'%(sum(q[i] for t,q in mid)/n))
    print('all idle %.2f%%, some idle %.2f%%, samples %d over %.1f s'%(100*sum(1 for t,q in mid if sum(q)==0)/n,100*sum(1 for t,q in mid if 0 in q)/n,n,t1-t0))
    # idle episodes per member: lengths
    for i,d in enumerate(devs):
        eps=[];cur=None
        for t,q in mid:
            if q[i]==0:
                if cur is None: cur=t
            elif cur is not None:
                eps.append(t-cur);cur=None
        eps.sort()
        if eps: print(d,'idle episodes %d, median %.2f ms, p90 %.2f ms, max %.2f ms'%(len(eps),1000*eps[len(eps)//2],1000*eps[int(len(eps)*0.9)],1000*eps[-1]))
PY
PY_PID=$!
# Completed reads, writes and flushes of the members (stat fields 1, 5, 16).
member_ios() { for l in "${loops[@]}"; do awk '{print $1, $5, $16}' /sys/block/${l#/dev/}/stat; done | awk '{r+=$1; w+=$2; f+=$3} END {print r, w, f}'; }
before=$(member_ios)
fio --name=b --ioengine=nbd --uri="$URI" --size=128M --iodepth=$QD --rw=$RW --bs=4k --runtime=$T --time_based --end_fsync=1 --randrepeat=0 --output-format=json > $D/fio.json
kill -TERM $PY_PID; wait $PY_PID || true; PY_PID=
after=$(member_ios)
python3 -c "
import json; t=open('$D/fio.json').read(); j=json.loads(t[t.index('{'):])['jobs'][0]['$([ "$RW" = randread ] && echo read || echo write)']; print('IOPS %.1f ios %d' % (j['iops'], j['total_ios']))
b='$before'.split(); a='$after'.split(); n=j['total_ios']
print('member reads/io %.2f writes/io %.2f flushes %d (fio ends with one fsync); member req/s %.1f' % ((int(a[0])-int(b[0]))/n, (int(a[1])-int(b[1]))/n, int(a[2])-int(b[2]), (int(a[0])-int(b[0])+int(a[1])-int(b[1]))/ $T))"
cat $D/inflight.txt
