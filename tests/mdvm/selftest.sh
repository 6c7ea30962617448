#!/bin/bash
# Exercise the guest side of the matrix without raidlab (two boots):
#   boot 1: every matrix.txt array is created by md ("A" lines), written
#           with the pattern, stopped, examined, re-assembled and verified;
#   boot 2: the members md just wrote are fed back as "B" lines, i.e. the
#           path raidlab-made arrays take (assemble clean, sha256, check,
#           degraded read-only assemblies).
# Usage: selftest.sh [OUTDIR]    (default tests/mdvm/work/selftest)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-$HERE/work/selftest}"
rm -rf "$OUT"; mkdir -p "$OUT/g1" "$OUT/g2"
GDIR="$("$HERE/build.sh" | tail -n1)"; export MDVM_GUEST="$GDIR"
MIB=$((1024 * 1024))
PAT=$((64 * MIB))
DATA="$OUT/data.img"
truncate -s 0 "$DATA"
head -c "$PAT" /dev/urandom >"$DATA"
off=$PAT
: >"$OUT/g1/manifest"
grep -v '^#' "$HERE/matrix.txt" | while read -r name level layout chunk n mmib _flags; do
    offs=""
    for _ in $(seq 1 "$n"); do offs="$offs${offs:+,}$off"; off=$((off + mmib * MIB)); done
    echo "A $name $level $layout $chunk $n $((mmib * MIB)) $offs" >>"$OUT/g1/manifest"
    echo "$off" >"$OUT/end"
done
truncate -s "$(cat "$OUT/end")" "$DATA"
cp "$HERE/guest-matrix.sh" "$OUT/g1/guest.sh"; cp "$HERE/guest-matrix.sh" "$OUT/g2/guest.sh"
echo "== boot 1 (md creates)"
rc=0; MDVM_OUT="$OUT/run1" "$HERE/run.sh" "$OUT/g1" "$DATA" 900 || rc=$?
cat "$OUT/run1/accel.txt" "$OUT/run1/host-timing" 2>/dev/null || true
grep -E '^(RESULT|NOTE|DONE)' "$OUT/run1/results/results.txt" || true
[ "$rc" = 0 ] || echo "boot 1 status $rc"

degraded() { # level layout n
    case "$1" in
        0) echo - ;;
        1) if [ "$3" -ge 3 ]; then echo "1;0,2"; else echo 1; fi ;;
        4|5) echo 1 ;;
        6) echo "1;0,2;$(($3 - 2)),$(($3 - 1))" ;;
        10) c="${2#?}"
            if [ "$c" = 3 ]; then echo "1;0,1"; elif [ "$3" -ge 4 ]; then echo "1;0,2"; else echo 1; fi ;;
    esac
}
: >"$OUT/g2/manifest"
out=$(cat "$OUT/end")
: >"$OUT/expect"
while read -r kind name level layout chunk n mb offs; do
    ab="$(cat "$OUT/run1/results/A/$name/array_bytes" 2>/dev/null || echo 0)"
    [ "$ab" != 0 ] || continue
    sets="$(degraded "$level" "$layout" "$n")"
    echo "B $name $level $n $mb $offs $ab $out $sets" >>"$OUT/g2/manifest"
    k=1; [ "$sets" = - ] || k=$((1 + $(echo "$sets" | tr ';' ' ' | wc -w)))
    stride=$(((ab + MIB - 1) / MIB * MIB))
    echo "$name $ab $out $stride $k" >>"$OUT/expect"
    out=$((out + k * stride))
done <"$OUT/g1/manifest"
truncate -s "$out" "$DATA"
echo "== boot 2 (md assembles what boot 1 left)"
rc2=0; MDVM_OUT="$OUT/run2" "$HERE/run.sh" "$OUT/g2" "$DATA" 900 || rc2=$?
cat "$OUT/run2/accel.txt" "$OUT/run2/host-timing" 2>/dev/null || true
grep -E '^(RESULT|NOTE|DONE)' "$OUT/run2/results/results.txt" || true
# every read md made of the arrays must be the pattern
bad=0
while read -r name ab out stride k; do
    for i in $(seq 0 $((k - 1))); do
        if ! cmp -s -n "$ab" -i "0:$((out + i * stride))" "$DATA" "$DATA"; then
            echo "COPY-MISMATCH $name read $i"; bad=1
        fi
    done
done <"$OUT/expect"
[ "$bad" = 0 ] && echo "all md reads of boot 2 equal the pattern"
[ "$rc" = 0 ] && [ "$rc2" = 0 ] && [ "$bad" = 0 ]
