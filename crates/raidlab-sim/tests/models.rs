//! The HDD and SSD models against closed forms, against each other, and against
//! the published figures the preset file carries. Virtual time has no noise, so
//! every tolerance is tight and every assertion can fail.

use raidlab_core::IoKind;
use raidlab_sim::device::{Completion, Device, Request, MS, SEC};
use raidlab_sim::hdd::{Hdd, HddParams};
use raidlab_sim::presets::{self, Model, Preset, PresetError};
use raidlab_sim::ssd::{Ssd, SsdParams, State};
use raidlab_sim::workload::{self, Job, Outcome, Pattern};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn preset(name: &str) -> Preset {
    let all = presets::builtin().expect("built-in presets parse");
    all.into_iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no preset {name}"))
}

fn hdd_params(name: &str) -> HddParams {
    match preset(name).model {
        Model::Hdd(p) => p,
        Model::Ssd(_) | Model::Fixed(_) => panic!("{name} is not an HDD"),
    }
}

fn ssd_params(name: &str) -> SsdParams {
    match preset(name).model {
        Model::Ssd(p) => p,
        Model::Hdd(_) | Model::Fixed(_) => panic!("{name} is not an SSD"),
    }
}

fn hdd(p: &HddParams) -> Hdd {
    Hdd::new("test", p.clone(), vec![]).expect("valid params")
}

fn ssd(p: &SsdParams) -> Ssd {
    Ssd::new("test", p.clone(), vec![]).expect("valid params")
}

#[allow(clippy::too_many_arguments)]
fn job(
    pattern: Pattern,
    block: u64,
    read: bool,
    qd: u32,
    region: (u64, u64),
    duration: u64,
) -> Job {
    let mut j = Job::new(pattern, block, read, 1, qd, region.1);
    j.region = region;
    j.duration = duration;
    j
}

fn run(dev: &mut dyn Device, j: &Job) -> Outcome {
    workload::run(dev, j, 0).expect("job runs")
}

fn within(sim: f64, want: f64, tol: f64) -> bool {
    (sim / want - 1.0).abs() <= tol
}

/// `sim` within `tol` (a fraction) of the closed form `want`.
fn assert_near(sim: f64, want: f64, tol: f64, what: &str) {
    assert!(
        within(sim, want, tol),
        "{what}: simulated {sim:.2}, closed form {want:.2}"
    );
}

/// QD1 4 KiB random reads over the whole disk. Per request the disk spends the
/// firmware overhead, the mean seek (Lee's curve averages `average_seek_ms` over
/// uniform random pairs), half a revolution, the media transfer (4096 bytes at
/// the zoned rate; the mean of 1/rate for a rate linear in LBA from `ro` to `ri`
/// is ln(ro/ri)/(ro-ri)) and the link transfer (8b/10b: Gb/s x 100 MB/s).
#[test]
fn hdd_random_read_qd1_matches_the_closed_form() {
    let p = hdd_params("hdd-7200");
    let mut d = hdd(&p);
    let o = run(
        &mut d,
        &job(
            Pattern::Random,
            4096,
            true,
            1,
            (0, p.capacity_bytes),
            200 * SEC,
        ),
    );
    let (ro, ri) = (p.outer_mb_per_s * 1e6, p.inner_mb_per_s * 1e6);
    let media_s = 4096.0 * (ro / ri).ln() / (ro - ri);
    let per_op_s = p.average_seek_ms * 1e-3
        + 0.5 * 60.0 / p.rpm
        + media_s
        + p.command_overhead_us * 1e-6
        + 4096.0 / (p.interface_gbit_per_s * 100e6);
    let want = 1.0 / per_op_s;
    println!(
        "QD1 random 4 KiB: {:.2} IOPS, closed form {want:.2}",
        o.iops
    );
    assert!(
        within(o.iops, want, 0.03),
        "simulated {:.1} IOPS, closed form {want:.1}",
        o.iops
    );
}

#[test]
fn hdd_ncq_raises_random_read_iops() {
    let p = hdd_params("hdd-7200");
    let region = (0, p.capacity_bytes);
    let qd1 = run(
        &mut hdd(&p),
        &job(Pattern::Random, 4096, true, 1, region, 20 * SEC),
    );
    let qd32 = run(
        &mut hdd(&p),
        &job(Pattern::Random, 4096, true, 32, region, 20 * SEC),
    );
    println!("QD1 {:.1} IOPS, QD32 {:.1}", qd1.iops, qd32.iops);
    assert!(
        qd32.iops >= 1.5 * qd1.iops,
        "QD32 {:.1} IOPS vs QD1 {:.1}",
        qd32.iops,
        qd1.iops
    );
    let mut fifo = p.clone();
    fifo.ncq_depth = 1;
    let no_ncq = run(
        &mut hdd(&fifo),
        &job(Pattern::Random, 4096, true, 32, region, 20 * SEC),
    );
    assert!(within(no_ncq.iops, qd1.iops, 0.05), "{no_ncq:?} vs {qd1:?}");
}

#[test]
fn hdd_sequential_reads_run_at_the_zone_rate() {
    let p = hdd_params("hdd-7200");
    let start = run(
        &mut hdd(&p),
        &job(Pattern::Sequential, MIB, true, 1, (0, GIB), 5 * SEC),
    );
    assert!(
        within(start.mb_per_s, p.outer_mb_per_s, 0.03),
        "outer: {:.2} MB/s vs {}",
        start.mb_per_s,
        p.outer_mb_per_s
    );
    let end_region = (p.capacity_bytes - GIB, GIB);
    let end = run(
        &mut hdd(&p),
        &job(Pattern::Sequential, MIB, true, 1, end_region, 5 * SEC),
    );
    assert!(
        within(end.mb_per_s, p.inner_mb_per_s, 0.03),
        "inner: {:.2} MB/s vs {}",
        end.mb_per_s,
        p.inner_mb_per_s
    );
    // Without read-ahead a QD1 stream loses most of a revolution per request.
    let mut no_ra = p.clone();
    no_ra.read_ahead = false;
    let slow = run(
        &mut hdd(&no_ra),
        &job(Pattern::Sequential, 64 << 10, true, 1, (0, GIB), SEC),
    );
    let fast = run(
        &mut hdd(&p),
        &job(Pattern::Sequential, 64 << 10, true, 1, (0, GIB), SEC),
    );
    assert!(slow.mb_per_s < 0.6 * fast.mb_per_s, "{slow:?} vs {fast:?}");
}

#[test]
fn hdd_write_cache_acknowledges_early_and_flush_waits_for_destage() {
    let mut on = hdd_params("hdd-7200");
    on.write_cache = true;
    let mut off = on.clone();
    off.write_cache = false;
    let region = (0, on.capacity_bytes);
    let j = job(Pattern::Random, 4096, false, 1, region, SEC / 10);
    let fast = run(&mut hdd(&on), &j);
    let slow = run(&mut hdd(&off), &j);
    assert!(
        fast.iops > 10.0 * slow.iops,
        "cache on {fast:?}, off {slow:?}"
    );

    // Sequential writes coalesce in the cache, so destaging keeps up with a
    // host limited only by command overhead and the link, for longer than the
    // cache alone could absorb (5 s at ~38 MB/s against 32 MiB of dirty space).
    let j = job(Pattern::Sequential, 4096, false, 1, (0, GIB), 5 * SEC);
    let seq = run(&mut hdd(&on), &j);
    let host_bound =
        4096.0 / (on.command_overhead_us * 1e-6 + 4096.0 / (on.interface_gbit_per_s * 100e6)) / 1e6;
    assert!(
        seq.mb_per_s >= 0.9 * host_bound,
        "{:.2} MB/s vs {host_bound:.2}",
        seq.mb_per_s
    );

    // 64 random writes, then a flush: the writes are acknowledged within
    // milliseconds, the flush only after every one reached the media, which
    // takes at least a track-to-track seek each.
    let mut d = hdd(&on);
    let mut done: Vec<Completion> = Vec::new();
    let mut now = 0;
    for i in 0..64u64 {
        let offset = (i * 7_919_993 % 400_000) * 4_999_000 / 4096 * 4096;
        d.submit(
            now,
            Request {
                id: i,
                kind: IoKind::Write,
                offset,
                len: 4096,
                process: 0,
            },
        );
        while done.iter().all(|c| c.id != i) {
            now = d.next_event().expect("in flight");
            d.advance(now, &mut done);
        }
    }
    let last_ack = now;
    assert!(last_ack < 64 * MS, "acks took {last_ack} ns");
    d.submit(
        now,
        Request {
            id: 999,
            kind: IoKind::Flush,
            offset: 0,
            len: 0,
            process: 0,
        },
    );
    while let Some(t) = d.next_event() {
        d.advance(t, &mut done);
    }
    let flush = done.iter().find(|c| c.id == 999).expect("flush completes");
    let min_destage = (64.0 * on.track_to_track_ms * 1e6) as u64;
    assert!(
        flush.at >= min_destage,
        "flush at {} ns, before 64 destages could finish ({min_destage} ns)",
        flush.at
    );
    assert_eq!(done.len(), 65);

    let mut d = hdd(&off);
    d.submit(
        0,
        Request {
            id: 1,
            kind: IoKind::Flush,
            offset: 0,
            len: 0,
            process: 0,
        },
    );
    let t = d.next_event().expect("flush in flight");
    assert!(t <= MS, "flush with no write cache took {t} ns");
}

#[test]
fn ssd_queue_depth_and_parallelism() {
    let p = ssd_params("sata-ssd-1tb-2021");
    let qd1 = run(
        &mut ssd(&p),
        &job(Pattern::Random, 4096, true, 1, (0, GIB), SEC),
    );
    let qd32 = run(
        &mut ssd(&p),
        &job(Pattern::Random, 4096, true, 32, (0, GIB), SEC),
    );
    assert!(qd32.iops >= 4.0 * qd1.iops, "QD32 {qd32:?} vs QD1 {qd1:?}");
    let seq = run(
        &mut ssd(&p),
        &job(Pattern::Sequential, MIB, true, 8, (0, GIB), SEC),
    );
    let limit =
        (p.interface_mb_per_s * p.link_efficiency).min(p.channels as f64 * p.channel_mb_per_s);
    assert_near(seq.mb_per_s, limit, 0.05, "sequential MB/s");
    // A narrow drive: the channels, not the link, are the limit.
    let mut narrow = p.clone();
    narrow.channels = 2;
    narrow.channel_mb_per_s = 100.0;
    let seq = run(
        &mut ssd(&narrow),
        &job(Pattern::Sequential, MIB, true, 8, (0, GIB), SEC),
    );
    assert!(
        within(seq.mb_per_s, 200.0, 0.05),
        "{:.1} MB/s vs 200",
        seq.mb_per_s
    );
}

/// An idle SSD's QD1 4 KiB read: the command time, one tR, 4 KiB across the
/// channel, the ECC decode, then 4 KiB across the link at its data rate
/// (`interface_mb_per_s x link_efficiency`). Sequential reads and writes run
/// at that data rate when the flash is faster; QD32 4 KiB writes at one per
/// command time plus `write_overhead_us`. Setting the link's framing and
/// the decode to nothing gives faster QD1 reads, so both count.
#[test]
fn ssd_qd1_read_and_the_links_data_rate_match_their_closed_forms() {
    let p = ssd_params("sata-ssd-1tb-2021");
    assert!(
        p.link_efficiency < 1.0 && p.ecc_decode_us > 0.0 && p.write_overhead_us > 0.0,
        "{p:?}"
    );
    let qd1 = |p: &SsdParams| {
        run(
            &mut ssd(p),
            &job(Pattern::Random, 4096, true, 1, (0, GIB), SEC),
        )
    };
    let latency_us = |p: &SsdParams| {
        p.command_overhead_us
            + p.read_us
            + 4096.0 / p.channel_mb_per_s
            + p.ecc_decode_us
            + 4096.0 / (p.interface_mb_per_s * p.link_efficiency)
    };
    let o = qd1(&p);
    assert_near(o.iops, 1e6 / latency_us(&p), 0.001, "QD1 read IOPS");
    let mut bare = p.clone();
    bare.link_efficiency = 1.0;
    bare.ecc_decode_us = 0.0;
    let fast = qd1(&bare);
    assert_near(
        fast.iops,
        1e6 / latency_us(&bare),
        0.001,
        "QD1 read IOPS, no framing or decode",
    );
    assert!(fast.iops > 1.05 * o.iops, "{fast:?} vs {o:?}");

    let data_rate = p.interface_mb_per_s * p.link_efficiency;
    for read in [true, false] {
        let seq = run(
            &mut ssd(&p),
            &job(Pattern::Sequential, MIB, read, 8, (0, GIB), SEC),
        );
        let what = if read {
            "sequential read"
        } else {
            "sequential write"
        };
        assert_near(seq.mb_per_s, data_rate, 0.005, what);
    }

    // At QD32 the command processor bounds 4 KiB writes (the link needs 7.4 us
    // for each, the flash far less): one write per command time plus the
    // write's own extra.
    let w = run(
        &mut ssd(&p),
        &job(Pattern::Random, 4096, false, 32, (0, GIB), SEC),
    );
    let want = 1e6 / (p.command_overhead_us + p.write_overhead_us);
    assert_near(w.iops, want, 0.005, "QD32 write IOPS");

    for (key, value) in [("link_efficiency", 0.0), ("link_efficiency", 1.5)] {
        let mut bad = p.clone();
        bad.link_efficiency = value;
        let e = bad.validate().expect_err("out of range");
        assert_eq!(e.key, key, "{e:?}");
    }
    let mut bad = p.clone();
    bad.ecc_decode_us = -1.0;
    assert_eq!(bad.validate().expect_err("negative").key, "ecc_decode_us");
    let mut bad = p.clone();
    bad.write_overhead_us = -1.0;
    assert_eq!(
        bad.validate().expect_err("negative").key,
        "write_overhead_us"
    );
}

#[test]
fn ssd_steady_state_writes_are_slower_and_trim_lowers_gc_cost() {
    let fresh = ssd_params("intel-520");
    let mut steady = fresh.clone();
    steady.state = State::Steady;
    let region = (0, fresh.capacity_bytes);
    let j = job(Pattern::Random, 4096, false, 32, region, SEC);
    let mut f = ssd(&fresh);
    let mut s = ssd(&steady);
    let of = run(&mut f, &j);
    let os = run(&mut s, &j);
    assert_eq!(f.gc_blocks, 0, "a fresh drive needs no GC yet");
    assert!(s.gc_blocks > 0);
    assert!(os.iops < 0.5 * of.iops, "steady {os:?} vs fresh {of:?}");

    // Trimming half the drive leaves fewer valid pages in each GC victim.
    let mut t = ssd(&steady);
    t.submit(
        0,
        Request {
            id: 1,
            kind: IoKind::Trim,
            offset: 0,
            len: fresh.capacity_bytes / 2,
            process: 0,
        },
    );
    let mut done = Vec::new();
    while let Some(at) = t.next_event() {
        t.advance(at, &mut done);
    }
    let start = done[0].at;
    let ot = workload::run(&mut t, &j, start).expect("runs");
    let per_block = |d: &Ssd| d.gc_copied_pages as f64 / d.gc_blocks as f64;
    assert!(
        per_block(&t) < 0.8 * per_block(&s),
        "{} vs {}",
        per_block(&t),
        per_block(&s)
    );
    assert!(ot.iops > os.iops);
}

#[test]
fn same_job_same_outcome() {
    for name in ["hdd-7200", "sata-ssd-1tb-2021"] {
        let j = job(Pattern::Random, 4096, true, 8, (0, 8 * GIB), SEC);
        let mut a = presets::device(name).expect("preset");
        let mut b = presets::device(name).expect("preset");
        assert_eq!(run(a.as_mut(), &j), run(b.as_mut(), &j), "{name}");
        let mut w = j.clone();
        w.read_percent = 30;
        assert_eq!(run(a.as_mut(), &w), run(b.as_mut(), &w), "{name} mixed");
    }
}

/// The figure a preset's `published` field names, measured as `Published`
/// documents.
fn measure(p: &Preset, figure: &str) -> f64 {
    let mut d = p.build().expect("preset builds");
    let cap = d.capacity();
    let start = (0, GIB.min(cap));
    let o = |d: &mut Box<dyn Device>, j: Job| run(d.as_mut(), &j);
    let secs = 5 * SEC;
    match figure {
        "seq_read_mb_per_s" => {
            o(&mut d, job(Pattern::Sequential, MIB, true, 8, start, secs)).mb_per_s
        }
        "seq_read_inner_mb_per_s" => {
            o(
                &mut d,
                job(Pattern::Sequential, MIB, true, 8, (cap - GIB, GIB), secs),
            )
            .mb_per_s
        }
        "seq_write_mb_per_s" => {
            o(&mut d, job(Pattern::Sequential, MIB, false, 8, start, secs)).mb_per_s
        }
        "read_4k_qd1_iops" => o(&mut d, job(Pattern::Random, 4096, true, 1, start, secs)).iops,
        "write_4k_qd1_iops" => o(&mut d, job(Pattern::Random, 4096, false, 1, start, secs)).iops,
        "read_4k_qd32_iops" => o(&mut d, job(Pattern::Random, 4096, true, 32, start, secs)).iops,
        "write_4k_qd32_iops" => o(&mut d, job(Pattern::Random, 4096, false, 32, start, secs)).iops,
        "access_time_ms" => {
            o(
                &mut d,
                job(Pattern::Random, 4096, true, 1, (0, cap), 60 * SEC),
            )
            .mean_latency_ns
                / 1e6
        }
        other => panic!("no measurement for {other}"),
    }
}

/// Every published figure in the preset file within 10%, except those marked
/// `miss`, which must really miss (so the marks stay honest).
#[test]
fn presets_match_their_published_figures() {
    let mut report = String::new();
    let mut wrong = Vec::new();
    for p in presets::builtin().expect("parses") {
        for (key, f) in p.published.figures() {
            let sim = measure(&p, key);
            let off = sim / f.value - 1.0;
            report += &format!(
                "{:<22} {:<24} simulated {:>10.2} published {:>10.2} ({:+.1}%) {}\n",
                p.name,
                key,
                sim,
                f.value,
                off * 100.0,
                if f.miss.is_some() { "[known miss]" } else { "" }
            );
            if (off.abs() <= 0.10) == f.miss.is_some() {
                wrong.push(format!("{} {key}: {off:+.3}", p.name));
            }
        }
    }
    println!("{report}");
    assert!(wrong.is_empty(), "{wrong:?}\n{report}");
}

#[test]
fn every_preset_builds_names_a_source_for_every_parameter_and_reports_units() {
    let text = include_str!("../presets/devices.toml");
    let table: toml::Table = toml::from_str(text).expect("toml");
    let all = presets::builtin().expect("parses");
    let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
    for want in [
        "hitachi-7k250",
        "samsung-hd753lj",
        "hgst-hds723020bla642",
        "mtron-mobi-32g",
        "intel-520",
        "sata-ssd-1tb-2021",
        "hdd-5400",
        "hdd-7200",
        "hdd-10k",
        "hdd-15k",
        "nvme-ssd",
    ] {
        assert!(names.contains(&want), "missing preset {want}");
    }
    for p in &all {
        let kind = match p.model {
            Model::Hdd(_) => "hdd",
            Model::Ssd(_) => "ssd",
            Model::Fixed(_) => "fixed",
        };
        let params = table[kind][&p.name]["params"].as_table().expect("params");
        for key in params.keys() {
            let prefix = format!("{key}: ");
            assert!(
                p.sources.iter().any(|s| s.starts_with(&prefix)),
                "{}: no source for {key}",
                p.name
            );
        }
        let info = p.build().expect("builds").info();
        assert_eq!(info.name, p.name);
        assert!(!info.sources.is_empty());
        // A disk or SSD model reports at least its 15 parameters; the
        // fixed-service model (nbdkit's filters) has five.
        let least = if matches!(p.model, Model::Fixed(_)) {
            5
        } else {
            15
        };
        assert!(info.params.len() >= least, "{}: {:?}", p.name, info.params);
        assert!(info.params.iter().all(|x| !x.unit.is_empty()));
    }
    assert_eq!(presets::list().len(), all.len());
    match presets::device("no-such-disk") {
        Err(PresetError::Unknown { known, .. }) => assert!(known.contains("hdd-7200")),
        other => panic!("{other:?}"),
    }
}

const USER_FILE: &str = r#"[hdd.mine]
description = "mine"
sources = []

[hdd.mine.params]
rpm = 7200.0
capacity_bytes = 1_000_000_000_000
heads = 4
track_to_track_ms = 0.8
average_seek_ms = 8.5
full_stroke_seek_ms = 16.0
outer_mb_per_s = 160.0
inner_mb_per_s = 80.0
head_switch_ms = 1.0
command_overhead_us = 100.0
cache_bytes = 67108864
read_ahead = true
write_cache = true
ncq_depth = 32
interface_gbit_per_s = 6.0
"#;

fn error_of(text: &str) -> (usize, String, String) {
    match presets::parse("mine.toml", text) {
        Err(e @ PresetError::Invalid { .. }) => {
            let shown = e.to_string();
            match e {
                PresetError::Invalid { line, key, .. } => (line, key, shown),
                PresetError::Unknown { .. } => unreachable!(),
            }
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn bad_preset_files_are_rejected_with_file_line_and_key() {
    assert_eq!(
        presets::parse("mine.toml", USER_FILE).expect("valid").len(),
        1
    );

    let text = USER_FILE.replace("heads = 4", "heads = 4\nspindle_colour = 3");
    let (line, key, shown) = error_of(&text);
    assert_eq!((line, key.as_str()), (9, "spindle_colour"), "{shown}");
    assert!(shown.starts_with("mine.toml:9:"), "{shown}");

    let text = USER_FILE.replace("average_seek_ms = 8.5", "average_seek_ms = -8.5");
    let (line, key, shown) = error_of(&text);
    assert_eq!((line, key.as_str()), (10, "average_seek_ms"), "{shown}");

    let text = USER_FILE.replace("rpm = 7200.0", "rpm = \"fast\"");
    let (line, key, shown) = error_of(&text);
    assert_eq!((line, key.as_str()), (6, "rpm"), "{shown}");

    for (from, to, key) in [
        ("rpm = 7200.0", "rpm = 0.0", "rpm"),
        (
            "inner_mb_per_s = 80.0",
            "inner_mb_per_s = 180.0",
            "inner_mb_per_s",
        ),
        ("ncq_depth = 32", "ncq_depth = 33", "ncq_depth"),
        (
            "capacity_bytes = 1_000_000_000_000",
            "capacity_bytes = 1_000_000_000_001",
            "capacity_bytes",
        ),
        (
            "head_switch_ms = 1.0",
            "head_switch_ms = -1.0",
            "head_switch_ms",
        ),
    ] {
        let (line, k, shown) = error_of(&USER_FILE.replace(from, to));
        assert_eq!(k, key, "{shown}");
        assert_eq!(
            USER_FILE.lines().nth(line - 1).map(|l| l.starts_with(key)),
            Some(true),
            "{shown}"
        );
    }
}

/// Host-time check of the SSD model's cost per request (run with
/// `cargo test --release -p raidlab-sim -- --ignored --nocapture`).
#[test]
#[ignore]
fn ssd_million_random_reads_host_time() {
    let p = ssd_params("sata-ssd-1tb-2021");
    let mut d = ssd(&p);
    let mut j = job(
        Pattern::Random,
        4096,
        true,
        32,
        (0, p.capacity_bytes),
        3600 * SEC,
    );
    j.max_ops = 1_000_000;
    let t = std::time::Instant::now();
    let o = run(&mut d, &j);
    println!(
        "{} ops in {:?} host time ({:.0} IOPS simulated)",
        o.ops,
        t.elapsed(),
        o.iops
    );
    assert_eq!(o.ops, 1_000_000);
}

/// CrystalDiskMark-style figures of every preset, for reading (run with
/// `-- --ignored --nocapture`).
#[test]
#[ignore]
fn preset_figures_table() {
    let figures = [
        "seq_read_mb_per_s",
        "seq_write_mb_per_s",
        "read_4k_qd1_iops",
        "read_4k_qd32_iops",
        "write_4k_qd1_iops",
        "write_4k_qd32_iops",
        "access_time_ms",
    ];
    println!("preset                 {}", figures.join(" "));
    for p in presets::builtin().expect("parses") {
        let row: Vec<String> = figures
            .iter()
            .map(|f| format!("{:>10.1}", measure(&p, f)))
            .collect();
        println!("{:<22} {}", p.name, row.join(" "));
    }
}

#[test]
fn inline_params_errors_point_at_the_preset() {
    let text = "[ssd.x]\ndescription = \"x\"\nsources = []\nparams = { capacity_bytes = 1000, interface = \"sata\", ncq_depth = 4, interface_mb_per_s = 600.0, channels = 1, dies_per_channel = 1, page_bytes = 4096, read_us = 50.0, program_us = 500.0, erase_ms = 3.0, pages_per_block = 64, channel_mb_per_s = 100.0, command_overhead_us = 10.0, write_buffer_bytes = 4096, over_provisioning = 0.07, state = \"fresh\" }\n";
    let (line, key, shown) = error_of(text);
    assert_eq!((line, key.as_str()), (1, "capacity_bytes"), "{shown}");
    let both = text
        .replace("capacity_bytes = 1000", "capacity_bytes = 1048576")
        .replace("ncq_depth = 4", "ncq_depth = 4, queues = 2");
    let (_, key, shown) = error_of(&both);
    assert_eq!(key, "queues", "{shown}");
}

#[test]
fn ssd_flush_waits_for_the_buffer_to_be_programmed() {
    let p = ssd_params("sata-ssd-1tb-2021");
    let mut d = ssd(&p);
    let mut done = Vec::new();
    // Less than a page: it stays in the buffer until the flush programs it.
    d.submit(
        0,
        Request {
            id: 1,
            kind: IoKind::Write,
            offset: 0,
            len: 4096,
            process: 0,
        },
    );
    let ack = d.next_event().expect("write in flight");
    d.advance(ack, &mut done);
    assert!(
        ack < (p.program_us * 1e3) as u64,
        "acknowledged at {ack} ns"
    );
    assert_eq!(d.next_event(), None, "a partial page waits in the buffer");
    d.submit(
        ack,
        Request {
            id: 2,
            kind: IoKind::Flush,
            offset: 0,
            len: 0,
            process: 0,
        },
    );
    while let Some(t) = d.next_event() {
        d.advance(t, &mut done);
    }
    let flush = done.iter().find(|c| c.id == 2).expect("flush completes");
    assert!(
        flush.at >= ack + (p.program_us * 1e3) as u64,
        "flush at {}",
        flush.at
    );
}
