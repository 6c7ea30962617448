//! md's write-intent bitmap in the simulator: a write to a clean bitmap chunk
//! costs the engine's bitmap update (a write and a flush on every member in
//! service) before its data; a write to a chunk already dirty costs nothing
//! more; md's daemon (the engine's) clears idle bits on its second pass and
//! writes the bitmap once for all of them, after a flush that makes the data
//! the bits covered durable; a degraded array keeps its bits. Exact counts
//! on ideal members, in virtual time, the engine run live (the daemon is the
//! engine's own loop, a task sleeping on the virtual clock).

use raidlab_core::IoKind;
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_sim::array::{ArraySpec, TaskArray, DATA_OFFSET};
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{Device, Ns, Request, SEC};
use raidlab_sim::host::HostCost;
use raidlab_sim::ideal::Ideal;
use raidlab_sim::stats::MemberIo;

const MEMBER: u64 = 64 << 20;
const CHUNK: u64 = 64 << 10;
/// Bitmap chunk: 64 bitmap chunks per member.
const BM_CHUNK: u64 = 1 << 20;

fn array(level: Level, n: usize, failed: &[usize]) -> TaskArray {
    let g = Geometry::new(
        level,
        Layout::parse(level, None).unwrap(),
        if level == Level::Raid1 { 0 } else { CHUNK },
        n,
        MEMBER,
    )
    .unwrap();
    let spec = ArraySpec {
        name: "bm".into(),
        geometry: g,
        members: (0..n)
            .map(|r| {
                (!failed.contains(&r)).then(|| {
                    Box::new(Ideal::new(DATA_OFFSET + MEMBER, 50.0, 200.0)) as Box<dyn Device>
                })
            })
            .collect(),
        stripe_cache: None,
        host: HostCost::default(),
        rebuild: None,
    };
    let mut sim = TaskArray::build(spec, None, Some(Some(BM_CHUNK))).unwrap();
    sim.keep_ops();
    sim
}

/// Write 4 KiB at each offset in turn, each after the last completed,
/// starting at `now`; the virtual time the last completed.
fn write_each(sim: &mut TaskArray, mut now: Ns, offsets: &[u64]) -> Ns {
    let mut done = Vec::new();
    for (id, &offset) in offsets.iter().enumerate() {
        sim.submit(
            now,
            Request {
                id: id as u64,
                kind: IoKind::Write,
                offset,
                len: 4096,
                process: 0,
            },
        );
        while done.is_empty() {
            let t = sim.next_event().expect("a write under way has events");
            sim.advance(t, &mut done);
        }
        now = done.pop().unwrap().at;
        assert!(done.is_empty());
    }
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
    now
}

/// Member operations from index `from` on: (bitmap writes, flushes, data writes).
fn count(sim: &TaskArray, from: usize) -> (usize, usize, usize) {
    let ops: &[MemberIo] = &sim.member_ops().unwrap().ops[from..];
    let meta = ops
        .iter()
        .filter(|o| o.kind == IoKind::Write && o.offset < DATA_OFFSET)
        .count();
    let flushes = ops.iter().filter(|o| o.kind == IoKind::Flush).count();
    let data = ops
        .iter()
        .filter(|o| o.kind == IoKind::Write && o.offset >= DATA_OFFSET)
        .count();
    (meta, flushes, data)
}

fn ops_len(sim: &TaskArray) -> usize {
    sim.member_ops().unwrap().ops.len()
}

#[test]
fn raid1_writes_to_clean_chunks_cost_a_bitmap_update_and_a_second_pass_does_not() {
    raid1_clean_chunks(&mut array(Level::Raid1, 2, &[]));
}

fn raid1_clean_chunks(sim: &mut TaskArray) {
    // Four clean bitmap chunks (0, 3, 10, 20), then two more writes in chunk 3.
    let first: Vec<u64> = [0, 3, 10, 20].iter().map(|c| c * BM_CHUNK + 8192).collect();
    let t = write_each(sim, 0, &first);
    assert_eq!(
        count(sim, 0),
        (4 * 2, 4 * 2, 4 * 2),
        "bitmap write + flush on both members per chunk"
    );
    let mark = ops_len(sim);
    let t = write_each(sim, t, &[3 * BM_CHUNK + 65536, 3 * BM_CHUNK + 131072]);
    assert_eq!(count(sim, mark), (0, 0, 2 * 2), "chunk 3 is dirty already");
    // Second pass over the same chunks, before the daemon's first pass.
    assert!(t < 5 * SEC);
    let mark = ops_len(sim);
    let t = write_each(sim, t, &first);
    assert_eq!(count(sim, mark), (0, 0, 4 * 2));
    // Idle: the daemon's first pass (5 s) finds the chunks idle, its second
    // (10 s) clears them and writes the bitmap once; then it stops (no bits).
    // Before the bitmap write, a flush of every member: a cleared bit must
    // not reach a member before the data it covered is durable (md's bitmap
    // write carries a cache flush before it).
    let mark = ops_len(sim);
    let mut done = Vec::new();
    let mut last = t;
    while let Some(at) = sim.next_event() {
        sim.advance(at, &mut done);
        last = at;
    }
    assert_eq!(sim.bitmap_cleared(), Some(4));
    assert_eq!(
        count(sim, mark),
        (2, 2 * 2, 0),
        "per member: a flush, one bitmap write and its flush"
    );
    assert!(
        (10 * SEC..11 * SEC).contains(&last),
        "cleared at the second pass: {last}"
    );
    // The chunks are clean again: writing them costs the update again.
    let mark = ops_len(sim);
    write_each(sim, last, &first);
    assert_eq!(count(sim, mark), (4 * 2, 4 * 2, 4 * 2));
}

#[test]
fn raid5_bitmap_counts_member_chunks_and_writes_every_member() {
    raid5_member_chunks(&mut array(Level::Raid5, 4, &[]));
}

fn raid5_member_chunks(sim: &mut TaskArray) {
    // Array offsets 0 and 3 * CHUNK are in stripe 0 and stripe 1: member
    // offsets 0 and 64 KiB, one bitmap chunk (member sectors, as md's).
    let t = write_each(sim, 0, &[0, 3 * CHUNK]);
    // The first dirties member chunk 0 on the data and parity members: one
    // update (a write and a flush on each of 4 members); the second is in the
    // same member chunk. Each 4K write is a read-modify-write: 2 data writes.
    assert_eq!(count(sim, 0), (4, 4, 2 * 2));
    // Array offset 3 * 16 MiB is member offset 16 MiB: bitmap chunk 16.
    let mark = ops_len(sim);
    write_each(sim, t, &[3 * 16 * BM_CHUNK]);
    assert_eq!(count(sim, mark), (4, 4, 2));
}

#[test]
fn a_degraded_array_keeps_its_bits() {
    degraded_keeps_bits(&mut array(Level::Raid1, 2, &[1]));
}

fn degraded_keeps_bits(sim: &mut TaskArray) {
    let t = write_each(sim, 0, &[0, 5 * BM_CHUNK]);
    // Only the member in service gets the bitmap.
    assert_eq!(count(sim, 0), (2, 2, 2));
    // md never clears bits while a member is missing: no daemon pass.
    assert_eq!(sim.next_event(), None, "at {t}");
    assert_eq!(sim.bitmap_cleared(), Some(0));
}

#[test]
fn the_short_form_takes_a_bitmap_and_refuses_bad_ones() {
    let dev = SimConfig::short("raid1:2xhdd-7200:bitmap=64M")
        .unwrap()
        .build(&[])
        .unwrap();
    let chunk = dev
        .info()
        .params
        .iter()
        .find(|p| p.name == "bitmap_chunk")
        .map(|p| p.value);
    assert_eq!(chunk, Some((64u64 << 20) as f64));
    for (spec, want) in [
        ("raid1:2xhdd-7200:bitmap=3M", "power of two"),
        ("raid1:2xhdd-7200:bitmap=lots", "`bitmap`"),
        ("raid0:2xhdd-7200:bitmap=64M", "redundancy"),
        ("raid5:4xhdd-7200:bitmap=64M:card=adaptec-sas-31205", "card"),
    ] {
        let e = match SimConfig::short(spec).and_then(|c| c.build(&[])) {
            Ok(_) => panic!("{spec} was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(want), "{spec}: {e}");
    }
}
