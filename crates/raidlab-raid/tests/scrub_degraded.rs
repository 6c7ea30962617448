//! `check`, `repair` and `resync` on arrays that are degraded but still redundant
//! (md checks what redundancy is left): RAID 6 with one member missing against
//! the one syndrome left, mirrors by comparing the copies left (RAID 10 runs with
//! a single copy skipped and counted). Each case corrupts one page on a present
//! member and proves `check` finds exactly it, `repair` fixes it, the next
//! `check` is clean and the data reads back intact. Arrays with nothing left to
//! compare are refused with nothing written.

use raidlab_core::{ErrorKind, Volume};
use raidlab_devices::MemVolume;
use raidlab_layout::{Content, Layout, Level, ParityLayout, Raid10Layout};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::recovery::{Progress, RunOptions, ScrubReport};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const MEMBER: u64 = 3 << 20;
const PAGE: u64 = 4096;

fn device(i: usize) -> Device {
    Device {
        path: format!("mem{i}"),
        volume: Arc::new(MemVolume::new(MEMBER)),
    }
}

fn spec(level: Level, layout: Layout) -> CreateSpec {
    CreateSpec {
        level,
        layout,
        chunk_bytes: if level == Level::Raid1 { 0 } else { 16 << 10 },
        spares: 0,
        name: "t".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    }
}

fn new_array(level: Level, layout: Layout, n: usize, zeroed: bool) -> (Assembly, Vec<Device>) {
    let devs: Vec<Device> = (0..n).map(device).collect();
    let members = devs
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed,
        })
        .collect();
    (create(&spec(level, layout), members).unwrap(), devs)
}

fn fill(asm: &Assembly, seed: u64) -> Vec<u8> {
    let array = asm.array().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let data: Vec<u8> = (0..array.size()).map(|_| rng.gen()).collect();
    array.write_at(&data, 0).unwrap();
    data
}

fn read_all(asm: &Assembly) -> Vec<u8> {
    let array = asm.array().unwrap();
    let mut b = vec![0u8; array.size() as usize];
    array.read_at(&mut b, 0).unwrap();
    b
}

fn quiet() -> impl FnMut(Progress) {
    |_| {}
}

fn check(asm: &mut Assembly) -> ScrubReport {
    asm.scrub(false, RunOptions::default(), &mut quiet())
        .unwrap()
}

fn repair(asm: &mut Assembly) -> ScrubReport {
    asm.scrub(true, RunOptions::default(), &mut quiet())
        .unwrap()
}

/// Flip bytes at the start of the page at `offset` of role `role`'s data area.
fn corrupt(asm: &Assembly, role: usize, offset: u64) {
    let area = asm.area(asm.slots[role].unwrap()).unwrap();
    let mut b = [0u8; 3];
    area.read_at(&mut b, offset + 100).unwrap();
    area.write_at(&[b[0] ^ 0x5a, b[1] ^ 1, b[2] ^ 0x80], offset + 100)
        .unwrap();
}

fn page_of(asm: &Assembly, role: usize, offset: u64) -> Vec<u8> {
    let area = asm.area(asm.slots[role].unwrap()).unwrap();
    let mut b = vec![0u8; PAGE as usize];
    area.read_at(&mut b, offset).unwrap();
    b
}

fn ls() -> Layout {
    Layout::Parity(ParityLayout::LeftSymmetric)
}

fn r10(name: &str) -> Layout {
    Layout::Raid10(Raid10Layout::from_name(name).unwrap())
}

/// Expected findings as (role, sector), sorted.
fn found(r: &ScrubReport) -> Vec<(usize, u64)> {
    let mut v: Vec<(usize, u64)> = r.findings.iter().map(|f| (f.role, f.sector)).collect();
    v.sort();
    v
}

/// The full round: check finds exactly `want` (8 sectors each), repair fixes
/// them, check is clean, data reads back intact.
fn round(asm: &mut Assembly, label: &str, want: Vec<(usize, u64)>, data: &[u8]) {
    let mut want = want;
    want.sort();
    let c = check(asm);
    assert_eq!(c.mismatch_sectors, 8 * want.len() as u64, "{label}: {c:?}");
    assert_eq!(found(&c), want, "{label}: {:?}", c.findings);
    let r = repair(asm);
    assert!(r.repaired, "{label}");
    assert_eq!(r.mismatch_sectors, 8 * want.len() as u64, "{label}");
    assert_eq!(found(&r), want, "{label}");
    let again = check(asm);
    assert_eq!(again.mismatch_sectors, 0, "{label}: repaired: {again:?}");
    assert!(again.findings.is_empty(), "{label}");
    assert!(read_all(asm) == data, "{label}: data intact after repair");
}

#[test]
fn degraded_raid6_checks_the_syndrome_left_and_repair_rewrites_it() {
    let cases = [
        (ls(), 5, 0),
        (ls(), 5, 3),
        (Layout::Parity(ParityLayout::LeftAsymmetric), 4, 1),
        (Layout::Parity(ParityLayout::ParityFirst), 5, 0),
        (Layout::Parity(ParityLayout::ParityLast), 5, 2),
    ];
    for (layout, n, gone) in cases {
        let label = format!("raid6 {} n={n} role {gone} missing", layout.name());
        let (mut asm, _devs) = new_array(Level::Raid6, layout, n, true);
        let data = fill(&asm, 31 + gone as u64);
        asm.fail(gone).unwrap();
        let geo = asm.geometry;
        // One stripe where the missing member holds each kind of block it holds
        // (rotating layouts: data, P and Q; parity-first/last: what it holds).
        // Corrupt the parity that is checked there: Q, unless Q is the one
        // missing (then P).
        let mut want = Vec::new();
        let mut kinds = Vec::new();
        for stripe in 0..geo.member_bytes / geo.chunk_bytes {
            let map = geo.stripe(stripe);
            let q = map.q.unwrap();
            let kind = match geo.content_at(gone, stripe * geo.chunk_bytes) {
                Content::Data(_) => 0,
                Content::P(_) => 1,
                Content::Q(_) => 2,
                Content::Unused => unreachable!("parity levels use every block"),
            };
            if kinds.contains(&kind) {
                continue;
            }
            kinds.push(kind);
            let role = if kind == 2 { map.p } else { q };
            // The second page of the chunk, to prove the sector is exact.
            let off = stripe * geo.chunk_bytes + PAGE;
            corrupt(&asm, role, off);
            want.push((role, off / 512));
        }
        assert!(!want.is_empty(), "{label}");
        if matches!(
            layout,
            Layout::Parity(ParityLayout::LeftSymmetric | ParityLayout::LeftAsymmetric)
        ) {
            assert_eq!(kinds.len(), 3, "{label}: rotating parity covers all three");
        }
        assert!(
            read_all(&asm) == data,
            "{label}: corrupt parity is not read"
        );
        let c = check(&mut asm);
        assert_eq!(c.missing_roles, vec![gone], "{label}");
        let pages = geo.member_bytes / PAGE;
        assert_eq!(
            c.pages_checked_p_only + c.pages_checked_q_only,
            pages,
            "{label}: every stripe page is checked against one syndrome"
        );
        assert_eq!(c.reduced_array_bytes, geo.array_bytes(), "{label}");
        assert_eq!(c.unchecked_array_bytes, 0, "{label}");
        assert!(
            c.findings
                .iter()
                .all(|f| f.what.contains("cannot be located")),
            "{label}: {:?}",
            c.findings
        );
        round(&mut asm, &label, want, &data);
    }
}

#[test]
fn degraded_raid6_data_corruption_is_found_but_never_located() {
    let (mut asm, _devs) = new_array(Level::Raid6, ls(), 5, true);
    let data = fill(&asm, 41);
    asm.fail(4).unwrap();
    let geo = asm.geometry;
    // A stripe where role 4 (missing) holds data, and a present data block in it.
    let stripe = (0..)
        .find(|&s| matches!(geo.content_at(4, s * geo.chunk_bytes), Content::Data(_)))
        .unwrap();
    let map = geo.stripe(stripe);
    let victim = *map.data.iter().find(|&&m| m != 4).unwrap();
    let off = stripe * geo.chunk_bytes;
    corrupt(&asm, victim, off);
    let seen_before = read_all(&asm);
    assert!(
        seen_before != data,
        "the corrupted data block is served as is"
    );
    let c = check(&mut asm);
    assert_eq!(c.mismatch_sectors, 8);
    // Reported at Q (the syndrome checked), saying it cannot be located.
    assert_eq!(found(&c), vec![(map.q.unwrap(), off / 512)]);
    assert!(c.findings[0].what.contains("cannot be located"), "{c:?}");
    assert!(!c.findings.iter().any(|f| f.what.contains("located from")));
    let bad_page = page_of(&asm, victim, off);
    let r = repair(&mut asm);
    assert_eq!(r.mismatch_sectors, 8);
    assert_eq!(
        page_of(&asm, victim, off),
        bad_page,
        "repair never rewrites data it cannot locate"
    );
    assert!(
        read_all(&asm) == seen_before,
        "repair changes no byte a reader sees, only the parity checked"
    );
    assert_eq!(check(&mut asm).mismatch_sectors, 0);
}

#[test]
fn degraded_mirrors_compare_the_copies_left() {
    // (level, layout, members, roles missing)
    let cases: Vec<(Level, Layout, usize, Vec<usize>)> = vec![
        (Level::Raid1, Layout::Plain, 3, vec![0]),
        (Level::Raid1, Layout::Plain, 4, vec![1, 3]),
        (Level::Raid10, r10("n3"), 4, vec![1]),
        (Level::Raid10, r10("f3"), 4, vec![0]),
        (Level::Raid10, r10("o3"), 4, vec![2]),
        (Level::Raid10, r10("n2"), 4, vec![0]),
        (Level::Raid10, r10("f2"), 3, vec![0]),
        (Level::Raid10, r10("o2"), 4, vec![3]),
    ];
    for (level, layout, n, gone) in cases {
        let label = format!(
            "{} {} n={n} roles {gone:?} missing",
            level.name(),
            layout.name()
        );
        let (mut asm, _devs) = new_array(level, layout, n, true);
        let data = fill(&asm, 51 + n as u64);
        for &g in &gone {
            asm.fail(g).unwrap();
        }
        let geo = asm.geometry;
        let total = geo.array_bytes();
        // What is left per run, from the layout: bytes with >= 2 live copies
        // (fewer than all: reduced) and with one (unchecked).
        let (mut reduced, mut unchecked) = (0u64, 0u64);
        for (_, len, locs) in geo.mirror_runs(0, total) {
            let live = locs.iter().filter(|l| !gone.contains(&l.member)).count();
            match live {
                0 => unreachable!("{label}: survives"),
                1 => unchecked += len,
                _ if live < locs.len() => reduced += len,
                _ => {}
            }
        }
        // Corrupt the last live copy of two pages that still have two copies.
        let mut want = Vec::new();
        let mut logical = 3 * PAGE;
        while want.len() < 2 && logical < total {
            let (locs, _) = geo.mirror_map(logical);
            let live: Vec<_> = locs.iter().filter(|l| !gone.contains(&l.member)).collect();
            if live.len() >= 2 {
                let last = live[live.len() - 1];
                corrupt(&asm, last.member, last.offset);
                want.push((last.member, last.offset / 512));
            }
            logical += 37 * PAGE;
        }
        assert_eq!(want.len(), 2, "{label}");
        let c = check(&mut asm);
        assert_eq!(c.missing_roles, gone, "{label}");
        assert_eq!(c.reduced_array_bytes, reduced, "{label}");
        assert_eq!(c.unchecked_array_bytes, unchecked, "{label}");
        assert_eq!(c.pages_checked_p_only + c.pages_checked_q_only, 0);
        if layout.name() == "n2" {
            assert_eq!(unchecked, total / 2, "{label}: half the runs lost a copy");
        }
        round(&mut asm, &label, want, &data);
    }
}

/// Every member's raw bytes.
fn snapshot(devs: &[Device]) -> Vec<Vec<u8>> {
    devs.iter()
        .map(|d| {
            let mut b = vec![0u8; d.volume.size() as usize];
            d.volume.read_at(&mut b, 0).unwrap();
            b
        })
        .collect()
}

#[test]
fn nothing_left_to_compare_is_refused_and_nothing_written() {
    let cases: Vec<(Level, Layout, usize, Vec<usize>)> = vec![
        (Level::Raid5, ls(), 4, vec![2]),
        (
            Level::Raid5,
            Layout::Parity(ParityLayout::RightAsymmetric),
            3,
            vec![0],
        ),
        (
            Level::Raid4,
            Layout::Parity(ParityLayout::ParityLast),
            4,
            vec![3],
        ),
        (Level::Raid6, ls(), 5, vec![1, 3]),
        (Level::Raid1, Layout::Plain, 2, vec![1]),
        (Level::Raid1, Layout::Plain, 3, vec![0, 2]),
        (Level::Raid10, r10("n2"), 2, vec![0]),
    ];
    for (level, layout, n, gone) in cases {
        let label = format!(
            "{} {} n={n} roles {gone:?} missing",
            level.name(),
            layout.name()
        );
        let (mut asm, devs) = new_array(level, layout, n, true);
        fill(&asm, 61);
        for &g in &gone {
            asm.fail(g).unwrap();
        }
        let before = snapshot(&devs);
        for repair in [false, true] {
            let e = asm
                .scrub(repair, RunOptions::default(), &mut quiet())
                .unwrap_err();
            assert_eq!(e.kind, ErrorKind::Refused, "{label}: {e}");
            let msg = e.to_string();
            assert!(msg.contains("nothing left to compare"), "{label}: {msg}");
            assert!(msg.contains(&format!("{gone:?}")), "{label}: {msg}");
            assert!(
                msg.contains("raidlab add"),
                "{label}: says what to do: {msg}"
            );
        }
        assert!(snapshot(&devs) == before, "{label}: a refusal wrote");
    }
}

#[test]
fn resync_of_a_degraded_array_uses_the_redundancy_left() {
    let cases: Vec<(Level, Layout, usize, usize)> = vec![
        (Level::Raid6, ls(), 5, 2),
        (
            Level::Raid6,
            Layout::Parity(ParityLayout::LeftAsymmetric),
            4,
            0,
        ),
        (Level::Raid1, Layout::Plain, 3, 1),
        (Level::Raid10, r10("n3"), 4, 3),
        (Level::Raid10, r10("n2"), 4, 0),
    ];
    for (level, layout, n, gone) in cases {
        let label = format!(
            "{} {} n={n} role {gone} missing",
            level.name(),
            layout.name()
        );
        // Members with old contents: nothing agrees (resync pending).
        let (mut asm, devs) = new_array(level, layout, n, false);
        let mut rng = ChaCha8Rng::seed_from_u64(71);
        let start = asm.members[0].sb.data_offset * 512;
        for d in &devs {
            let junk: Vec<u8> = (0..MEMBER - start).map(|_| rng.gen()).collect();
            d.volume.write_at(&junk, start).unwrap();
        }
        assert!(!asm.in_sync(), "{label}");
        asm.fail(gone).unwrap();
        let before = check(&mut asm);
        assert!(before.mismatch_sectors > 0, "{label}: junk disagrees");
        let served = read_all(&asm);
        let r = asm.resync(RunOptions::default(), &mut quiet()).unwrap();
        assert_eq!(r.missing_roles, vec![gone], "{label}");
        assert!(r.mismatch_sectors > 0, "{label}");
        let again = Assembly::assemble(
            devs.iter()
                .enumerate()
                .filter(|(i, _)| *i != gone)
                .map(|(_, d)| d.clone())
                .collect(),
        )
        .unwrap();
        assert!(again.in_sync(), "{label}: marked clean");
        let mut again = again;
        assert_eq!(check(&mut again).mismatch_sectors, 0, "{label}");
        if level == Level::Raid6 {
            // Parity was made to agree with what the array serves; reads are
            // unchanged (mirrors copy the first copy, which reads also prefer
            // only in part, so only RAID 6 promises this).
            assert!(read_all(&again) == served, "{label}: reads unchanged");
        }
    }
}

#[test]
fn resync_of_a_degraded_raid5_is_refused_with_what_to_do() {
    let (mut asm, devs) = new_array(Level::Raid5, ls(), 4, false);
    asm.fail(1).unwrap();
    let before = snapshot(&devs);
    let e = asm.resync(RunOptions::default(), &mut quiet()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("nothing left to compare"), "{msg}");
    assert!(msg.contains("rebuild --force"), "{msg}");
    assert!(snapshot(&devs) == before, "a refused resync wrote");
}

/// A disk with one unreadable range that a write over it remaps (as real disks
/// do).
#[derive(Debug)]
struct BadSector {
    inner: MemVolume,
    bad: std::sync::Mutex<Option<std::ops::Range<u64>>>,
}

impl Volume for BadSector {
    fn name(&self) -> String {
        "badsector".into()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> raidlab_core::Result<()> {
        let bad = self.bad.lock().unwrap().clone();
        if bad.is_some_and(|b| offset < b.end && b.start < offset + buf.len() as u64) {
            return Err(raidlab_core::Error::new(
                ErrorKind::Io,
                raidlab_core::Op::Read,
                "unreadable sectors",
            ));
        }
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> raidlab_core::Result<()> {
        let mut bad = self.bad.lock().unwrap();
        if bad
            .as_ref()
            .is_some_and(|b| offset <= b.start && b.end <= offset + buf.len() as u64)
        {
            *bad = None;
        }
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> raidlab_core::Result<()> {
        Ok(())
    }
}

#[test]
fn a_read_error_on_a_present_member_of_a_degraded_array_is_rebuilt_and_rewritten() {
    let cases: Vec<(Level, Layout, usize)> = vec![
        (Level::Raid6, ls(), 5),
        (Level::Raid1, Layout::Plain, 3),
        (Level::Raid10, r10("n3"), 4),
    ];
    for (level, layout, n) in cases {
        let label = format!("{} {}", level.name(), layout.name());
        let vols: Vec<Arc<BadSector>> = (0..n)
            .map(|_| {
                Arc::new(BadSector {
                    inner: MemVolume::new(MEMBER),
                    bad: Default::default(),
                })
            })
            .collect();
        let members = vols
            .iter()
            .enumerate()
            .map(|(i, v)| NewMember {
                device: Device {
                    path: format!("b{i}"),
                    volume: v.clone(),
                },
                zeroed: true,
            })
            .collect();
        let mut asm = create(&spec(level, layout), members).unwrap();
        let data = fill(&asm, 81);
        asm.fail(0).unwrap();
        // Member 2 lost a page: wrong contents, and reading it fails.
        let start = asm.members[2].sb.data_offset * 512 + 64 * 1024;
        let bad = start..start + PAGE;
        vols[2].inner.write_at(&[0xee; 4096], bad.start).unwrap();
        *vols[2].bad.lock().unwrap() = Some(bad);
        let r = check(&mut asm);
        assert_eq!(r.read_errors_fixed, 1, "{label}: {r:?}");
        assert!(
            vols[2].bad.lock().unwrap().is_none(),
            "{label}: rewritten from the redundancy left"
        );
        assert_eq!(r.mismatch_sectors, 0, "{label}: and rewritten right");
        assert_eq!(check(&mut asm).mismatch_sectors, 0, "{label}");
        assert!(read_all(&asm) == data, "{label}");
    }
}
