//! A sequential stream of whole-stripe writes: md and raidlab both write
//! whole stripes and read (almost) nothing from the members (guest kind `S`).

use super::*;

/// The kernel's md and raidlab's engine on the same sequential stream of
/// 1 MiB writes to a RAID 5 of 4 with 512 KiB chunks (a stripe holds 1.5 MiB
/// of data, so every other write covers part of two stripes): both must write
/// whole stripes, reading (almost) nothing from the members, raidlab no more
/// than md. md's member
/// sectors come from the loop devices' statistics in the guest; raidlab's
/// from counting members under an array started as every user starts one.
#[test]
fn a_sequential_write_stream_reads_almost_nothing_in_md_and_no_more_in_raidlab() {
    if vm_tests_off() {
        return;
    }
    const STREAM_MIB: u64 = 48;
    // raidlab first: no VM needed.
    let rl = raidlab_stream_reads(STREAM_MIB);
    let _one = ONE_BOOT.lock().unwrap_or_else(|p| p.into_inner());
    let guest_dir = match guest() {
        Ok(g) => g,
        Err(why) => return skip(&why),
    };
    let work = work_dir("md_stream");
    let member = 32 * MIB;
    let data_path = work.join("data.img");
    let data = data_disk(&data_path, &pattern(STREAM_MIB * MIB));
    let mut slots = Slots {
        next: STREAM_MIB * MIB,
    };
    let cfg = Cfg {
        name: "r5-stream".into(),
        level: 5,
        layout: Some("left-symmetric".into()),
        chunk_kib: Some(512),
        devices: 4,
        member_bytes: member,
        flags: vec![],
    };
    let offs = slots.take(&cfg);
    data.set_len(slots.next).unwrap();
    data.sync_all().unwrap();
    let manifest = format!("S r5-stream 4 {member} {} {STREAM_MIB}\n", csv(&offs));
    let res = match boot(&guest_dir, &work, "s", &manifest, &data_path) {
        Ok(r) => r,
        Err(why) => return skip(&why),
    };
    let (status, detail) = res
        .get(&("r5-stream".to_string(), "S".to_string()))
        .cloned()
        .unwrap_or_else(|| ("MISSING".into(), "no result from the guest".into()));
    assert_eq!(status, "PASS", "md's stream: {detail}");
    let field = |k: &str| -> u64 {
        detail
            .split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('=')?.parse().ok())
            .unwrap_or_else(|| panic!("no {k} in {detail:?}"))
    };
    let written = STREAM_MIB * MIB;
    let md_read = field("read_sectors") * 512;
    let md_wrote = field("write_sectors") * 512;
    loud(&format!(
        "md_compat: a {STREAM_MIB} MiB sequential stream, RAID 5 of 4, 512K chunks: md read {md_read} and wrote {md_wrote} member bytes ({detail}); raidlab read {} and wrote {}",
        rl.0, rl.1
    ));
    // md reads a little (2-4% in runs here: partial stripes where the page
    // cache's writeback batches end); raidlab must do at least as well and
    // stay under the 2%.
    assert!(
        md_read * 10 < written,
        "md read {md_read} member bytes for {written} written (10% or more)"
    );
    assert!(
        rl.0 <= md_read && rl.0 * 50 < written,
        "raidlab read {} member bytes for {written} written; md read {md_read}",
        rl.0
    );
    // Whole stripes: member writes are the data plus a third for parity.
    for (who, wrote) in [("md", md_wrote), ("raidlab", rl.1)] {
        assert!(
            wrote >= written * 4 / 3 && wrote < written * 4 / 3 + written / 20,
            "{who} wrote {wrote} member bytes for {written} (whole stripes write 4/3 of it)"
        );
    }
    let _ = fs::remove_dir_all(&work);
}

/// Member bytes (read, written) for raidlab writing `mib` 1 MiB writes in
/// sequence to a RAID 5 of 4 with 512K chunks, started for writing.
fn raidlab_stream_reads(mib: u64) -> (u64, u64) {
    use raidlab_core::{Result, Volume};
    use raidlab_raid::assemble::{create, CreateSpec, Device, NewMember};
    use raidlab_raid::lifecycle::{StartOptions, Started};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    #[derive(Debug)]
    struct Counted {
        inner: raidlab_devices::MemVolume,
        read: AtomicU64,
        written: AtomicU64,
    }
    impl Volume for Counted {
        fn name(&self) -> String {
            self.inner.name()
        }
        fn size(&self) -> u64 {
            self.inner.size()
        }
        fn block_size(&self) -> u32 {
            self.inner.block_size()
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
            self.read.fetch_add(buf.len() as u64, Ordering::Relaxed);
            self.inner.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
            self.written.fetch_add(buf.len() as u64, Ordering::Relaxed);
            self.inner.write_at(buf, offset)
        }
        fn flush(&self) -> Result<()> {
            self.inner.flush()
        }
    }
    let members: Vec<Arc<Counted>> = (0..4)
        .map(|_| {
            Arc::new(Counted {
                inner: raidlab_devices::MemVolume::new(32 * MIB),
                read: AtomicU64::new(0),
                written: AtomicU64::new(0),
            })
        })
        .collect();
    let devs = members
        .iter()
        .enumerate()
        .map(|(i, m)| NewMember {
            device: Device {
                path: format!("m{i}"),
                volume: m.clone(),
            },
            zeroed: true,
        })
        .collect();
    let spec = CreateSpec {
        level: raidlab_layout::Level::Raid5,
        layout: raidlab_layout::Layout::Parity(raidlab_layout::ParityLayout::LeftSymmetric),
        chunk_bytes: 512 << 10,
        spares: 0,
        name: "stream".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let started = Started::start(
        create(&spec, devs).unwrap(),
        StartOptions {
            write: true,
            ..StartOptions::default()
        },
    )
    .unwrap();
    let counts = || -> (u64, u64) {
        members.iter().fold((0, 0), |(r, w), m| {
            (
                r + m.read.load(Ordering::Relaxed),
                w + m.written.load(Ordering::Relaxed),
            )
        })
    };
    let before = counts();
    let buf = pattern(MIB);
    for i in 0..mib {
        started.array.write_at(&buf, i * MIB).unwrap();
    }
    started.array.flush().unwrap();
    let after = counts();
    started.stop().unwrap();
    (after.0 - before.0, after.1 - before.1)
}
