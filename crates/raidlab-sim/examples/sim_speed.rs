//! How fast the simulator runs: simulated member I/Os per second of host time, on
//! one core, for a 4K random read job at QD32 on a simulated RAID 0 of four SATA
//! SSDs (the heaviest cell of the CrystalDiskMark set), through raidlab's engine.
//!
//! `cargo run --release -p raidlab-sim --example sim_speed [SPEC] [SECONDS]`
//!
//! Prints the rate per second of host (wall) time and per second of this
//! thread's CPU time (`/proc/thread-self/schedstat`, Linux), which a loaded
//! machine does not change.

use raidlab_sim::config::SimConfig;
use raidlab_sim::device::SEC;
use raidlab_sim::workload::{run, Job, Pattern};
use std::time::Instant;

/// This thread's time on a CPU so far, in seconds (`None` off Linux).
fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

fn main() -> Result<(), String> {
    let spec = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "raid0:4xsata-ssd-1tb-2021".into());
    let secs: f64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    for (name, read) in [
        ("4K random read QD32", true),
        ("4K random write QD32", false),
    ] {
        let mut dev = SimConfig::short(&spec)
            .map_err(|e| e.to_string())?
            .build(&[])
            .map_err(|e| e.to_string())?;
        let mut job = Job::new(Pattern::Random, 4096, read, 1, 32, 1 << 30);
        job.duration = (secs * SEC as f64) as u64;
        let t = Instant::now();
        let cpu0 = cpu_seconds();
        let out = run(dev.as_mut(), &job, 0)?;
        let host = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds().zip(cpu0).map(|(b, a)| b - a);
        let member_ios = dev
            .member_ops()
            .map(|l| l.reads + l.writes)
            .unwrap_or(out.ops);
        let per_cpu = cpu.map_or(String::new(), |c| {
            format!(
                "; {c:.2} s of CPU: {:.2} M per CPU second",
                member_ios as f64 / c / 1e6
            )
        });
        println!(
            "{spec}, {name}, {secs} s virtual: {} host requests, {member_ios} member I/Os in {host:.2} s of host time: {:.2} M member I/Os per second ({:.0} simulated IOPS){per_cpu}",
            out.ops,
            member_ios as f64 / host / 1e6,
            out.iops
        );
    }
    Ok(())
}
