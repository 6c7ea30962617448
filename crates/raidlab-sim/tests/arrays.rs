//! Known answers of simulated arrays and cards on reference devices (virtual time
//! has no noise, so the bounds are tight): what each level costs in member I/O and
//! how it scales, and how a card's write-back cache absorbs a burst.

use raidlab_layout::{Geometry, Layout, Level};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use raidlab_sim::array::{ArraySpec, TaskArray, DATA_OFFSET};
use raidlab_sim::controller::{CardParams, RaidCard};
use raidlab_sim::device::{Device, MS, SEC};
use raidlab_sim::host::HostCost;
use raidlab_sim::ideal::Ideal;
use raidlab_sim::workload::{run, Job, Pattern};

const MEMBER: u64 = 1 << 30;
const RATE: f64 = 100.0;

fn disk() -> Box<dyn Device> {
    Box::new(Ideal::new(DATA_OFFSET + MEMBER, 100.0, RATE))
}

fn array(
    level: Level,
    n: usize,
    chunk: u64,
    cache: Option<StripeCacheConfig>,
    host: HostCost,
) -> TaskArray {
    let chunk = if level == Level::Raid1 { 0 } else { chunk };
    let g = Geometry::new(level, Layout::parse(level, None).unwrap(), chunk, n, MEMBER).unwrap();
    TaskArray::new(ArraySpec {
        name: "t".into(),
        geometry: g,
        members: (0..n).map(|_| Some(disk())).collect(),
        stripe_cache: cache,
        host,
        rebuild: None,
    })
    .unwrap()
}

fn job(pattern: Pattern, block: u64, read: bool, threads: u32, qd: u32, region: u64) -> Job {
    let mut j = Job::new(pattern, block, read, threads, qd, region);
    j.duration = 2 * SEC;
    j
}

#[test]
fn a_raid5_small_random_write_costs_four_member_ios() {
    let mut a = array(Level::Raid5, 4, 64 << 10, None, HostCost::default());
    let out = run(&mut a, &job(Pattern::Random, 4096, false, 1, 1, 1 << 30), 0).unwrap();
    let log = a.member_ops().unwrap();
    // Requests still in flight at the end are not counted by the job but did
    // their I/O: QD1 leaves at most one.
    let issued = log.reads / 2;
    assert!(
        issued == out.ops || issued == out.ops + 1,
        "{issued} vs {}",
        out.ops
    );
    assert_eq!(log.reads, log.writes, "two reads and two writes each");
    assert_eq!(log.reads % 2, 0);
}

#[test]
fn held_random_writes_still_cost_their_member_io_in_virtual_time() {
    // Random 4K writes over a region 85 times the cache's size almost never
    // merge: each costs a read-modify-write (4 member I/Os) whether the
    // stripe cache holds it first or not. The cache lets a writer run ahead
    // by what it holds, never by more: a held stripe leaves it only when its
    // write-out has gone down (it once left at the tick that wrote it out,
    // and the simulated writer ran at 8 times the members' pace).
    // Members as slow as a disk that seeks (5 ms a request): slower than the
    // cache's hold time allows for a stripe's write-out to be over by the
    // next tick.
    let cache = StripeCacheConfig::default();
    let g = Geometry::new(
        Level::Raid5,
        Layout::parse(Level::Raid5, None).unwrap(),
        64 << 10,
        4,
        MEMBER,
    )
    .unwrap();
    let slow = || Box::new(Ideal::new(DATA_OFFSET + MEMBER, 5000.0, RATE)) as Box<dyn Device>;
    let mut a = TaskArray::new(ArraySpec {
        name: "slow".into(),
        geometry: g,
        members: (0..4).map(|_| Some(slow())).collect(),
        stripe_cache: Some(cache),
        host: HostCost::default(),
        rebuild: None,
    })
    .unwrap();
    let out = run(&mut a, &job(Pattern::Random, 4096, false, 1, 1, 1 << 30), 0).unwrap();
    let log = a.member_ops().unwrap();
    let member_io = log.reads + log.writes;
    // Still held at the end (at most the cache's stripes): no member I/O yet.
    let written = out.ops.saturating_sub(cache.stripes as u64);
    assert!(
        member_io * 10 >= written * 4 * 9,
        "{member_io} member I/Os for {} acknowledged writes",
        out.ops
    );
}

#[test]
fn raid0_of_four_scales_sequential_reads_by_four() {
    let one = {
        let mut d = disk();
        run(
            d.as_mut(),
            &job(Pattern::Sequential, 1 << 20, true, 1, 1, 1 << 30),
            0,
        )
        .unwrap()
    };
    let mut a = array(Level::Raid0, 4, 256 << 10, None, HostCost::default());
    let four = run(
        &mut a,
        &job(Pattern::Sequential, 1 << 20, true, 1, 1, 4 << 30),
        0,
    )
    .unwrap();
    let ratio = four.mb_per_s / one.mb_per_s;
    // One member reads a quarter of each request in parallel with the others;
    // the fixed costs (the device's 100 µs, the host's overhead) do not shrink.
    let secs = |bytes: f64| bytes / (RATE * 1e6);
    let overhead = HostCost::default().request_overhead_us * 1e-6;
    let expected = (100e-6 + secs(1048576.0)) / (100e-6 + secs(262144.0) + overhead);
    assert!(
        (ratio / expected - 1.0).abs() < 0.005,
        "RAID 0 of 4 reads {ratio:.3}x one member, expected {expected:.3}x"
    );
}

#[test]
fn raid1_serves_two_readers_in_parallel() {
    let mut one = disk();
    let single = run(
        one.as_mut(),
        &job(Pattern::Random, 4096, true, 2, 1, 1 << 30),
        0,
    )
    .unwrap();
    let mut a = array(Level::Raid1, 2, 0, None, HostCost::default());
    let mirrored = run(&mut a, &job(Pattern::Random, 4096, true, 2, 1, 1 << 30), 0).unwrap();
    let ratio = mirrored.iops / single.iops;
    assert!(
        (1.9..=2.0).contains(&ratio),
        "two readers on a mirror: {ratio:.3}x one disk"
    );
}

#[test]
fn the_stripe_cache_makes_a_sequential_raid5_stream_write_whole_stripes() {
    // 1 MiB writes on a 3 x 512 KiB stripe: without the cache every write
    // straddles partial stripes and reads; with it the stream reads nothing.
    let run_with = |cache| {
        let mut a = array(Level::Raid5, 4, 512 << 10, cache, HostCost::default());
        let out = run(
            &mut a,
            &job(Pattern::Sequential, 1 << 20, false, 1, 4, 2 << 30),
            0,
        )
        .unwrap();
        (out, a.member_ops().unwrap().reads)
    };
    let (plain, plain_reads) = run_with(None);
    let (cached, cached_reads) = run_with(Some(StripeCacheConfig::default()));
    assert!(
        plain_reads > 100,
        "without the cache the stream reads ({plain_reads})"
    );
    assert_eq!(cached_reads, 0, "with it, whole stripes only");
    assert!(
        cached.mb_per_s > 1.3 * plain.mb_per_s,
        "{} vs {}",
        cached.mb_per_s,
        plain.mb_per_s
    );
}

fn card(cache_bytes: u64) -> RaidCard {
    let params = CardParams {
        description: "test card".into(),
        cache_bytes,
        write_back: true,
        high_watermark: 0.9,
        stripe_hold_ms: 50.0,
        destage_depth: 8,
        read_ahead_stripes: 2,
        parity_mb_per_s: 1000.0,
        command_overhead_us: 20.0,
        host_link_mb_per_s: 2000.0,
        ports: 8,
        port_mb_per_s: 600.0,
        parity_read_cache_bytes: 0,
        sources: vec![],
    };
    let inner = array(
        Level::Raid5,
        4,
        64 << 10,
        None,
        HostCost::engine(1000.0, 0.0, "test"),
    );
    RaidCard::new(params, inner).unwrap()
}

#[test]
fn a_cards_write_back_cache_absorbs_a_burst_then_writes_at_the_destage_rate() {
    let cache = 256 << 20;
    let mut c = card(cache);
    let mut burst = job(Pattern::Sequential, 1 << 20, false, 1, 1, 2 << 30);
    burst.max_ops = 128; // 128 MiB: half the cache
    let b = run(&mut c, &burst, 0).unwrap();
    // Then far more than the cache: the host waits for destaging.
    let mut c = card(cache);
    let mut long = job(Pattern::Sequential, 1 << 20, false, 1, 1, 3 << 30);
    long.duration = 20 * SEC;
    let l = run(&mut c, &long, 0).unwrap();
    // Whole stripes on three data members at 100 MB/s each.
    let destage = 3.0 * RATE;
    assert!(
        b.mb_per_s > 1000.0,
        "the burst goes at the card's speed: {}",
        b.mb_per_s
    );
    assert!(
        (l.mb_per_s - destage).abs() < 0.1 * destage,
        "a long stream settles at the destage rate: {} vs {destage}",
        l.mb_per_s
    );
    assert_eq!(
        c.array().member_ops().unwrap().reads,
        0,
        "destaging gathers whole stripes"
    );
}

#[test]
fn a_card_without_a_cache_pays_read_modify_write() {
    let mut c = card(0);
    let out = run(&mut c, &job(Pattern::Random, 4096, false, 1, 1, 1 << 30), 0).unwrap();
    let log = c.array().member_ops().unwrap();
    assert!(out.ops > 10);
    assert_eq!(log.reads, log.writes);
    let _ = MS;
}

#[test]
fn the_same_run_twice_gives_the_same_figures() {
    let go = || {
        let mut a = array(
            Level::Raid6,
            6,
            64 << 10,
            Some(StripeCacheConfig::default()),
            HostCost::default(),
        );
        let mut j = job(Pattern::Random, 16 << 10, false, 2, 8, 2 << 30);
        j.read_percent = 30;
        run(&mut a, &j, 0).unwrap()
    };
    assert_eq!(go(), go());
}

#[test]
fn a_disks_write_cache_sweeps_writes_that_arrive_slightly_out_of_order() {
    // With two 1 MiB writes in flight, RAID 0's members see their chunks a
    // little out of order; a drive's write-back orders them by position, so the
    // stream is as fast as at queue depth 1. (Destaging in arrival order lost a
    // revolution per chunk and halved it.)
    let rate = |qd| {
        let mut d = raidlab_sim::config::SimConfig::short("raid0:3xhdd-7200:chunk=256K")
            .unwrap()
            .build(&[])
            .unwrap();
        run(
            d.as_mut(),
            &job(Pattern::Sequential, 1 << 20, false, 1, qd, 1 << 30),
            0,
        )
        .unwrap()
        .mb_per_s
    };
    let (one, two) = (rate(1), rate(2));
    assert!(two >= 0.97 * one, "QD2 {two:.1} MB/s against QD1 {one:.1}");
}

#[test]
fn a_reader_right_after_writes_keeps_its_read_ahead_while_the_cache_destages() {
    // IOzone's order: write a file, then read it. The drive's cache still holds
    // dirty data; destaging it between two reads of the stream would cost every
    // read a seek and a revolution (it did: 66 MB/s against 140 on an idle disk).
    let mut d = raidlab_sim::presets::device("hgst-hds723020bla642").unwrap();
    let mut w = job(Pattern::Sequential, 64 << 10, false, 1, 1, 16 << 20);
    w.max_ops = 256;
    let after_write = run(d.as_mut(), &w, 0).unwrap().end;
    let after_write = run(d.as_mut(), &w, after_write).unwrap().end;
    let mut r = w.clone();
    r.read_percent = 100;
    let warm = run(d.as_mut(), &r, after_write).unwrap();
    let mut fresh = raidlab_sim::presets::device("hgst-hds723020bla642").unwrap();
    let cold = run(fresh.as_mut(), &r, 0).unwrap();
    assert!(
        warm.mb_per_s > 0.6 * cold.mb_per_s,
        "reading after writes {:.1} MB/s, on an idle disk {:.1}",
        warm.mb_per_s,
        cold.mb_per_s
    );
}

#[test]
fn a_write_larger_than_the_cards_cache_goes_through_instead_of_waiting_forever() {
    let mut c = card(256 << 10);
    let mut j = job(Pattern::Sequential, 1 << 20, false, 1, 2, 64 << 20);
    j.max_ops = 32;
    let out = run(&mut c, &j, 0).unwrap();
    assert_eq!(out.ops, 32);
}

/// Sequential 1 MiB reads at QD8 on `spec`, in MB/s.
fn seq_read(spec: &str) -> f64 {
    let cfg = raidlab_sim::config::SimConfig::short(spec).expect("spec");
    let mut dev = cfg.build(&[]).expect("build");
    let j = Job::new(Pattern::Sequential, 1 << 20, true, 1, 8, 1 << 30);
    run(dev.as_mut(), &j, 0).expect("runs").mb_per_s
}

#[test]
fn a_cards_ports_and_host_link_limit_its_disks() {
    // SATA 6 Gb/s SSDs (600 MB/s links) read at their own speed alone...
    let alone = seq_read("raid0:2xintel-520:chunk=1M");
    assert!(alone > 1000.0, "two SSDs alone {alone}");
    // ...and at the Adaptec's 3 Gb/s ports, 300 MB/s each, behind it: in
    // pass-through and when the card runs the array. SATA's framing is paid
    // at whatever rate the link negotiates, so each port carries 300 MB/s x
    // the SSD's link_efficiency of data.
    let efficiency = match raidlab_sim::presets::builtin()
        .expect("presets")
        .into_iter()
        .find(|p| p.name == "intel-520")
        .expect("intel-520")
        .model
    {
        raidlab_sim::presets::Model::Ssd(p) => p.link_efficiency,
        _ => unreachable!("intel-520 is an SSD"),
    };
    let ports = 2.0 * 300.0 * efficiency;
    for mode in ["/pass-through", ""] {
        let r = seq_read(&format!(
            "raid0:2xintel-520:chunk=1M:card=adaptec-sas-31205{mode}"
        ));
        // At most the ports' data rate; a little below it, as each request's
        // command and flash time are not hidden behind the link's.
        assert!(
            (0.85..=1.005).contains(&(r / ports)),
            "2 x 300 MB/s ports{mode}: {r} against {ports}"
        );
    }
    // Twelve pass-through SSDs share the card's PCIe 1.x x8 link (2000 MB/s),
    // not twelve ports' 3600.
    let r = seq_read("raid0:12xintel-520:chunk=1M:card=adaptec-sas-31205/pass-through");
    assert!(
        (0.85..=1.005).contains(&(r / 2000.0)),
        "12 disks on a 2000 MB/s link: {r}"
    );
    let ports = 12.0 * 300.0;
    assert!(r < 0.6 * ports, "12 disks: {r} against the ports' {ports}");
}
