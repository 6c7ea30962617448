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
