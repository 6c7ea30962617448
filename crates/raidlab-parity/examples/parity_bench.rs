//! Prints `raidlab_parity::bench::run` results as JSON, one array per run.
//!
//! Usage: `parity_bench [DATA_DISKS] [CHUNK_BYTES] [SECONDS_PER_CASE]`
//! (defaults: 4 65536 1.5).
//!
//! `parity_bench --digest DATA_DISKS CHUNK_BYTES` instead fills the data blocks
//! with the same xorshift64 stream as `bench/isal/isal_bench.c` and prints, for
//! every engine, FNV-1a fingerprints of the P and Q it computes, so that
//! `bench/isal/parity-vs-isal.sh` can check them against ISA-L's `pq_gen`.

use std::time::Duration;

fn fnv1a(buf: &[u8]) -> u64 {
    buf.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn digest(disks: usize, chunk: usize) {
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    let data: Vec<Vec<u8>> = (0..disks)
        .map(|_| {
            (0..chunk)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    s as u8
                })
                .collect()
        })
        .collect();
    let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let mut out = Vec::new();
    for e in raidlab_parity::available() {
        let (mut p, mut q) = (vec![0u8; chunk], vec![0u8; chunk]);
        e.gen_pq(&refs, &mut p, &mut q);
        out.push(serde_json::json!({
            "op": "digest",
            "engine": e.name(),
            "data_disks": disks,
            "chunk_bytes": chunk,
            "p": format!("{:016x}", fnv1a(&p)),
            "q": format!("{:016x}", fnv1a(&q)),
        }));
    }
    println!("{}", serde_json::Value::Array(out));
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--digest") {
        let n = |i: usize| -> usize {
            args.get(i)
                .and_then(|a| a.parse().ok())
                .expect("usage: parity_bench --digest DATA_DISKS CHUNK_BYTES")
        };
        digest(n(1), n(2));
        return;
    }
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
