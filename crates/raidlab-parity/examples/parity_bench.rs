//! Prints `raidlab_parity::bench::run` results as JSON, one array per run.
//!
//! Usage: `parity_bench [DATA_DISKS] [CHUNK_BYTES] [SECONDS_PER_CASE]`
//! (defaults: 4 65536 1.5).

use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    let disks: usize = arg(0, "4").parse().expect("DATA_DISKS must be a number");
    let chunk: usize = arg(1, "65536")
        .parse()
        .expect("CHUNK_BYTES must be a number");
    let secs: f64 = arg(2, "1.5")
        .parse()
        .expect("SECONDS_PER_CASE must be a number");
    let results = raidlab_parity::bench::run(disks, chunk, Duration::from_secs_f64(secs));
    println!(
        "{}",
        serde_json::to_string_pretty(&results).expect("results serialize")
    );
}
