//! The fixed-service device (`fixed.rs`, the model of a member behind nbdkit's
//! noparallel, delay and rate filters): known answers, exact in virtual time,
//! and its preset kept equal to the settings scripts/sim-vs-real.sh gives the
//! real filters.

use raidlab_core::IoKind;
use raidlab_sim::device::{Completion, Device, Ns, Request, MS, SEC};
use raidlab_sim::fixed::{Fixed, FixedParams};
use raidlab_sim::presets::{self, Model};
use raidlab_sim::workload::{self, Job, Pattern};

fn device(delay_ms: f64, rate_mb_per_s: f64, burst_s: f64) -> Fixed {
    device_with(delay_ms, rate_mb_per_s, burst_s, 0, 0.0)
}

/// [`device`] whose requests over `max_transfer_bytes` arrive in pieces,
/// each paying `stack_latency_us` too.
fn device_with(
    delay_ms: f64,
    rate_mb_per_s: f64,
    burst_s: f64,
    max_transfer_bytes: u64,
    stack_latency_us: f64,
) -> Fixed {
    Fixed::new(
        "t",
        FixedParams {
            capacity_bytes: 1 << 30,
            read_delay_ms: delay_ms,
            write_delay_ms: delay_ms,
            rate_mb_per_s,
            burst_s,
            max_transfer_bytes,
            stack_latency_us,
        },
        vec![],
    )
    .expect("valid parameters")
}

fn req(id: u64, kind: IoKind, len: u64) -> Request {
    Request {
        id,
        kind,
        offset: id * len % (1 << 29),
        len,
        process: 0,
    }
}

/// Submit `reqs` at time 0 (all in flight at once) and run the device dry:
/// the completions in the order they came.
fn all_at_once(dev: &mut Fixed, reqs: &[Request]) -> Vec<Completion> {
    for r in reqs {
        dev.submit(0, *r);
    }
    let mut done = Vec::new();
    while let Some(t) = dev.next_event() {
        dev.advance(t, &mut done);
    }
    done
}

/// One request at a time, each submitted when the last completes: when the
/// last one completes.
fn one_by_one(dev: &mut Fixed, reqs: &[Request]) -> Ns {
    let mut now = 0;
    for r in reqs {
        dev.submit(now, *r);
        let mut done = Vec::new();
        while done.is_empty() {
            let t = dev.next_event().expect("a request in flight");
            dev.advance(t, &mut done);
        }
        assert_eq!(
            done,
            vec![Completion {
                id: r.id,
                at: done[0].at
            }]
        );
        now = done[0].at;
    }
    now
}

#[test]
fn qd1_requests_take_the_delay_each_when_the_bucket_keeps_up() {
    // 4 KiB is 32,768 bits: 0.2 ms of 160 MB/s, far less than the 5 ms delay
    // refills, so the bucket never runs short and N requests take N x 5 ms.
    let mut dev = device(5.0, 160.0, 0.02);
    let reqs: Vec<_> = (0..1000).map(|i| req(i, IoKind::Read, 4096)).collect();
    assert_eq!(one_by_one(&mut dev, &reqs), 1000 * 5 * MS);
}

#[test]
fn qd1_without_a_rate_takes_the_delay_alone_whatever_the_size() {
    let mut dev = device(5.0, 0.0, 0.0);
    let reqs: Vec<_> = (0..100).map(|i| req(i, IoKind::Write, 1 << 20)).collect();
    assert_eq!(one_by_one(&mut dev, &reqs), 100 * 5 * MS);
}

/// The stack in front of nbdkit adds its latency to every request and to
/// every piece of a split one, inside the one-at-a-time service: at depth
/// too, N requests take N x (delay + latency).
#[test]
fn the_stack_latency_is_paid_per_piece_and_does_not_overlap_at_depth() {
    let dev = || device_with(5.0, 0.0, 0.0, 512 << 10, 350.0);
    let piece = 5 * MS + 350_000;
    let reqs: Vec<_> = (0..100).map(|i| req(i, IoKind::Read, 4096)).collect();
    assert_eq!(one_by_one(&mut dev(), &reqs), 100 * piece);
    // 1 MiB arrives as two 512 KiB pieces, each with the latency.
    let reqs: Vec<_> = (0..10).map(|i| req(i, IoKind::Write, 1 << 20)).collect();
    assert_eq!(one_by_one(&mut dev(), &reqs), 10 * 2 * piece);
    let reqs: Vec<_> = (0..32).map(|i| req(i, IoKind::Read, 4096)).collect();
    let done = all_at_once(&mut dev(), &reqs);
    assert_eq!(done.iter().map(|c| c.at).max(), Some(32 * piece));
}

/// A read or write over the largest transfer takes one delay per piece
/// (the stack above nbdkit hands it over in pieces, served one after the
/// other), one at most that size takes one delay; with the bucket short,
/// each piece waits for its own bits.
#[test]
fn a_request_over_the_largest_transfer_takes_a_delay_per_piece() {
    let split =
        |rate_mb_per_s: f64, burst_s: f64| device_with(5.0, rate_mb_per_s, burst_s, 512 << 10, 0.0);
    let mut dev = split(0.0, 0.0);
    let whole: Vec<_> = (0..10).map(|i| req(i, IoKind::Write, 512 << 10)).collect();
    assert_eq!(one_by_one(&mut dev, &whole), 10 * 5 * MS);
    let mut dev = split(0.0, 0.0);
    let over: Vec<_> = (0..10).map(|i| req(i, IoKind::Read, 1 << 20)).collect();
    assert_eq!(one_by_one(&mut dev, &over), 10 * 2 * 5 * MS);
    let mut dev = split(0.0, 0.0);
    let odd: Vec<_> = (0..10)
        .map(|i| req(i, IoKind::Write, (1 << 20) + 4096))
        .collect();
    assert_eq!(one_by_one(&mut dev, &odd), 10 * 3 * 5 * MS);
    // 50 MB/s (400 Mbit/s) with a 4 Mbit bucket: a 512 KiB piece is
    // 4,194,304 bits, the 5 ms delay refills 2 Mbit. The first piece finds
    // the bucket full, short by 194,304 bits (0.48576 ms); each later one
    // finds 2 Mbit and waits 5.48576 ms for the rest. Two 1 MiB reads at
    // QD1: 5.48576 + 3 x 10.48576 ms.
    let mut dev = split(50.0, 0.01);
    assert_eq!(one_by_one(&mut dev, &over[..2]), 36_943_040);
}

#[test]
fn many_in_flight_are_still_served_one_at_a_time_in_arrival_order() {
    let mut dev = device(5.0, 160.0, 0.02);
    let reqs: Vec<_> = (0..32).map(|i| req(i, IoKind::Read, 4096)).collect();
    let done = all_at_once(&mut dev, &reqs);
    let want: Vec<_> = (0..32)
        .map(|i| Completion {
            id: i,
            at: (i + 1) * 5 * MS,
        })
        .collect();
    assert_eq!(done, want);
}

#[test]
fn the_bucket_spends_its_burst_then_serves_at_the_rate() {
    // 1.6 MB is 12.8 Mbit: 10 ms at 1,280 Mbit/s, longer than the 5 ms delay.
    // The bucket holds 0.02 s of rate, 25.6 Mbit, and starts full; it gains
    // 6.4 Mbit during each 5 ms delay. Request 1 takes 12.8 of the 25.6 (left
    // 12.8), request 2 finds 19.2 (left 6.4), request 3 finds 12.8 (left 0),
    // request 4 finds 6.4 and waits 5 ms for the rest, and from then on every
    // request takes max(delay, bits / rate) = 10 ms, not delay + bits / rate.
    let mut dev = device(5.0, 160.0, 0.02);
    let reqs: Vec<_> = (0..6).map(|i| req(i, IoKind::Write, 1_600_000)).collect();
    let at: Vec<Ns> = all_at_once(&mut dev, &reqs).iter().map(|c| c.at).collect();
    assert_eq!(
        at,
        vec![5 * MS, 10 * MS, 15 * MS, 25 * MS, 35 * MS, 45 * MS]
    );
}

#[test]
fn reads_and_writes_draw_on_buckets_of_their_own() {
    // Three 1.6 MB reads empty the read bucket; a write behind them finds its
    // own bucket full and takes only its delay.
    let mut dev = device(5.0, 160.0, 0.02);
    let mut reqs: Vec<_> = (0..4).map(|i| req(i, IoKind::Read, 1_600_000)).collect();
    reqs.push(req(4, IoKind::Write, 1_600_000));
    let at: Vec<Ns> = all_at_once(&mut dev, &reqs).iter().map(|c| c.at).collect();
    assert_eq!(at, vec![5 * MS, 10 * MS, 15 * MS, 25 * MS, 30 * MS]);
}

#[test]
fn a_flush_takes_no_time_but_waits_its_turn() {
    let mut dev = device(5.0, 160.0, 0.02);
    let reqs = [
        req(0, IoKind::Write, 4096),
        req(1, IoKind::Flush, 0),
        req(2, IoKind::Trim, 4096),
    ];
    let at: Vec<Ns> = all_at_once(&mut dev, &reqs).iter().map(|c| c.at).collect();
    assert_eq!(at, vec![5 * MS, 5 * MS, 10 * MS]);
}

#[test]
fn a_workload_at_any_queue_depth_gets_one_request_per_delay_and_latency() {
    // The preset, driven by the simulator's own workload: 1 s of 4 KiB random
    // reads at 5 ms + 335 us each is 187 requests at QD1 and at QD32 alike
    // (one at a time).
    let preset = presets::preset("nbdkit-hdd-seek").expect("preset");
    for qd in [1, 32] {
        let mut dev = preset.build().expect("builds");
        let mut job = Job::new(Pattern::Random, 4096, true, 1, qd, 256 << 20);
        job.duration = SEC;
        let out = workload::run(dev.as_mut(), &job, 0).expect("runs");
        assert_eq!(out.ops, SEC / (5 * MS + 335_000), "QD{qd}");
    }
}

#[test]
fn bad_parameters_are_refused_by_name() {
    let p = |read_delay_ms: f64, rate_mb_per_s: f64, burst_s: f64| FixedParams {
        capacity_bytes: 1 << 30,
        read_delay_ms,
        write_delay_ms: 1.0,
        rate_mb_per_s,
        burst_s,
        max_transfer_bytes: 0,
        stack_latency_us: 0.0,
    };
    assert_eq!(
        p(-1.0, 0.0, 0.0).validate().unwrap_err().key,
        "read_delay_ms"
    );
    assert_eq!(p(1.0, 160.0, 0.0).validate().unwrap_err().key, "burst_s");
    assert_eq!(
        p(1.0, f64::NAN, 1.0).validate().unwrap_err().key,
        "rate_mb_per_s"
    );
    assert!(p(0.0, 0.0, 0.0).validate().is_ok());
}

/// `NAME=VALUE` from the script's text (the first such line).
fn script_setting(script: &str, name: &str) -> String {
    let prefix = format!("{name}=");
    script
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
        .unwrap_or_else(|| panic!("scripts/sim-vs-real.sh sets no {name}"))
}

#[test]
fn the_preset_is_what_the_comparison_script_gives_nbdkit() {
    let script = include_str!("../../../scripts/sim-vs-real.sh");
    let preset = presets::preset("nbdkit-hdd-seek").expect("preset");
    let Model::Fixed(p) = preset.model else {
        panic!("nbdkit-hdd-seek is not a fixed-service preset")
    };
    let num = |name: &str| -> f64 {
        script_setting(script, name)
            .parse()
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    assert_eq!(p.read_delay_ms, num("DELAY_MS"));
    assert_eq!(p.write_delay_ms, num("DELAY_MS"));
    assert_eq!(p.rate_mb_per_s, num("RATE_MBPS"));
    assert_eq!(p.burst_s, num("BURST_S"));
    assert_eq!(script_setting(script, "PRESET"), "nbdkit-hdd-seek");
    assert_eq!(script_setting(script, "MEMBER"), "512M");
    assert_eq!(p.capacity_bytes, 512 << 20);
    // The loop devices' max_sectors_kb, which splits every larger request.
    assert_eq!(p.max_transfer_bytes as f64, num("MAX_KB") * 1024.0);
}
