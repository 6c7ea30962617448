//! A simulated array is raidlab's real array: created by raidlab's create,
//! assembled from the md superblocks on its members and started by
//! `lifecycle::Started`. Its members' superblocks load with the spec's level,
//! layout, chunk, member count, data offset and size, a started array's dirty
//! mark, and, with a bitmap, the bitmap create lays out; the set-up writes
//! reach no device model.

use raidlab_layout::{Geometry, Layout, Level};
use raidlab_md::bitmap::Bitmap;
use raidlab_md::superblock::Role;
use raidlab_md::Superblock;
use raidlab_sim::array::{ArraySpec, TaskArray, DATA_OFFSET};
use raidlab_sim::device::{Device, Request};
use raidlab_sim::host::HostCost;
use raidlab_sim::ideal::Ideal;

const MEMBER: u64 = 64 << 20;

fn spec(level: Level, n: usize, chunk: u64, failed: &[usize]) -> ArraySpec {
    let g = Geometry::new(level, Layout::parse(level, None).unwrap(), chunk, n, MEMBER).unwrap();
    ArraySpec {
        name: "stack".into(),
        geometry: g,
        members: (0..n)
            .map(|r| {
                (!failed.contains(&r)).then(|| {
                    // Larger than the array needs: the superblock records the
                    // device's size, the data size stays the spec's.
                    Box::new(Ideal::new(DATA_OFFSET + MEMBER + (8 << 20), 50.0, 200.0))
                        as Box<dyn Device>
                })
            })
            .collect(),
        stripe_cache: None,
        host: HostCost::default(),
        rebuild: None,
    }
}

/// Each member in service's superblock, as md would load it, by role.
fn superblocks(sim: &TaskArray) -> Vec<(usize, Superblock, Bitmap)> {
    let asm = sim.started().asm();
    let mut out = Vec::new();
    for m in &asm.members {
        let v = m.device.volume.as_ref();
        let sb = Superblock::read_from(v)
            .unwrap()
            .unwrap_or_else(|| panic!("{}: no md superblock", m.device.path));
        let Role::Active(role) = sb.role() else {
            panic!("{}: role {:?}", m.device.path, sb.role());
        };
        let bm = Bitmap::read_from(v, &sb).unwrap();
        out.push((role as usize, sb, bm));
        if let Some(bm) = &out.last().unwrap().2 {
            assert_eq!(bm.dirty_count(), 0, "a new zeroed array has no dirty chunk");
        }
    }
    out.sort_by_key(|(r, _, _)| *r);
    out.into_iter()
        .map(|(r, sb, bm)| (r, sb, bm.unwrap_or_else(|| panic!("role {r}: no bitmap"))))
        .collect()
}

#[test]
fn a_degraded_raid6_members_carry_md_superblocks_of_the_spec_and_the_bitmap_create_lays_out() {
    let s = spec(Level::Raid6, 6, 256 << 10, &[2]);
    let g = s.geometry;
    let sim = TaskArray::build(s, None, Some(Some(1 << 20))).unwrap();
    let sbs = superblocks(&sim);
    assert_eq!(
        sbs.iter().map(|(r, _, _)| *r).collect::<Vec<_>>(),
        vec![0, 1, 3, 4, 5],
        "the failed role's device is not assembled"
    );
    let uuid = sbs[0].1.set_uuid;
    for (role, sb, bm) in &sbs {
        assert_eq!(sb.level, 6, "role {role}");
        assert_eq!(sb.layout, g.md_layout(), "role {role}");
        assert_eq!(sb.chunksize, 512, "role {role}: 256 KiB in sectors");
        assert_eq!(sb.raid_disks, 6, "role {role}");
        assert_eq!(sb.data_offset, DATA_OFFSET / 512, "role {role}");
        assert_eq!(sb.size, MEMBER / 512, "role {role}");
        assert_eq!(sb.set_uuid, uuid, "role {role}: one array");
        assert_eq!(sb.set_name, "stack");
        assert_eq!(
            sb.bblog_size, 0,
            "role {role}: no bad-block log (not simulated)"
        );
        // A started array is marked dirty before it is used, as md marks it.
        assert!(!sb.is_clean(), "role {role}: marked dirty at start");
        // The bitmap create wrote: the asked chunk, the whole member covered,
        // the array's uuid.
        assert_eq!(bm.sb.chunksize, 1 << 20, "role {role}");
        assert_eq!(bm.sb.sync_size, MEMBER / 512, "role {role}");
        assert_eq!(bm.sb.uuid, uuid, "role {role}");
    }
    // The running engine is the one the superblocks describe.
    assert_eq!(*sim.engine().geometry(), g);
    assert_eq!(sim.out_of_service(), vec![2]);
}

#[test]
fn the_set_up_writes_cost_no_virtual_time_and_reach_no_device_model() {
    for (level, n, chunk) in [
        (Level::Raid5, 4, 64 << 10),
        (Level::Raid1, 2, 0),
        (Level::Raid10, 4, 64 << 10),
        (Level::Raid0, 3, 64 << 10),
    ] {
        let mut sim = TaskArray::build(spec(level, n, chunk, &[]), None, None).unwrap();
        sim.keep_ops();
        let asm = sim.started().asm();
        for m in &asm.members {
            let sb = Superblock::read_from(m.device.volume.as_ref())
                .unwrap()
                .unwrap_or_else(|| panic!("{level:?} {}: no md superblock", m.device.path));
            assert_eq!(sb.level, level.md_level(), "{level:?}");
            assert_eq!(sb.raid_disks as usize, n, "{level:?}");
            assert_eq!(sb.data_offset, DATA_OFFSET / 512, "{level:?}");
            assert_eq!(sb.bitmap_offset, 0, "{level:?}: no bitmap asked for");
        }
        drop(asm);
        assert_eq!(
            sim.next_event(),
            None,
            "{level:?}: nothing pending at start"
        );
        // The first request's member operations are all data: the set-up's
        // superblocks were written before the run, in memory.
        sim.submit(
            0,
            Request {
                id: 1,
                kind: raidlab_core::IoKind::Write,
                offset: 0,
                len: 4096,
                process: 0,
            },
        );
        let mut done = Vec::new();
        while done.is_empty() {
            let t = sim.next_event().expect("the write completes");
            sim.advance(t, &mut done);
        }
        let ops = &sim.member_ops().unwrap().ops;
        assert!(!ops.is_empty());
        assert!(
            ops.iter().all(|o| o.offset >= DATA_OFFSET),
            "{level:?}: {ops:?}"
        );
    }
}

#[test]
fn a_bitmap_on_raid0_is_refused_before_anything_is_made() {
    let e = TaskArray::build(spec(Level::Raid0, 2, 64 << 10, &[]), None, Some(None)).unwrap_err();
    assert!(e.contains("RAID 0 has none"), "{e}");
}
