//! Seed C (SEEDS.md): software RAID 5, 6 and 10 on six 750 GB disks against
//! the Adaptec card, chunks 64K, 256K and 1M, with Bonnie++'s block tests.
//!
//! Decides: seed C's configurations and the rules of its findings (SEEDS.md
//! gives no figures for seed C, so every cell's article figure is None). It must
//! never hard-code a finding's outcome.

use super::{
    figure, not_modelled, rule, Cell, Config, Finding, Seed, C_DISKS, C_MEMBER, FS_XFS, HOST_2008,
};

pub(super) fn configs() -> Vec<Config> {
    let mut v = Vec::new();
    for level in ["raid5", "raid6", "raid10"] {
        for chunk in ["64K", "256K", "1M"] {
            for (kind, card) in [
                ("sw", "card=adaptec-sas-31205/pass-through"),
                ("hw", "card=adaptec-sas-31205"),
            ] {
                v.push(Config::new(
                    Seed::C,
                    &format!("{kind}-{level}-{}", chunk.to_ascii_lowercase()),
                    format!(
                        "{level}:{C_DISKS}:chunk={chunk}:{C_MEMBER}:{card}:{HOST_2008}:{FS_XFS}"
                    ),
                ));
            }
        }
    }
    v
}

/// Seed C's findings, each decided from the simulated figures in `cells`.
pub(super) fn findings(cells: &[Cell]) -> Vec<Finding> {
    let seed = Seed::C;
    let g = |config: &str, test: &str| figure(cells, config, test);
    let chunks = ["64k", "256k", "1m"];
    vec![
        rule(seed, "software RAID 5 reads beat the card", || {
            let mut wins = 0;
            let mut s = Vec::new();
            for ch in chunks {
                let (sw, hw) = (g(&format!("sw-raid5-{ch}"), "block_input")?, g(&format!("hw-raid5-{ch}"), "block_input")?);
                wins += usize::from(sw > hw);
                s.push(format!("{ch}: {sw:.0} vs {hw:.0} MB/s"));
            }
            Some((wins >= 2, format!("block input sw vs hw, {} (rule: software ahead at 2 of 3 chunks)", s.join(", "))))
        }),
        rule(seed, "the card wins block writes on parity RAID by a wide margin", || {
            let mut s = Vec::new();
            let mut ok = true;
            for (lv, ch) in [("raid5", "64k"), ("raid5", "256k"), ("raid6", "64k")] {
                let (sw, hw) = (g(&format!("sw-{lv}-{ch}"), "block_output")?, g(&format!("hw-{lv}-{ch}"), "block_output")?);
                ok &= hw >= 1.3 * sw;
                s.push(format!("{lv} {ch}: hw {hw:.0} vs sw {sw:.0} MB/s"));
            }
            Some((ok, format!("{} (rule: the card at least 1.3x at each)", s.join(", "))))
        }),
        rule(seed, "the card wins rewrites", || {
            let mut wins = 0;
            let mut n = 0;
            for lv in ["raid5", "raid6"] {
                for ch in chunks {
                    let (sw, hw) = (g(&format!("sw-{lv}-{ch}"), "rewrite")?, g(&format!("hw-{lv}-{ch}"), "rewrite")?);
                    wins += usize::from(hw > sw);
                    n += 1;
                }
            }
            Some((wins * 2 > n, format!("the card ahead in {wins} of {n} parity configurations (rule: a majority)")))
        }),
        rule(seed, "RAID 6 writes are slower than RAID 5 (two parity blocks)", || {
            let mut slower = 0;
            let mut n = 0;
            for kind in ["sw", "hw"] {
                for ch in chunks {
                    let (r5, r6) = (g(&format!("{kind}-raid5-{ch}"), "block_output")?, g(&format!("{kind}-raid6-{ch}"), "block_output")?);
                    slower += usize::from(r6 < r5);
                    n += 1;
                }
            }
            Some((slower * 2 > n, format!("RAID 6 block output below RAID 5's in {slower} of {n} configurations (rule: a majority)")))
        }),
        rule(seed, "large chunks erased the card's lead on RAID 6", || {
            let (sw, hw) = (g("sw-raid6-1m", "block_output")?, g("hw-raid6-1m", "block_output")?);
            Some((hw <= 1.1 * sw, format!("RAID 6 1M block output: hw {hw:.0} vs sw {sw:.0} MB/s (rule: the card at most 1.1x)")))
        }),
        rule(seed, "small chunks made software RAID 6 writes faster than its reads", || {
            let (w, r) = (g("sw-raid6-64k", "block_output")?, g("sw-raid6-64k", "block_input")?);
            Some((w > r, format!("software RAID 6 64K: output {w:.0} vs input {r:.0} MB/s (rule: output higher)")))
        }),
        not_modelled(seed, "the card did poorly on small files in IOzone writes; XFS stripe alignment mattered a lot for metadata; the file system mattered as much as the RAID implementation",
            "IOzone's small files and Bonnie++'s metadata tests: the file-system layer models one large file (its data, allocation and journal), not directories or many files"),
    ]
}
