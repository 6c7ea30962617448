//! Seed D (SEEDS.md): Bonnie++ on an SSD, one HDD and six HDDs in software
//! RAID 6.
//!
//! Decides: seed D's configurations, the article's figures and the rules of its
//! findings. It must never hard-code a finding's outcome.

use super::{
    figure, not_modelled, rule, Cell, Config, Finding, Seed, C_DISKS, C_MEMBER, HOST_2008,
};

/// Bonnie++'s seeker processes: SeekProcCount, 3 by default (bonnie++'s
/// readme: "This test runs SeekProcCount processes (default 3) in parallel").
/// How many of their reads a disk gets at once is the host's I/O scheduler's
/// doing (the configurations run `scheduler=cfq`, the articles' kernels'
/// default; raidlab-sim's `sched.rs`), not this seed's.
pub(super) const SEEKERS: usize = 3;

pub(super) fn configs() -> Vec<Config> {
    let c = |name: &str, spec: String| Config::new(Seed::D, name, spec);
    vec![
        // The SSD once per file system the article ran it on: its seekers
        // share each file's lock by that file system's rules, and a write
        // lands in the page cache until that file system's writeback sends
        // it down (raidlab-sim `fs/locks.rs`); the block tests have one
        // process and no sharing.
        c("ssd-ext3", format!("mtron-mobi-32g:{HOST_2008}:file-locks=ext3")),
        c("ssd-xfs", format!("mtron-mobi-32g:{HOST_2008}:file-locks=xfs")),
        c("hdd", format!("samsung-hd753lj:{HOST_2008}")),
        c(
            "raid6-6hdd",
            format!("raid6:{C_DISKS}:chunk=256K:{C_MEMBER}:card=adaptec-sas-31205/pass-through:{HOST_2008}"),
        ),
    ]
}

/// Article D's figures: SEEDS.md gives "roughly a hundred" seeks/s for one HDD;
/// issue 38 gives the SSD's, about 3,800 a second on XFS and 6,200 on ext3.
pub(super) fn article(config: &str, test: &str) -> Option<f64> {
    match (config, test) {
        ("hdd", "random_seeks") => Some(100.0),
        ("ssd-xfs", "random_seeks") => Some(3800.0),
        ("ssd-ext3", "random_seeks") => Some(6200.0),
        _ => None,
    }
}

/// Seed D's findings, each decided from the simulated figures in `cells`.
pub(super) fn findings(cells: &[Cell]) -> Vec<Finding> {
    let seed = Seed::D;
    let g = |config: &str, test: &str| figure(cells, config, test);
    vec![
        // The SSD's slower file system (XFS) stands for it where a finding
        // needs it above the disks; the block tests are the same on both.
        rule(seed, "the SSD's random seek rate is far above the HDD's (thousands per second against roughly a hundred)", || {
            let (ssd, hdd) = (g("ssd-xfs", "random_seeks")?.min(g("ssd-ext3", "random_seeks")?), g("hdd", "random_seeks")?);
            Some((ssd >= 1000.0 && ssd >= 10.0 * hdd && (50.0..=250.0).contains(&hdd),
                format!("SSD {ssd:.0}, HDD {hdd:.0} seeks/s (rule: SSD at least 1000 and 10x the HDD; HDD 50 to 250)")))
        }),
        rule(seed, "six HDDs in RAID 6 raise the seek rate a lot but still fall far short of the SSD", || {
            let ssd = g("ssd-xfs", "random_seeks")?.min(g("ssd-ext3", "random_seeks")?);
            let (hdd, r6) = (g("hdd", "random_seeks")?, g("raid6-6hdd", "random_seeks")?);
            Some((r6 >= 2.0 * hdd && r6 * 3.0 <= ssd,
                format!("RAID 6 {r6:.0} seeks/s: {:.1}x the HDD, {:.2} of the SSD (rule: at least 2x the HDD, at most a third of the SSD)", r6 / hdd, r6 / ssd)))
        }),
        rule(seed, "for block transfer the SSD and one HDD are similar and the six-disk RAID 6 is clearly fastest", || {
            let mut ok = true;
            let mut s = Vec::new();
            for t in ["block_output", "block_input"] {
                let (ssd, hdd, r6) = (g("ssd-ext3", t)?, g("hdd", t)?, g("raid6-6hdd", t)?);
                ok &= (0.5..=2.0).contains(&(ssd / hdd)) && r6 >= 1.5 * ssd.max(hdd);
                s.push(format!("{t}: SSD {ssd:.0}, HDD {hdd:.0}, RAID 6 {r6:.0} MB/s"));
            }
            Some((ok, format!("{} (rule: SSD/HDD within 0.5 to 2, RAID 6 at least 1.5x the faster)", s.join("; "))))
        }),
        rule(seed, "on the SSD, ext3 seeks clearly faster than XFS (about 6,200 against 3,800 a second)", || {
            let (ext3, xfs) = (g("ssd-ext3", "random_seeks")?, g("ssd-xfs", "random_seeks")?);
            Some((ext3 >= 1.25 * xfs,
                format!("ext3 {ext3:.0}, XFS {xfs:.0} seeks/s: {:.2}x (rule: ext3 at least 1.25x XFS; article 1.63x)", ext3 / xfs)))
        }),
        not_modelled(seed, "XFS with write barriers made metadata tests about ten times slower; per dollar, HDD RAID gives tens of times the capacity",
            "metadata tests need a file system; prices are not part of the presets"),
    ]
}
