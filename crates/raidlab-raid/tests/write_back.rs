//! md's write-back journal at the engine: a write is acknowledged with its
//! data in the journal and nothing on the members; reads, flushes and FUA
//! writes leave the members alone; a crash is replayed from the journal's
//! data-only stripes; a clean stop leaves the journal empty; a ring filled
//! many times over never loses a stripe held back; bad input is refused.

use raidlab_core::Volume;
use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{create_with_journal, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::journal::JournalMode;
use raidlab_raid::lifecycle::{StartOptions, Started};
use raidlab_raid::recovery::RunOptions;
use raidlab_raid::stripe_cache::StripeCacheConfig;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::Duration;

const MEMBER: u64 = (1 << 20) + (512 << 10);
/// md's 1 MiB data offset and a 256 KiB ring: a few stripes' write-outs.
const JOURNAL: u64 = (1 << 20) + (256 << 10);

/// A RAID 5 (4 members, 8 KiB chunks) with a journal, or without one.
fn create(level: Level, members: usize, journal: bool) -> Vec<Device> {
    let devs: Vec<Device> = (0..members + usize::from(journal))
        .map(|i| Device {
            path: if i == members {
                "journal".into()
            } else {
                format!("m{i}")
            },
            volume: Arc::new(MemVolume::new(if i == members { JOURNAL } else { MEMBER })),
        })
        .collect();
    let spec = CreateSpec {
        level,
        layout: match level {
            Level::Raid1 => Layout::Plain,
            _ => Layout::Parity(ParityLayout::LeftSymmetric),
        },
        chunk_bytes: 8 << 10,
        spares: 0,
        name: "wb".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let new = |d: &Device| NewMember {
        device: d.clone(),
        zeroed: true,
    };
    let data = devs[..members].iter().map(new).collect();
    create_with_journal(&spec, data, journal.then(|| new(&devs[members]))).unwrap();
    devs
}

/// Started for writing in `mode`, with a stripe cache whose hold time never
/// passes during a test (stripes leave it by size, write-out or stop only).
fn start(devs: &[Device], mode: JournalMode) -> raidlab_core::Result<Started> {
    Started::start(
        Assembly::assemble(devs.to_vec())?,
        StartOptions {
            write: true,
            stripe_cache: Some(StripeCacheConfig {
                stripes: 64,
                hold: Duration::from_secs(3600),
                ..StripeCacheConfig::default()
            }),
            journal_mode: mode,
            ..StartOptions::default()
        },
    )
}

/// Every member's bytes.
fn members(devs: &[Device], n: usize) -> Vec<Vec<u8>> {
    devs[..n]
        .iter()
        .map(|d| {
            let mut b = vec![0u8; d.volume.size() as usize];
            d.volume.read_at(&mut b, 0).unwrap();
            b
        })
        .collect()
}

/// After a crash or a stop: replay, then the array must read `model` and
/// check clean. Returns the replay's report.
fn reopen_and_check(devs: &[Device], model: &[u8]) -> raidlab_raid::journal::JournalReplay {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let replay = asm.start_journal().unwrap().unwrap();
    let check = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(check.mismatch_sectors, 0, "{:?}", check.findings.first());
    let array = asm.array().unwrap();
    let mut got = vec![0u8; model.len()];
    array.read_at(&mut got, 0).unwrap();
    let bad = (0..model.len()).find(|&i| got[i] != model[i]);
    assert!(bad.is_none(), "array byte {bad:?} differs after the replay");
    replay
}

#[test]
fn an_acknowledged_write_is_in_the_journal_only_and_survives_a_crash() {
    let devs = create(Level::Raid5, 4, true);
    let started = start(&devs, JournalMode::WriteBack).unwrap();
    let array = started.array.clone();
    assert_eq!(array.journal_mode(), Some(JournalMode::WriteBack));
    let size = array.size() as usize;
    let mut model = vec![0u8; size];
    let before = members(&devs, 4);
    // A page, a write of part of two pages, a FUA write, with flushes
    // between: none of them may reach a member.
    let writes: [(usize, usize, u8); 3] = [
        (4096, 4096, 0x11),
        (40_000, 6000, 0x22),
        (200 << 10, 512, 0x44),
    ];
    for (i, &(off, len, v)) in writes.iter().enumerate() {
        let data = vec![v; len];
        if i == 2 {
            array.write_at_fua(&data, off as u64).unwrap();
        } else {
            array.write_at(&data, off as u64).unwrap();
        }
        model[off..off + len].copy_from_slice(&data);
        array.flush().unwrap();
    }
    assert!(
        members(&devs, 4) == before,
        "a write-back write, flush or FUA write reached a member"
    );
    assert_eq!(array.journal().unwrap().pinned_stripes(), 3);
    // A whole stripe goes down at once (md writes full stripes out first):
    // its data and parity are logged again, then written to the members.
    let whole = vec![0x33u8; 24 << 10];
    array.write_at(&whole, 48 << 10).unwrap();
    model[48 << 10..72 << 10].copy_from_slice(&whole);
    assert_eq!(array.journal().unwrap().pinned_stripes(), 3);
    assert!(members(&devs, 4) != before, "the whole stripe stayed held");
    // Reads see the newest data, from the cache.
    let mut got = vec![0u8; size];
    array.read_at(&mut got, 0).unwrap();
    assert!(got == model, "reads do not see the held writes");
    // The power goes: no stop, nothing written out.
    drop(array);
    drop(started);
    // Read-only, the members alone would give older data: refused, and the
    // refusal wrote nothing; --force reads the members as they are.
    let read_only = |force| {
        Started::start(
            Assembly::assemble(devs.to_vec()).unwrap(),
            StartOptions {
                force,
                ..StartOptions::default()
            },
        )
    };
    let after_crash = members(&devs, 5);
    let Err(refused) = read_only(false) else {
        panic!("a read-only start was not refused");
    };
    assert!(
        refused.message.contains("not on the members yet"),
        "{refused}"
    );
    assert!(members(&devs, 5) == after_crash, "the refusal wrote");
    let forced = read_only(true).unwrap();
    let mut old = vec![0u8; 4096];
    forced.array.read_at(&mut old, 4096).unwrap();
    assert!(old != model[4096..8192], "--force did not read the members");
    drop(forced);
    let replay = reopen_and_check(&devs, &model);
    // The three held stripes' rows as data only, the whole stripe's rows
    // (logged with parity when written out) whole.
    assert!(
        replay.data_only_stripes >= 3 && replay.stripes_replayed > 0,
        "{replay:?}"
    );
}

#[test]
fn a_clean_stop_writes_everything_out_and_leaves_the_journal_empty() {
    let devs = create(Level::Raid5, 4, true);
    let started = start(&devs, JournalMode::WriteBack).unwrap();
    let mut model = vec![0u8; started.array.size() as usize];
    for (off, v) in [(0usize, 1u8), (30_000, 2), (100_000, 3)] {
        let data = vec![v; 10_000];
        started.array.write_at(&data, off as u64).unwrap();
        model[off..off + data.len()].copy_from_slice(&data);
    }
    assert!(started.array.journal().unwrap().pinned_stripes() > 0);
    started.stop().unwrap();
    let replay = reopen_and_check(&devs, &model);
    assert!(
        !replay.fresh && !replay.replayed_anything(),
        "a clean stop must leave nothing to replay: {replay:?}"
    );
}

#[test]
fn a_ring_filled_many_times_never_loses_a_held_stripe() {
    let devs = create(Level::Raid5, 4, true);
    let started = start(&devs, JournalMode::WriteBack).unwrap();
    let array = started.array.clone();
    let size = array.size() as usize;
    let mut model = vec![0u8; size];
    let mut rng = ChaCha8Rng::seed_from_u64(36);
    let mut logged = 0usize;
    let mut n = 0;
    while logged < 6 * (256 << 10) {
        let len = rng.gen_range(1..=24) * 512;
        let off = rng.gen_range(0..(size - len) / 512) * 512;
        let mut data = vec![0u8; len];
        rng.fill(&mut data[..]);
        array.write_at(&data, off as u64).unwrap();
        model[off..off + len].copy_from_slice(&data);
        logged += len;
        n += 1;
        if n % 50 == 0 {
            let mut got = vec![0u8; size];
            array.read_at(&mut got, 0).unwrap();
            assert!(got == model, "contents differ after {n} writes");
        }
    }
    let journal = array.journal().unwrap();
    assert!(
        journal.reclaims() >= 3,
        "the ring should have filled several times, reclaimed {}",
        journal.reclaims()
    );
    assert!(journal.pinned_stripes() > 0);
    drop(array);
    drop(started);
    let replay = reopen_and_check(&devs, &model);
    assert!(replay.data_only_stripes > 0, "{replay:?}");
}

#[test]
fn write_back_without_a_journal_or_for_reading_is_refused() {
    for (level, n) in [(Level::Raid5, 3), (Level::Raid1, 2)] {
        let devs = create(level, n, false);
        let e = start(&devs, JournalMode::WriteBack).unwrap_err();
        assert!(
            e.to_string().contains("write-back needs a write journal")
                && e.to_string().contains(level.name()),
            "{e}"
        );
    }
    let devs = create(Level::Raid5, 4, true);
    let e = Started::start(
        Assembly::assemble(devs.clone()).unwrap(),
        StartOptions {
            journal_mode: JournalMode::WriteBack,
            ..StartOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("start the array for writing"), "{e}");
    // Write-through stays md's default.
    let started = start(&devs, JournalMode::WriteThrough).unwrap();
    assert_eq!(
        started.array.journal_mode(),
        Some(JournalMode::WriteThrough)
    );
}
