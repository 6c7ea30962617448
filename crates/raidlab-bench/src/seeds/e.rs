//! Seed E (SEEDS.md): the whole CrystalDiskMark table on SATA SSDs behind the
//! MegaRAID card, and its median error.
//!
//! Decides: seed E's configurations, the article's table, which cells were
//! calibrated on, the test order and the rules of its findings. It must never
//! hard-code a finding's outcome.

use super::{cell, context, figure, median, open, rule, Cell, Config, ErrorSummary, Finding, Seed};
use crate::cdm::{self, CdmAccess, CdmConfig, CdmTest};
use crate::engine::{self, Access, Control, DataFill, Dir, EngineKind, Limit, Rewrite, Workload};
use raidlab_core::Result;
use std::time::Duration;

const E_CARD: &str = "card=megaraid-9361-4i";
/// The MegaRAID's default strip size for a new virtual drive (256 KiB on the
/// 93xx family's current firmware).
const E_CHUNK: &str = "chunk=256K";

pub(super) fn configs() -> Vec<Config> {
    let c = |name: &str, spec: String| Config::new(Seed::E, name, spec);
    vec![
        c("1ssd", "sata-ssd-1tb-2021".into()),
        c(
            "raid0-2ssd",
            format!("raid0:2xsata-ssd-1tb-2021:{E_CHUNK}:{E_CARD}"),
        ),
        c("raid1-2ssd", format!("raid1:2xsata-ssd-1tb-2021:{E_CARD}")),
        c(
            "raid5-3ssd",
            format!("raid5:3xsata-ssd-1tb-2021:{E_CHUNK}:{E_CARD}"),
        ),
        c(
            "raid6-4ssd",
            format!("raid6:4xsata-ssd-1tb-2021:{E_CHUNK}:{E_CARD}"),
        ),
        c(
            "raid5-4ssd",
            format!("raid5:4xsata-ssd-1tb-2021:{E_CHUNK}:{E_CARD}"),
        ),
        c(
            "raid0-4ssd",
            format!("raid0:4xsata-ssd-1tb-2021:{E_CHUNK}:{E_CARD}"),
        ),
    ]
}

/// Article E's table (MB/s), in SEEDS.md's column order; None where the article
/// gives "-".
const E_TESTS: [&str; 6] = [
    "SEQ1M-Q8T1-read",
    "SEQ1M-Q8T1-write",
    "SEQ1M-Q1T1-read",
    "SEQ1M-Q1T1-write",
    "RND4K-Q1T1-read",
    "RND4K-Q1T1-write",
];
#[rustfmt::skip]
const E_ARTICLE: [(&str, [Option<f64>; 6]); 7] = [
    ("1ssd",       [Some(564.95),  Some(529.17),  None,          None,          Some(48.45), Some(108.97)]),
    ("raid0-2ssd", [Some(1116.34), Some(1038.75), None,          None,          Some(48.69), Some(109.58)]),
    ("raid1-2ssd", [Some(1118.23), Some(529.37),  None,          None,          Some(48.18), Some(103.18)]),
    ("raid5-3ssd", [Some(2578.90), Some(1057.08), Some(1589.78), Some(410.39),  Some(71.08), Some(32.65)]),
    ("raid6-4ssd", [Some(2854.93), Some(1055.74), Some(1381.36), Some(406.60),  Some(63.62), Some(28.77)]),
    ("raid5-4ssd", [Some(3406.11), Some(1581.06), Some(2549.93), Some(332.83),  Some(75.39), Some(23.18)]),
    ("raid0-4ssd", [Some(2229.00), Some(2072.22), Some(2001.37), Some(1890.70), Some(48.64), Some(108.53)]),
];

/// The seed E cells a card parameter was fitted to (docs/seeds.md says which
/// parameter): everything else is a prediction.
pub const E_CALIBRATION: [(&str, &str); 4] = [
    ("raid0-2ssd", "RND4K-Q1T1-write"),
    ("raid5-3ssd", "SEQ1M-Q8T1-read"),
    ("raid5-3ssd", "RND4K-Q1T1-read"),
    ("raid5-3ssd", "RND4K-Q1T1-write"),
];

pub(super) fn article(config: &str, test: &str) -> Option<f64> {
    let col = E_TESTS.iter().position(|t| *t == test)?;
    E_ARTICLE
        .iter()
        .find(|(c, _)| *c == config)
        .and_then(|(_, row)| row[col])
}

/// Virtual time each seed E random test measures (the sequential ones measure
/// CrystalDiskMark's 5 s). A random test's figure settles within tens of
/// milliseconds of virtual time; this keeps `raidlab seeds` under a minute.
pub const E_MEASURE: Duration = Duration::from_millis(500);

/// Seed E: CrystalDiskMark's order (reads, then writes; SEQ1M Q8T1, SEQ1M Q1T1,
/// RND4K Q32T1, RND4K Q1T1), on a 1 GiB test file written first, 5 s of idle
/// virtual time between tests as CrystalDiskMark's default interval. One run per
/// test: a simulated run repeats exactly, so CrystalDiskMark's best of 5 is the
/// same figure. RND4K Q32T1 runs (it shapes the card's cache for the next test)
/// but the article gives no figure for it, so it is not a cell.
pub(super) fn run(c: &Config) -> Result<Vec<Cell>> {
    let size = 1u64 << 30;
    let target = open(c, size)?;
    let control = Control::new();
    let cfg = CdmConfig {
        runs: 1,
        measure: E_MEASURE,
        interval: Duration::from_secs(5),
        ..CdmConfig::default()
    };
    // Written first, as CrystalDiskMark writes its test file.
    let prep = seq_bytes(Dir::Write, 1 << 20, 4, size, cfg.engine);
    engine::run(&target, &prep, &control).map_err(|e| context(c, e))?;
    let tests = [
        (CdmAccess::Seq, 1usize << 20, 8usize, "SEQ1M-Q8T1"),
        (CdmAccess::Seq, 1 << 20, 1, "SEQ1M-Q1T1"),
        (CdmAccess::Rnd, 4 << 10, 32, "RND4K-Q32T1"),
        (CdmAccess::Rnd, 4 << 10, 1, "RND4K-Q1T1"),
    ];
    let sim = target
        .sim
        .clone()
        .ok_or_else(|| context(c, "not a simulated target"))?;
    let mut cells = Vec::new();
    for (dir, dname) in [(Dir::Read, "read"), (Dir::Write, "write")] {
        for (access, bs, qd, name) in tests {
            sim.idle(cfg.interval);
            let t = CdmTest {
                access,
                bs,
                qd,
                threads: 1,
            };
            // Sequential tests measure CrystalDiskMark's 5 s: several passes over
            // the file, so what the card's cache keeps counts as it did for the
            // article. Random tests settle within E_MEASURE and cost the most.
            let measure = if access == CdmAccess::Seq {
                Duration::from_secs(5)
            } else {
                cfg.measure
            };
            let w = cdm::workload(&t, dir, size, &CdmConfig { measure, ..cfg }, 0);
            let m = engine::run(&target, &w, &control).map_err(|e| context(c, e))?;
            let test = format!("{name}-{dname}");
            if E_TESTS.contains(&test.as_str()) {
                cells.push(cell(c, &test, "MB/s", m.main().mb_s(m.elapsed)));
            }
        }
    }
    Ok(cells)
}

fn seq_bytes(dir: Dir, bs: usize, qd: usize, size: u64, engine: EngineKind) -> Workload {
    Workload {
        access: Access::Seq,
        dir,
        bs,
        offset: 0,
        size: size / bs as u64 * bs as u64,
        threads: 1,
        qd,
        limit: Limit {
            time: None,
            bytes: Some(size / bs as u64 * bs as u64),
        },
        data: DataFill::Random,
        rewrite: Rewrite::Never,
        random_map: false,
        seed: 1,
        split: false,
        engine,
    }
}

/// Seed E's findings, each decided from the simulated figures in `cells`.
pub(super) fn findings(cells: &[Cell]) -> Vec<Finding> {
    let seed = Seed::E;
    let g = |config: &str, test: &str| figure(cells, config, test);
    let one = |t: &str| g("1ssd", t);
    vec![
        rule(seed, "RAID 5/6 random writes fall sharply (parity read-modify-write)", || {
            let base = one("RND4K-Q1T1-write")?;
            let mut s = Vec::new();
            let mut ok = true;
            for cfg in ["raid5-3ssd", "raid6-4ssd", "raid5-4ssd"] {
                let v = g(cfg, "RND4K-Q1T1-write")?;
                ok &= v <= 0.5 * base;
                s.push(format!("{cfg} {:.2}x", v / base));
            }
            Some((ok, format!("RND4K Q1T1 write against one SSD: {} (rule: each at most 0.5x)", s.join(", "))))
        }),
        rule(seed, "random 4K reads at QD1 do not scale with the number of drives", || {
            let base = one("RND4K-Q1T1-read")?;
            let (r2, r4) = (g("raid0-2ssd", "RND4K-Q1T1-read")?, g("raid0-4ssd", "RND4K-Q1T1-read")?);
            Some((r2 <= 1.25 * base && r4 <= 1.25 * base,
                format!("RND4K Q1T1 read: RAID 0 x2 {:.2}x, x4 {:.2}x one SSD (rule: both at most 1.25x)", r2 / base, r4 / base)))
        }),
        rule(seed, "RAID 0 with 4 drives does not reach 4x", || {
            let (q1, q1_4) = (one("SEQ1M-Q1T1-read")?, g("raid0-4ssd", "SEQ1M-Q1T1-read")?);
            let (q8, q8_4) = (one("SEQ1M-Q8T1-read")?, g("raid0-4ssd", "SEQ1M-Q8T1-read")?);
            Some((q1_4 < 4.0 * q1 && q8_4 < 4.0 * q8,
                format!("RAID 0 x4 SEQ1M read: Q1T1 {:.2}x, Q8T1 {:.2}x one SSD (rule: both below 4x)", q1_4 / q1, q8_4 / q8)))
        }),
        rule(seed, "with 3+ drives the card's read cache lifts SEQ1M Q8T1 reads past the sum of the drives", || {
            let base = one("SEQ1M-Q8T1-read")?;
            let mut s = Vec::new();
            let mut ok = true;
            for (cfg, n) in [("raid5-3ssd", 3.0), ("raid6-4ssd", 4.0), ("raid5-4ssd", 4.0)] {
                let v = g(cfg, "SEQ1M-Q8T1-read")?;
                ok &= v > n * base;
                s.push(format!("{cfg} {:.2}x the sum", v / (n * base)));
            }
            Some((ok, format!("SEQ1M Q8T1 read: {} (rule: each above the sum)", s.join(", "))))
        }),
    ]
}

/// Median of |simulated / article - 1| over seed E's cells with a figure.
pub fn e_error(cells: &[Cell]) -> ErrorSummary {
    let errs = |pred: bool| -> Vec<f64> {
        cells
            .iter()
            .filter(|c| c.seed == "E" && (!pred || c.role == Some("prediction")))
            .filter_map(|c| c.ratio().map(|r| (r - 1.0).abs()))
            .collect()
    };
    let all = errs(false);
    let pred = errs(true);
    ErrorSummary {
        cells: all.len(),
        median_abs_error: median(&all),
        prediction_cells: pred.len(),
        prediction_median_abs_error: median(&pred),
    }
}
