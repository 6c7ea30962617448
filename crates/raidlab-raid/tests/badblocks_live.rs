//! md's bad-block log on a running array, with member files on disk: a
//! listed block the array reads from parity is written back and forgotten
//! (md's RAID 5 does so with a listed block it has computed), and a block
//! whose rewrite fails is listed while the member stays, as md does when
//! the member keeps a log. The running array's list changes at once; the
//! logs change when the owner polls (`LiveArray::poll`), and a later
//! assembly reads what they say.

mod common;

use raidlab_core::Volume;
use raidlab_devices::{FaultVolume, FileVolume};
use raidlab_layout::Level;
use raidlab_md::superblock::feature;
use raidlab_md::Superblock;
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::live::LiveArray;
use std::sync::Arc;

const MIB: u64 = 1 << 20;

type Member = Arc<FaultVolume<FileVolume>>;

/// A RAID 5 of four 16 MiB member files in `dir`, each behind a fault
/// switch, filled with a pattern (returned).
fn files(dir: &std::path::Path) -> (Vec<Member>, Vec<Device>, Vec<u8>) {
    let vols: Vec<Member> = (0..4)
        .map(|i| {
            let f = FileVolume::create_sparse(&dir.join(format!("m{i}.img")), 16 * MIB).unwrap();
            Arc::new(FaultVolume::new(f))
        })
        .collect();
    let devs: Vec<Device> = vols
        .iter()
        .enumerate()
        .map(|(i, v)| Device {
            path: dir.join(format!("m{i}.img")).display().to_string(),
            volume: v.clone(),
        })
        .collect();
    let asm = common::create_on(Level::Raid5, &devs);
    let array = asm.array().unwrap();
    let data: Vec<u8> = (0..array.size()).map(|i| (i * 13 % 253) as u8).collect();
    array.write_at(&data, 0).unwrap();
    array.flush().unwrap();
    (vols, devs, data)
}

fn sb(dev: &Device) -> Superblock {
    Superblock::read_from(dev.volume.as_ref()).unwrap().unwrap()
}

/// What `examine` shows of `dev`'s log: the listed ranges (device sectors)
/// and whether the superblock says "bad blocks present".
fn listed(dev: &Device) -> (Vec<(u64, u64)>, bool) {
    let sb = sb(dev);
    let list = raidlab_md::badblocks::read(dev.volume.as_ref(), &sb)
        .unwrap()
        .unwrap();
    let flag = sb.feature_map & feature::BAD_BLOCKS != 0;
    (list.iter().map(|r| (r.sector, r.count)).collect(), flag)
}

fn data_area(dev: &Device) -> Vec<u8> {
    let at = sb(dev).data_offset * 512;
    let mut b = vec![0u8; (dev.volume.size() - at) as usize];
    dev.volume.read_at(&mut b, at).unwrap();
    b
}

fn read_all(array: &dyn Volume) -> Vec<u8> {
    let mut got = vec![0u8; array.size() as usize];
    array.read_at(&mut got, 0).unwrap();
    got
}

fn live(devs: &[Device]) -> Arc<LiveArray> {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    let array = Arc::new(asm.array().unwrap());
    LiveArray::new(asm, array)
}

/// A live RAID 5 read over a listed range: the bytes come from parity, the
/// listed sectors are written back and read back, and the running array
/// reads them from the member again; the owner's poll drops them from the
/// log and clears the superblock's flag, flushed, and the member holds the
/// right bytes.
#[test]
fn a_live_read_rewrites_listed_sectors_and_the_log_forgets_them() {
    let dir = tempfile::tempdir().unwrap();
    let (vols, devs, data) = files(dir.path());
    let good = data_area(&devs[2]);
    // 16 sectors in member 2's first chunk: garbage there, listed in md's
    // format with the superblock's flag, as md leaves a block it could not
    // write.
    let s = sb(&devs[2]);
    let sector = s.data_offset + 16;
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let i = asm
        .members
        .iter()
        .position(|m| m.device.path == devs[2].path)
        .unwrap();
    assert!(asm.list_bad_blocks(i, 8192, 16 * 512).unwrap());
    drop(asm);
    vols[2]
        .write_at(&[0xee; 16 * 512], s.data_offset * 512 + 8192)
        .unwrap();
    assert_eq!(listed(&devs[2]), (vec![(sector, 16)], true));
    assert_ne!(data_area(&devs[2]), good, "the listed sectors hold garbage");

    let live = live(&devs);
    let array = live.array().clone();
    assert!(array.bad_block_lists().get().is_some());
    assert_eq!(read_all(array.as_ref()), data);
    // The running array forgot the range at once; the log waits for the poll.
    assert!(array.bad_block_lists().get().is_none());
    assert_eq!(listed(&devs[2]).0, vec![(sector, 16)]);
    let said = live.poll();
    assert!(
        said.iter()
            .any(|l| l.contains("dropped from its bad-block log")),
        "{said:?}"
    );
    assert_eq!(listed(&devs[2]), (vec![], false));
    assert!(
        data_area(&devs[2]) == good,
        "the listed sectors were rewritten"
    );
    // Read from the member now: garbage there would show.
    vols[2].reset_stats();
    assert_eq!(read_all(array.as_ref()), data);
    assert!(vols[2].stats().reads > 0);
    assert_eq!(array.failed_members(), Vec::<usize>::new());
    drop(array);
    live.shutdown();
    drop(live.into_assembly().unwrap());
    // A new assembly agrees, byte for byte.
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(asm.bad_blocks().unwrap().is_none());
    assert_eq!(read_all(&asm.array().unwrap()), data);
}

/// A live read that fails on a member whose rewrite fails too: md lists the
/// range in the member's log and keeps it. The running array never reads
/// the range from that member again (garbage put there does not show), does
/// not try to rewrite it again, and the poll writes the range into the log,
/// where a later assembly finds it.
#[test]
fn a_failed_rewrite_is_listed_and_the_member_stays() {
    let dir = tempfile::tempdir().unwrap();
    let (vols, devs, data) = files(dir.path());
    let at = sb(&devs[1]).data_offset * 512 + 4096;
    let live = live(&devs);
    let array = live.array().clone();
    assert!(array.bad_block_lists().get().is_none());
    vols[1].fail_reads(at..at + 4096);
    vols[1].fail_writes(at..at + 4096);
    assert_eq!(read_all(array.as_ref()), data);
    assert_eq!(
        array.failed_members(),
        Vec::<usize>::new(),
        "the member stays"
    );
    let role = live
        .with_assembly(|a| {
            a.members
                .iter()
                .position(|m| m.device.path == devs[1].path)
                .and_then(|i| a.members[i].role)
        })
        .unwrap();
    let now = array.bad_block_lists().get().expect("listed at once");
    assert!(now.hit(role, 4096, 4096).is_some());
    // md lists the unit that failed, not all the read rewrote: the rest of
    // the member is read (and checked) as before.
    assert!(
        now.hit(role, 0, 4096).is_none() && now.hit(role, 8192, 56 << 10).is_none(),
        "only the page that failed is listed: {now:?}"
    );
    // The member's bytes there go bad; the array does not read them.
    vols[1].clear_faults();
    vols[1].corrupt_stored(at, 4096).unwrap();
    vols[1].reset_stats();
    assert_eq!(read_all(array.as_ref()), data);
    assert_eq!(
        vols[1].stats().writes,
        0,
        "no second rewrite (md's WriteErrorSeen)"
    );
    let said = live.poll();
    assert!(
        said.iter()
            .any(|l| l.contains("listed in its bad-block log")),
        "{said:?}"
    );
    let sector = at / 512;
    let (list, flag) = listed(&devs[1]);
    assert!(flag);
    assert!(
        list.iter()
            .any(|&(s, n)| s <= sector && s + n >= sector + 8),
        "{list:?} lists sectors {sector}..+8"
    );
    drop(array);
    live.shutdown();
    drop(live.into_assembly().unwrap());
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(asm.bad_blocks().unwrap().is_some());
    assert_eq!(read_all(&asm.array().unwrap()), data);
}
