//! md's bad-block log honoured end to end: a member's log (written where md
//! keeps it, in md's entry format) lists sectors whose contents are garbage;
//! reads through the array must return the data from redundancy, never the
//! garbage, and a read with no redundancy left fails naming the log.

mod common;

use raidlab_core::{ErrorKind, Volume};
use raidlab_layout::Level;
use raidlab_md::Superblock;
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::lifecycle::{StartOptions, Started};

const MIB: u64 = 1 << 20;

fn array(level: Level, n: usize) -> Vec<Device> {
    common::mem_array(level, &vec![16 * MIB; n])
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// List `count` sectors from data-area byte `at` of `dev` as bad, in md's
/// format, and overwrite them with garbage.
fn mark_bad(dev: &Device, at: u64, count: u64) {
    let vol = dev.volume.as_ref();
    let sb = Superblock::read_from(vol).unwrap().unwrap();
    assert!(sb.bblog_size > 0, "raidlab reserves md's bad-block log");
    let sector = sb.data_offset + at / 512;
    let mut log = vec![0xffu8; sb.bblog_size as usize * 512];
    log[..8].copy_from_slice(&((sector << 10) | count).to_le_bytes());
    let log_at = (sb.super_offset as i64 + i64::from(sb.bblog_offset)) as u64 * 512;
    vol.write_at(&log, log_at).unwrap();
    vol.write_at(&vec![0xee; count as usize * 512], sb.data_offset * 512 + at)
        .unwrap();
}

fn fill(devs: &[Device]) -> Vec<u8> {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    let started = Started::start(
        asm,
        StartOptions {
            write: true,
            ..StartOptions::default()
        },
    )
    .unwrap();
    let data = pattern(started.array.size() as usize);
    started.array.write_at(&data, 0).unwrap();
    started.stop().unwrap();
    data
}

fn read_all(devs: &[Device]) -> raidlab_core::Result<Vec<u8>> {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    let array = asm.array()?;
    let mut got = vec![0u8; array.size() as usize];
    array.read_at(&mut got, 0)?;
    Ok(got)
}

#[test]
fn raid5_reads_listed_sectors_from_parity() {
    let devs = array(Level::Raid5, 4);
    let data = fill(&devs);
    // 16 sectors in the middle of member 2's first chunk, and the log says so.
    mark_bad(&devs[2], 8192, 16);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(asm.bad_blocks().unwrap().is_some());
    assert_eq!(read_all(&devs).unwrap(), data);
    // Without the log entry the garbage would be read: the test can fail.
    let sb = Superblock::read_from(devs[2].volume.as_ref())
        .unwrap()
        .unwrap();
    let log_at = (sb.super_offset as i64 + i64::from(sb.bblog_offset)) as u64 * 512;
    devs[2].volume.write_at(&[0xff; 8], log_at).unwrap();
    assert_ne!(read_all(&devs).unwrap(), data);
}

#[test]
fn raid1_reads_the_other_copy_and_fails_without_one() {
    let devs = array(Level::Raid1, 2);
    let data = fill(&devs);
    mark_bad(&devs[0], 4096, 8);
    for _ in 0..3 {
        // Whichever copy the read rotation picks.
        assert_eq!(read_all(&devs).unwrap(), data);
    }
    mark_bad(&devs[1], 4096 + 1024, 1);
    let err = read_all(&devs).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unrecoverable);
    assert!(err.to_string().contains("bad-block log"), "{err}");
}

/// The data area of `dev` (after its md superblock's data offset).
fn data_area(dev: &Device) -> Vec<u8> {
    let vol = dev.volume.as_ref();
    let sb = Superblock::read_from(vol).unwrap().unwrap();
    let at = sb.data_offset * 512;
    let mut b = vec![0u8; (vol.size() - at) as usize];
    vol.read_at(&mut b, at).unwrap();
    b
}

/// A check and a rebuild never read what a member's log lists: a check
/// compares that stripe without the member (finding nothing wrong where the
/// listed sectors hold garbage), and a rebuild of another member computes it
/// from the rest, so the new member holds exactly what the old one held.
#[test]
fn a_check_and_a_rebuild_read_listed_sectors_from_the_others() {
    use raidlab_raid::recovery::RunOptions;
    for (level, n) in [(Level::Raid6, 5), (Level::Raid1, 3), (Level::Raid10, 4)] {
        let label = format!("{} x{n}", level.name());
        let devs = array(level, n);
        fill(&devs);
        // Role 0's copy of the range, where RAID 1/10 keep it, is on role 1.
        let listed = if level == Level::Raid10 { 1 } else { 2 };
        mark_bad(&devs[listed], 64 << 10, 16);
        let old = data_area(&devs[0]);
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let r = asm
            .scrub(false, RunOptions::default(), &mut |_| {})
            .unwrap();
        assert_eq!(r.mismatch_sectors, 0, "{label}: {r:?}");
        assert!(r.bad_block_bytes > 0, "{label}: {r:?}");
        asm.fail(0).unwrap();
        asm.remove(0).unwrap();
        let new = Device {
            path: "new".into(),
            volume: std::sync::Arc::new(raidlab_devices::MemVolume::new(16 * MIB)),
        };
        let added = asm.add(new.clone(), false).unwrap();
        assert!(
            matches!(added, raidlab_raid::manage::Added::IntoSlot(_)),
            "{label}"
        );
        let rebuilt = asm.rebuild(RunOptions::default(), &mut |_| {});
        if level == Level::Raid10 {
            // Role 0's only other copy is the listed range: nothing to rebuild
            // it from, and the rebuild says so rather than copy garbage.
            let e = rebuilt.unwrap_err();
            assert_eq!(e.kind, ErrorKind::Unrecoverable, "{label}: {e}");
            assert!(e.to_string().contains("bad-block log"), "{label}: {e}");
            continue;
        }
        rebuilt.unwrap();
        assert!(
            data_area(&new)[..old.len()] == old[..],
            "{label}: the new member holds what role 0 held"
        );
    }
}
