#!/usr/bin/env bash
# A first look at raidlab that needs nothing but a Rust toolchain: builds it, runs
# `raidlab bench` (the main job: the source articles' experiments redone on
# simulated disks, SSDs and RAID cards, each article's figures beside raidlab's,
# in about 10 s; the JSON results and an HTML report are written to the current
# directory), then makes a RAID 5 of
# sparse files, writes data through it, reads it back with a member missing, and
# shows the I/O plans and parity speed.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
R="$PWD/target/release/raidlab"
echo "== raidlab bench"
"$R" bench
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
echo "== raidlab create --level 5 --chunk 64K --member-size 64M m0 m1 m2 m3"
"$R" create --level 5 --chunk 64K --member-size 64M m0 m1 m2 m3
head -c 150000000 /dev/urandom > data
echo "== raidlab import m0 m1 m2 m3 --input data"
"$R" import m0 m1 m2 m3 --input data
echo "== raidlab detail m0 m1 m2 m3"
"$R" detail m0 m1 m2 m3
echo "== raidlab export m0 missing m2 m3 (member 1 gone: rebuilt from parity)"
"$R" export m0 missing m2 m3 --length 150000000 | cmp - data && echo "identical to what was written"
echo "== raidlab explain --level 5 --raid-devices 4 write 0 4K  (the small-write penalty)"
"$R" explain --level 5 --raid-devices 4 --chunk 64K write 0 4K
echo "== raidlab bench parity"
"$R" bench parity --seconds 0.1
