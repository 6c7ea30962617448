//! A simulated array with faults under a 70/30 4K random load: what the
//! engine did about each fault, and the load's IOPS before, during and after
//! a spare's rebuild (docs/simulation.md's table comes from this).
//!
//! `cargo run --release -p raidlab-sim --example sim_faults SPEC SECONDS [QD] [READ%]`
//! (SPEC: a short form or a `.toml` configuration)
//! e.g. `raid6:6xhdd-7200:fail=2@10s:spare=20s 600`.

use raidlab_sim::config::SimConfig;
use raidlab_sim::device::SEC;
use raidlab_sim::workload::{run, Job, Pattern};
use std::time::Instant;

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let spec = args
        .next()
        .unwrap_or_else(|| "raid6:6xhdd-7200:member-size=1G:fail=2@10s:spare=20s".into());
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(60.0);
    let qd: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(32);
    let read_percent: u8 = args.next().and_then(|s| s.parse().ok()).unwrap_or(70);
    let (cfg, extra) = if spec.ends_with(".toml") {
        SimConfig::load(std::path::Path::new(&spec)).map_err(|e| e.to_string())?
    } else {
        (
            SimConfig::short(&spec).map_err(|e| e.to_string())?,
            Vec::new(),
        )
    };
    let mut dev = cfg.build(&extra).map_err(|e| e.to_string())?;
    let mut job = Job::new(Pattern::Random, 4096, true, 1, qd, dev.capacity());
    job.read_percent = read_percent;
    job.duration = (secs * SEC as f64) as u64;
    let t = Instant::now();
    let out = run(dev.as_mut(), &job, 0)?;
    let host = t.elapsed().as_secs_f64();
    let member_ios = dev.member_ops().map(|l| l.reads + l.writes).unwrap_or(0);
    println!("{}", cfg.describe());
    println!(
        "{read_percent}/{} 4K random, QD{qd}, {secs} s virtual: {} requests, {:.1} IOPS overall; {member_ios} member I/Os in {host:.2} s of host time ({:.2} M member I/Os per host second)",
        100 - read_percent,
        out.ops,
        out.iops,
        member_ios as f64 / host / 1e6
    );
    match dev.fault_report() {
        Some(r) => {
            for l in r.lines() {
                println!("  {l}");
            }
        }
        None => println!("  no faults"),
    }
    if let Some(p) = dev.rebuild_progress() {
        println!(
            "  rebuild progress: {} of {} bytes{}",
            p.done,
            p.total,
            p.finished
                .map(|f| format!(", finished at {:.3} s", f as f64 / SEC as f64))
                .unwrap_or_default()
        );
    }
    Ok(())
}
