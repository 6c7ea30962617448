//! A reshape while clients read and write the array (`LiveArray::reshape`):
//! writers keep writing through the served volume while the walk moves the
//! data, and every byte reads back as last written, during the reshape
//! and after it, in the new geometry, with parity that checks.

use raidlab_core::Volume;
use raidlab_layout::{Layout, Level};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::grow::{Policy, ReshapeRequest, SizeRequest};
use raidlab_raid::live::{LiveArray, WriteMark};
use raidlab_raid::recovery::RunOptions;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const MIB: u64 = 1 << 20;
const BLOCK: u64 = 4096;

fn devices(n: usize) -> Vec<Device> {
    (0..n)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(raidlab_devices::MemVolume::new(16 * MIB)),
        })
        .collect()
}

/// A block's contents: which block, which write.
fn block(at: u64, version: u64) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK as usize];
    let seed = (at / BLOCK).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ version.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    for (i, x) in b.iter_mut().enumerate() {
        *x = ((seed ^ i as u64).wrapping_mul(0xff51_afd7_ed55_8ccd) >> 56) as u8;
    }
    b
}

fn level_array(level: Level, n: usize, devs: &[Device]) -> Assembly {
    bitmapped_array(level, n, devs, false)
}

/// [`level_array`], with an internal bitmap of 256 KiB chunks if `bitmap`.
fn bitmapped_array(level: Level, n: usize, devs: &[Device], bitmap: bool) -> Assembly {
    let spec = CreateSpec {
        level,
        layout: Layout::parse(level, None).unwrap(),
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "served".into(),
        force: false,
        bitmap,
        bitmap_chunk: bitmap.then_some(256 << 10),
        ppl: false,
    };
    let members = devs[..n]
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    create(&spec, members).unwrap()
}

/// Writers (one per thread, each on its own blocks, so the last version of
/// each block is known) write and read back through `volume` until `done`.
/// Returns each block's last version written (0: the fill).
fn writers(
    volume: Arc<dyn Volume>,
    blocks: u64,
    threads: u64,
    done: Arc<AtomicBool>,
    writes: Arc<AtomicU64>,
) -> Vec<std::thread::JoinHandle<Vec<(u64, u64)>>> {
    (0..threads)
        .map(|t| {
            let (volume, done, writes) = (volume.clone(), done.clone(), writes.clone());
            std::thread::spawn(move || {
                let mut last = Vec::new();
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                let mut version = 1;
                while !done.load(Ordering::Acquire) || version < 40 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Block of this thread: t, t + threads, ...
                    let b = (x % (blocks / threads)) * threads + t;
                    let at = b * BLOCK;
                    let data = block(at, version);
                    volume.write_at(&data, at).unwrap();
                    let mut back = vec![0u8; BLOCK as usize];
                    volume.read_at(&mut back, at).unwrap();
                    assert!(back == data, "block {b} read back other bytes mid-reshape");
                    last.push((b, version));
                    version += 1;
                    writes.fetch_add(1, Ordering::Relaxed);
                    if version % 16 == 0 {
                        volume.flush().unwrap();
                    }
                }
                last
            })
        })
        .collect()
}

fn req(to: usize) -> ReshapeRequest {
    ReshapeRequest {
        raid_devices: Some(to),
        ..ReshapeRequest::default()
    }
}

fn reshape_under_writes(level: Level, from: usize, to: usize) {
    reshape_under_writes_with(level, from, to, false)
}

/// [`reshape_under_writes`] of an array with an internal bitmap if
/// `bitmap`: its writes in both geometries mark one copy of the bits,
/// which then stays true (not out of date on any member, md's superblock
/// fields, no mismatch).
fn reshape_under_writes_with(level: Level, from: usize, to: usize, bitmap: bool) {
    let devs = devices(to.max(from));
    let mut asm = bitmapped_array(level, from, &devs, bitmap);
    let bitmap_before = asm.bitmap.as_ref().map(|b| b.sb.clone());
    let shrink = to < from;
    if shrink {
        // Room at the members' ends for the data to move up (md's backward
        // reshape).
        asm.grow_size(SizeRequest::Bytes(14 * MIB), true).unwrap();
    }
    let g = asm.geometry;
    let old_bytes = g.array_bytes();
    // A shrink keeps what the fewer members hold (the size the user
    // accepts, as md's --array-size first).
    let kept = match (shrink, level) {
        (true, Level::Raid10) => Some(asm.raid10_shrink_holds(&req(to)).unwrap()),
        (true, _) => Some((g.data_disks() - (from - to)) as u64 * g.member_bytes),
        (false, _) => None,
    };
    let blocks = kept.unwrap_or(old_bytes) / BLOCK;
    // As a start for writing marks it (md's "active"), before the running
    // array is built.
    assert!(asm.mark_dirty().unwrap(), "in sync before");
    let array = Arc::new(asm.array().unwrap());
    for b in 0..blocks {
        array.write_at(&block(b * BLOCK, 0), b * BLOCK).unwrap();
    }
    array.flush().unwrap();
    let live = LiveArray::new(asm, array);
    live.start_safe_mode(true);
    let volume = live.volume();
    let done = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let threads = writers(volume.clone(), blocks, 3, done.clone(), writes.clone());
    // The writers are under way (the superblocks carry the dirty mark of an
    // array taking writes, which is no resync owed) before the reshape is
    // asked for.
    while writes.load(Ordering::Relaxed) < 50 {
        std::thread::yield_now();
    }
    assert_eq!(live.write_mark(), Some(WriteMark::Active));
    let added = devs[from..to.max(from)].to_vec();
    let req = req(to);
    let steps = Mutex::new(0u64);
    let before = Mutex::new(0u64);
    let report = live
        .reshape(
            |asm| {
                *before.lock().unwrap() = writes.load(Ordering::Relaxed);
                let plan = asm.reshape_check_sized(&req, added.len(), kept)?;
                for d in added {
                    asm.add(d, false)?;
                }
                asm.reshape_start(plan)
            },
            RunOptions {
                // Small steps and checkpoints: many windows and many
                // writes waiting for a checkpoint.
                checkpoint_bytes: 256 << 10,
                // Paced (per member) so that the writers get a share of a
                // loaded machine during the walk.
                max_rate: Some(24 << 20),
                ..RunOptions::default()
            },
            &mut |_| *steps.lock().unwrap() += 1,
        )
        .unwrap();
    let during = writes.load(Ordering::Relaxed) - *before.lock().unwrap();
    done.store(true, Ordering::Release);
    eprintln!(
        "writes during the reshape: {during}, steps {}",
        steps.lock().unwrap()
    );
    let mut last = vec![0u64; blocks as usize];
    for t in threads {
        for (b, v) in t.join().unwrap() {
            last[b as usize] = v;
        }
    }
    assert!(
        *steps.lock().unwrap() > 1,
        "the walk took more than one step"
    );
    assert!(
        during > 100,
        "the clients wrote during the reshape: {during}"
    );
    assert_eq!(report.new_raid_devices, to);
    assert_eq!(report.backwards, shrink);
    assert!(shrink || report.new_array_bytes > old_bytes);
    // Served after the reshape: the new geometry, larger, every byte as
    // last written (the grown part reads zeros).
    assert_eq!(volume.size(), report.new_array_bytes);
    assert_eq!(live.array().geometry().raid_disks, to);
    assert!(!live.reshaping());
    for b in 0..blocks {
        let mut got = vec![0u8; BLOCK as usize];
        volume.read_at(&mut got, b * BLOCK).unwrap();
        assert!(
            got == block(b * BLOCK, last[b as usize]),
            "block {b}: not the last version ({}) written",
            last[b as usize]
        );
    }
    if !shrink {
        let mut tail = vec![0u8; (report.new_array_bytes - old_bytes) as usize];
        volume.read_at(&mut tail, old_bytes).unwrap();
        assert!(tail.iter().all(|&x| x == 0), "the new space reads zeros");
    }
    if bitmap {
        // md's bitmap daemon on the array served after the reshape: it
        // writes the bitmap as that array keeps it (checked below).
        for _ in 0..3 {
            live.array().bitmap_daemon_pass().unwrap();
        }
    }
    // Stopped and assembled again: the superblocks say the new geometry,
    // parity agrees everywhere, the data is the same.
    live.shutdown();
    volume.flush().unwrap();
    drop(volume);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(asm.reshape().is_none(), "no reshape recorded after its end");
    assert_eq!(asm.geometry.raid_disks, to);
    if let Some(before) = bitmap_before {
        // md's bitmap after a restripe: as it was but for its events (and
        // when its bits were last cleared: the clean stop's).
        let mut md = before;
        md.events = asm.members[0].sb.events;
        if level == Level::Raid10 {
            // A RAID 10's counts array sectors: md resizes it to the new
            // array at the reshape's start (`raid10_start_reshape`);
            // raidlab a shrink's at its end. Written so by the end's commit
            // and by the array served after it (its copy of the bits took
            // the new size: were it the old one, its next bitmap write would
            // put the old size back).
            md.sync_size = report.new_array_bytes / 512;
        }
        for d in &devs[..to] {
            let sb = raidlab_md::Superblock::read_from(d.volume.as_ref())
                .unwrap()
                .unwrap();
            let bm = raidlab_md::bitmap::Bitmap::read_from(d.volume.as_ref(), &sb)
                .unwrap()
                .unwrap_or_else(|| panic!("{}: no bitmap", d.path));
            md.events_cleared = bm.sb.events_cleared;
            assert!(md.events_cleared <= md.events);
            assert_eq!(bm.sb, md, "{}: bitmap superblock", d.path);
            assert!(!bm.is_stale(&sb), "{}", d.path);
        }
    }
    let mut copy = asm.clone();
    let scrub = copy
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(scrub.mismatch_sectors, 0, "parity checks after the reshape");
    let array = asm.array().unwrap();
    for b in 0..blocks {
        let mut got = vec![0u8; BLOCK as usize];
        array.read_at(&mut got, b * BLOCK).unwrap();
        assert!(
            got == block(b * BLOCK, last[b as usize]),
            "block {b} after a restart"
        );
    }
}

#[test]
fn a_raid5_grows_by_a_member_while_clients_write_and_reads_back_exactly() {
    reshape_under_writes(Level::Raid5, 4, 5);
}

#[test]
fn a_raid5_with_a_bitmap_grows_by_a_member_while_clients_write_and_reads_back_exactly() {
    reshape_under_writes_with(Level::Raid5, 4, 5, true);
}

#[test]
fn a_raid6_grows_by_two_members_while_clients_write_and_reads_back_exactly() {
    reshape_under_writes(Level::Raid6, 4, 6);
}

#[test]
fn a_raid5_shrinks_by_a_member_while_clients_write_and_reads_back_exactly() {
    reshape_under_writes(Level::Raid5, 5, 4);
}

#[test]
fn a_raid10_grows_by_a_member_while_clients_write_and_reads_back_exactly() {
    reshape_under_writes(Level::Raid10, 4, 5);
}

#[test]
fn a_raid10_with_a_bitmap_grows_by_a_member_while_clients_write_and_reads_back_exactly() {
    reshape_under_writes_with(Level::Raid10, 4, 5, true);
}

#[test]
fn a_raid10_with_a_bitmap_shrinks_by_a_member_while_clients_write_and_reads_back_exactly() {
    reshape_under_writes_with(Level::Raid10, 5, 4, true);
}

/// A membership change or a scrub asked while a reshape walks is refused
/// with the reason; a second reshape too.
#[test]
fn a_reshape_in_service_refuses_other_changes_while_it_runs() {
    let devs = devices(5);
    let asm = level_array(Level::Raid5, 4, &devs);
    let array = Arc::new(asm.array().unwrap());
    let live = LiveArray::new(asm, array);
    let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let added = devs[4].clone();
    let seen = Mutex::new(Vec::new());
    let l2 = live.clone();
    let e = live
        .reshape(
            |asm| {
                let req = ReshapeRequest {
                    raid_devices: Some(5),
                    ..ReshapeRequest::default()
                };
                let plan = asm.reshape_check_sized(&req, 1, None)?;
                asm.add(added, false)?;
                asm.reshape_start(plan)
            },
            RunOptions {
                stop: Some(stop),
                max_rate: Some(8 << 20),
                ..RunOptions::default()
            },
            &mut |_| {
                let mut seen = seen.lock().unwrap();
                if seen.is_empty() {
                    seen.push(l2.remove("m1").unwrap_err().to_string());
                    seen.push(
                        l2.scrub(false, RunOptions::default(), &mut |_| {})
                            .unwrap_err()
                            .to_string(),
                    );
                    seen.push(
                        l2.reshape(|_| Ok(()), RunOptions::default(), &mut |_| {})
                            .unwrap_err()
                            .to_string(),
                    );
                    assert!(l2.reshaping());
                    assert!(l2.status().reshape.is_some_and(|r| r.running));
                    stop.store(true, Ordering::Release);
                }
            },
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("reshape stopped at array byte"),
        "{e}"
    );
    let seen = seen.lock().unwrap();
    assert!(seen[0].contains("being reshaped"), "{}", seen[0]);
    assert!(seen[1].contains("being reshaped"), "{}", seen[1]);
    assert!(
        seen[2].contains("a reshape is running already"),
        "{}",
        seen[2]
    );
    // Stopped mid-way, the array still serves (both geometries) and the
    // superblocks record where it stopped.
    assert!(!live.reshaping());
    let r = live.with_assembly(|a| a.reshape().unwrap().unwrap());
    assert!(r.position > 0 && r.position < r.new.array_bytes());
    let v = live.volume();
    let mut buf = vec![0u8; 8192];
    v.read_at(&mut buf, r.position - 4096).unwrap();
    v.write_at(&buf, 0).unwrap();
}

/// md's `--grow --bitmap internal`, then `none`, on a served array while
/// writers keep writing: the running array is swapped for one with (then
/// without) the bitmap, nothing written is lost, and the superblocks say
/// so after a restart.
#[test]
fn a_bitmap_is_added_and_removed_while_clients_write() {
    let devs = devices(4);
    let asm = level_array(Level::Raid5, 4, &devs);
    let bytes = asm.geometry.array_bytes();
    let blocks = bytes / BLOCK;
    let array = Arc::new(asm.array().unwrap());
    for b in 0..blocks {
        array.write_at(&block(b * BLOCK, 0), b * BLOCK).unwrap();
    }
    array.flush().unwrap();
    let live = LiveArray::new(asm, array);
    live.start_safe_mode(true);
    let volume = live.volume();
    let done = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let threads = writers(volume.clone(), blocks, 3, done.clone(), writes.clone());
    while writes.load(Ordering::Relaxed) < 200 {
        std::thread::yield_now();
    }
    live.change_running(|asm| asm.grow_bitmap(true, None))
        .unwrap();
    assert!(live.with_assembly(|a| a.bitmap.is_some()));
    let after_add = writes.load(Ordering::Relaxed);
    while writes.load(Ordering::Relaxed) < after_add + 200 {
        std::thread::yield_now();
    }
    // A second bitmap is refused with md's words, nothing changed.
    let e = live
        .change_running(|asm| asm.grow_bitmap(true, None))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bitmap already present"), "{e}");
    let with_bitmap = Assembly::assemble(devs.clone()).unwrap();
    assert!(with_bitmap.bitmap.is_some(), "the bitmap is on the members");
    live.change_running(|asm| asm.grow_bitmap(false, None))
        .unwrap();
    done.store(true, Ordering::Release);
    let mut last = vec![0u64; blocks as usize];
    for t in threads {
        for (b, v) in t.join().unwrap() {
            last[b as usize] = v;
        }
    }
    for b in 0..blocks {
        let mut got = vec![0u8; BLOCK as usize];
        volume.read_at(&mut got, b * BLOCK).unwrap();
        assert!(got == block(b * BLOCK, last[b as usize]), "block {b}");
    }
    live.shutdown();
    volume.flush().unwrap();
    drop(volume);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(asm.bitmap.is_none(), "the bitmap is gone from the members");
}

/// What stops the served resync below (a server's stop flag is static).
static RESYNC_STOP: AtomicBool = AtomicBool::new(false);

/// `--size` of a served RAID 5 with a bitmap, under writers: the array of
/// the new size serves at once; stopped in the middle of the new space's
/// resync and stopped cleanly, the superblocks say where it resumes (not
/// clean) and the bitmap keeps the new space's chunks dirty; the resync at
/// the next start finishes it and parity checks, stale bytes that were in
/// the new space included, every block as last written.
#[test]
fn a_served_size_change_stopped_mid_resync_resumes_where_it_stopped() {
    let devs = devices(3);
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::parse(Level::Raid5, None).unwrap(),
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "served".into(),
        force: false,
        bitmap: true,
        bitmap_chunk: Some(1 << 20),
        ppl: false,
    };
    let members = devs
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let mut asm = create(&spec, members).unwrap();
    // Members larger than the array uses, the rest holding stale bytes.
    asm.grow_size(SizeRequest::Bytes(8 * MIB), true).unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for m in &asm.members {
        let from = m.sb.data_offset * 512 + 8 * MIB;
        let mut stale = vec![0u8; (16 * MIB - from) as usize];
        for b in stale.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
        }
        m.device.volume.write_at(&stale, from).unwrap();
    }
    let old_bytes = asm.geometry.array_bytes();
    let blocks = old_bytes / BLOCK;
    assert!(asm.mark_dirty().unwrap(), "in sync before");
    let array = Arc::new(asm.array().unwrap());
    for b in 0..blocks {
        array.write_at(&block(b * BLOCK, 0), b * BLOCK).unwrap();
    }
    array.flush().unwrap();
    let live = LiveArray::new(asm, array);
    live.start_safe_mode(true);
    let volume = live.volume();
    let done = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let threads = writers(volume.clone(), blocks, 3, done.clone(), writes.clone());
    while writes.load(Ordering::Relaxed) < 200 {
        std::thread::yield_now();
    }
    // Stop the resync once it has done a part of the new space.
    let watcher = {
        let live = live.clone();
        std::thread::spawn(move || loop {
            let st = live.status().scrub;
            if st.as_ref().is_some_and(|s| s.running && s.done >= 10 * MIB) {
                RESYNC_STOP.store(true, Ordering::Release);
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        })
    };
    let opts = RunOptions {
        max_rate: Some(8 * MIB),
        stop: Some(&RESYNC_STOP),
        ..RunOptions::default()
    };
    let e = live
        .resize(SizeRequest::Max, false, None, opts, &mut |_| {})
        .unwrap_err()
        .to_string();
    watcher.join().unwrap();
    assert!(e.contains("resync"), "stopped: {e}");
    let new_bytes = volume.size();
    assert!(
        new_bytes > old_bytes + 8 * MIB,
        "{old_bytes} -> {new_bytes}"
    );
    let owed = live.resync_owed().expect("a resync is owed");
    assert!(
        owed * 512 > 8 * MIB && owed * 512 < 15 * MIB,
        "owed from {owed}"
    );
    // Meanwhile writes to the new space compute parity from data (md's
    // reconstruct-write past `recovery_cp`): from the old size on.
    assert_eq!(
        live.array().unsynced_from(),
        Some(old_bytes / (live.array().geometry().data_disks() as u64)),
        "the running array knows where the resync is owed from"
    );
    // While it is owed, a change that needs the array consistent is
    // refused (it would record the array over the stale part).
    let e = live
        .resize(
            SizeRequest::Max,
            false,
            None,
            RunOptions::default(),
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("resync pending"), "{e}");
    done.store(true, Ordering::Release);
    let mut last = vec![0u64; blocks as usize];
    for t in threads {
        for (b, v) in t.join().unwrap() {
            last[b as usize] = v;
        }
    }
    // The server's clean stop.
    live.shutdown();
    volume.flush().unwrap();
    drop(volume);
    live.stop_records(&live.array(), true).unwrap();
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    assert_eq!(asm.geometry.array_bytes(), new_bytes);
    assert!(!asm.in_sync(), "the resync is owed after the stop");
    let at = asm.members.iter().map(|m| m.sb.resync_offset).max();
    assert_eq!(at, Some(owed), "the superblocks say where it resumes");
    let bm = asm.bitmap.as_ref().expect("bitmap");
    let last_chunk = bm.chunk_of(new_bytes / 2 / 512 - 1);
    assert!(bm.is_dirty(last_chunk), "the new space's bits are kept");
    asm.resync(RunOptions::default(), &mut |_| {}).unwrap();
    let mut copy = asm.clone();
    let scrub = copy
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(scrub.mismatch_sectors, 0, "parity checks after the resync");
    let array = asm.array().unwrap();
    for b in 0..blocks {
        let mut got = vec![0u8; BLOCK as usize];
        array.read_at(&mut got, b * BLOCK).unwrap();
        assert!(got == block(b * BLOCK, last[b as usize]), "block {b}");
    }
}

/// `--consistency-policy` of a served RAID 5 (what a served `grow` runs):
/// from the partial parity log to resync and back while writers keep
/// writing, the running array swapped each time; every block as last
/// written, and assembled again the array keeps the log and checks.
#[test]
fn a_raid5_switches_between_ppl_and_resync_while_clients_write() {
    let devs = devices(3);
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::parse(Level::Raid5, None).unwrap(),
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "served".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: true,
    };
    let members = devs
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let mut asm = create(&spec, members).unwrap();
    asm.start_ppl().unwrap();
    let blocks = asm.geometry.array_bytes() / BLOCK;
    let array = Arc::new(asm.array().unwrap());
    for b in 0..blocks {
        array.write_at(&block(b * BLOCK, 0), b * BLOCK).unwrap();
    }
    array.flush().unwrap();
    let live = LiveArray::new(asm, array);
    live.start_safe_mode(true);
    let volume = live.volume();
    let done = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let threads = writers(volume.clone(), blocks, 3, done.clone(), writes.clone());
    let policy = |l: &LiveArray| l.with_assembly(|a| a.consistency_policy());
    for to in [Policy::Resync, Policy::Ppl] {
        let before = writes.load(Ordering::Relaxed);
        while writes.load(Ordering::Relaxed) < before + 200 {
            std::thread::yield_now();
        }
        live.change_running(|asm| asm.grow_policy(to)).unwrap();
        assert_eq!(policy(&live), to);
    }
    // md's words for a journal, nothing changed.
    let e = live
        .change_running(|asm| asm.grow_policy(Policy::Journal))
        .unwrap_err()
        .to_string();
    assert!(e.contains("consistency policy journal"), "{e}");
    done.store(true, Ordering::Release);
    let mut last = vec![0u64; blocks as usize];
    for t in threads {
        for (b, v) in t.join().unwrap() {
            last[b as usize] = v;
        }
    }
    for b in 0..blocks {
        let mut got = vec![0u8; BLOCK as usize];
        volume.read_at(&mut got, b * BLOCK).unwrap();
        assert!(got == block(b * BLOCK, last[b as usize]), "block {b}");
    }
    live.shutdown();
    volume.flush().unwrap();
    drop(volume);
    live.stop_records(&live.array(), true).unwrap();
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert_eq!(asm.consistency_policy(), Policy::Ppl);
    let mut copy = asm.clone();
    let scrub = copy
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(scrub.mismatch_sectors, 0);
}
