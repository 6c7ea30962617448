//! The cache options of the simulator's configuration grammar: what they
//! build, and that bad values are refused naming what is wrong.

use raidlab_cache::Mode;
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::Device;

#[test]
fn short_forms_build_a_cache_in_front() {
    let cfg = SimConfig::short(
        "raid5:3xhdd-7200:cache=intel-520/writeback:cache-size=1G:cache-block=4K:cache-cutoff=0",
    )
    .unwrap();
    assert_eq!(
        cfg.describe(),
        "raid5 of 3 x hdd-7200, cached by intel-520 (writeback, 1G, 4K blocks)"
    );
    let plain = SimConfig::short("raid5:3xhdd-7200")
        .unwrap()
        .build(&[])
        .unwrap();
    let c = cfg.build_cache(&[]).unwrap();
    assert_eq!(
        c.capacity(),
        plain.capacity(),
        "a cache is the size of its origin"
    );
    let sb = c.volume().superblock();
    assert_eq!(sb.mode, Mode::WriteBack);
    assert_eq!(sb.block_size, 4096);
    assert_eq!(sb.sequential_cutoff, 0);
    assert!(sb.layout.data_offset + sb.layout.cache_blocks * 4096 <= 1 << 30);
    assert_eq!(c.info().parts.len(), 2, "the cache device and the origin");
    // One device with a cache; the default mode is raidlab's (write-through).
    let one = SimConfig::short("hdd-7200:cache=intel-520:cache-size=256M").unwrap();
    assert_eq!(
        one.build_cache(&[]).unwrap().volume().superblock().mode,
        Mode::WriteThrough
    );
}

#[test]
fn bad_cache_options_are_refused() {
    for (spec, says) in [
        ("hdd-7200:cache=intel-520/fast", "unknown cache mode `fast`"),
        ("hdd-7200:cache-size=1G", "needs `cache=PRESET`"),
        ("hdd-7200:chunk=64K", "not an option of one device"),
        (
            "raid5:3xhdd-7200:cache=intel-520:cache-block=3K",
            "not a power of two",
        ),
        (
            "raid5:3xhdd-7200:cache=intel-520:cache-size=1T",
            "the most a simulated cache holds",
        ),
        (
            "raid5:3xhdd-7200:cache=intel-520:cache-size=lots",
            "is not a size",
        ),
    ] {
        let e = SimConfig::short(spec).unwrap_err().to_string();
        assert!(e.contains(says), "{spec}: {e}");
        assert!(e.starts_with(&format!("sim:{spec}")), "{spec}: {e}");
    }
    let e = SimConfig::short("raid5:3xhdd-7200:cache=nope")
        .unwrap()
        .build(&[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown device preset `nope`"), "{e}");
}

#[test]
fn toml_takes_a_cache_section() {
    let dir = std::env::temp_dir().join(format!("raidlab-sim-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        "device = \"hdd-7200\"\n[array]\nlevel = \"raid1\"\nmembers = 2\n[cache]\ndevice = \"intel-520\"\nmode = \"writearound\"\nsize = \"512M\"\ndirty_target_pct = 20\npromote_threshold = 2\n",
    )
    .unwrap();
    let (cfg, extra) = SimConfig::load(&good).unwrap();
    let sb = cfg.build_cache(&extra).unwrap().volume().superblock();
    assert_eq!(sb.mode, Mode::WriteAround);
    assert_eq!((sb.dirty_target_pct, sb.promote_threshold), (20, 2));
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "device = \"hdd-7200\"\n[cache]\ndevice = \"intel-520\"\nsize = \"1G\"\ndirty_target_pct = 120\n",
    )
    .unwrap();
    let e = SimConfig::load(&bad).unwrap_err().to_string();
    assert!(e.contains("bad.toml:5"), "{e}");
    assert!(e.contains("dirty_target_pct"), "{e}");
    let unknown = dir.join("unknown.toml");
    std::fs::write(
        &unknown,
        "device = \"hdd-7200\"\n[cache]\ndevice = \"intel-520\"\nspeed = 3\n",
    )
    .unwrap();
    let e = SimConfig::load(&unknown).unwrap_err().to_string();
    assert!(e.contains("speed"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
