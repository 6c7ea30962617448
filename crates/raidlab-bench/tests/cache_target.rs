//! `cache:CACHEDEV@ORIGIN` targets: a cache made beforehand, opened in process
//! in front of an O_DIRECT file, its statistics readable, stopped cleanly.

use raidlab_bench::target::{OpenOptions, TargetKind};
use raidlab_bench::Target;
use raidlab_cache::{create, examine, path_identity, Config, Mode};
use raidlab_core::Volume;
use raidlab_devices::{FileVolume, OpenMode};

fn opts(size: u64) -> OpenOptions {
    OpenOptions {
        size,
        direct: true,
        writes: true,
        allow_device_writes: false,
    }
}

/// A 4 KiB-aligned buffer: the origin is opened with O_DIRECT.
fn aligned(len: usize) -> (Vec<u8>, usize) {
    let v = vec![0u8; len + 4096];
    let at = v.as_ptr().align_offset(4096);
    (v, at)
}

#[test]
fn a_write_back_cache_target_serves_hits_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let origin = dir.path().join("origin.img");
    let ssd = dir.path().join("ssd.img");
    std::fs::write(&origin, vec![0x11u8; 8 << 20]).unwrap();
    std::fs::write(&ssd, vec![0u8; 4 << 20]).unwrap();
    let cache = FileVolume::open(&ssd, OpenMode::ReadWrite).unwrap();
    let o = FileVolume::open(&origin, OpenMode::ReadWrite).unwrap();
    // A dirty target of 100%: the background cleaner has nothing to do, so
    // the counts below do not depend on when it ticks.
    let config = Config {
        mode: Mode::WriteBack,
        block_size: 4096,
        dirty_target_pct: 100,
        ..Config::default()
    };
    create(
        &cache,
        &o,
        path_identity(&origin).unwrap(),
        "origin",
        [3; 16],
        config,
    )
    .unwrap();
    drop((cache, o));

    let spec = format!("cache:{}@{}", ssd.display(), origin.display());
    let t = Target::open(&spec, opts(1 << 20)).unwrap();
    assert_eq!(t.kind, TargetKind::Cache);
    assert_eq!(t.size, 1 << 20);
    assert!(
        t.notes.iter().any(|n| n.contains("WriteBack")),
        "{:?}",
        t.notes
    );
    let (mut buf, at) = aligned(8192);
    buf[at..at + 8192].fill(0x77);
    t.volume.write_at(&buf[at..at + 8192], 4096).unwrap();
    t.volume.read_at(&mut buf[at..at + 8192], 4096).unwrap();
    assert!(buf[at..at + 8192].iter().all(|&b| b == 0x77));
    t.volume.read_at(&mut buf[at..at + 4096], 1 << 16).unwrap();
    assert!(buf[at..at + 4096].iter().all(|&b| b == 0x11));
    let s = t.cache_stats().unwrap();
    assert_eq!((s.write_misses, s.read_hits, s.read_misses), (1, 1, 1));
    assert_eq!((s.dirty_blocks, s.promotions), (2, 1));
    t.finish().unwrap();
    assert!(t.cache_stats().is_none());
    drop(t);
    let sb = examine(&FileVolume::open(&ssd, OpenMode::ReadOnly).unwrap()).unwrap();
    assert!(sb.clean);
    assert_eq!(sb.dirty_blocks, 2);
    // Write-back: the origin has not got the data yet.
    assert_eq!(std::fs::read(&origin).unwrap()[4096], 0x11);
}

#[test]
fn bad_cache_targets_are_refused_with_the_form_to_use() {
    let dir = tempfile::tempdir().unwrap();
    let ssd = dir.path().join("ssd.img");
    std::fs::write(&ssd, vec![0u8; 4 << 20]).unwrap();
    let err = |spec: String| Target::open(&spec, opts(0)).unwrap_err().to_string();
    assert!(err(format!("cache:{}", ssd.display())).contains("cache:CACHEDEV@ORIGIN"));
    assert!(
        err(format!("cache:{}@mem:8M", ssd.display())).contains("file, a block device or an array")
    );
    let e = err(format!("cache:{}@{}", ssd.display(), dir.path().display()));
    assert!(e.contains("not a directory"), "{e}");
    // No cache on the device yet.
    let origin = dir.path().join("origin.img");
    std::fs::write(&origin, vec![0u8; 8 << 20]).unwrap();
    let e = err(format!("cache:{}@{}", ssd.display(), origin.display()));
    assert!(e.contains("raidlab cache create"), "{e}");
}
