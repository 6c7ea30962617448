//! `raidlab seeds`' figures and findings: the JSON shape issue 15 specifies, the
//! same figures on every run, findings that a wrong configuration turns false, and
//! seed E's accuracy bound on its exact (deterministic) figures.

use raidlab_bench::seeds::{self, Seed, SeedOptions};

fn run(seeds: &[Seed], overrides: &[(&str, &str)]) -> seeds::SeedsResult {
    let opts = SeedOptions {
        overrides: overrides
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
        ..SeedOptions::default()
    };
    seeds::run(seeds, &opts).expect("seeds run")
}

#[test]
fn json_has_cells_and_findings_in_the_issues_shape() {
    let r = run(&[Seed::A], &[]);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["format"], "raidlab-seeds/1");
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 15, "3 configurations x 5 tests");
    for c in cells {
        for k in ["seed", "config", "test", "unit", "simulated", "article"] {
            assert!(c.get(k).is_some(), "cell without {k}: {c}");
        }
        assert_eq!(c["seed"], "A");
        assert!(c["simulated"].as_f64().unwrap() > 0.0, "{c}");
    }
    let fg = cells
        .iter()
        .find(|c| c["config"] == "one-disk" && c["test"] == "fg_under_scan")
        .unwrap();
    assert_eq!(fg["unit"], "s");
    assert_eq!(fg["article"], 60.0);
    assert!(cells
        .iter()
        .any(|c| c["test"] == "seq_read" && c["article"].is_null()));
    let findings = v["findings"].as_array().unwrap();
    assert!(!findings.is_empty());
    for f in findings {
        assert_eq!(f["seed"], "A");
        assert!(f["text"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(f["reproduced"].is_boolean());
    }
}

#[test]
fn seeds_a_and_d_repeat_exactly() {
    let a = run(&[Seed::A, Seed::D], &[]);
    let b = run(&[Seed::A, Seed::D], &[]);
    assert_eq!(a, b);
    // Every modelled finding of A and D is reproduced: the browser start under
    // indexing rests on the mirror's read balancing, the HDD's seek rate on one
    // read in flight per disk, the SSD's ext3 lead over XFS on XFS's iolock
    // (docs/seeds.md).
    for f in a.findings.iter().filter(|f| f.modelled) {
        assert!(f.reproduced, "{} {}: {}", f.seed, f.text, f.why);
    }
    assert_eq!(a.findings.iter().filter(|f| f.modelled).count(), 7);
}

#[test]
fn seed_c_repeats_exactly() {
    // Two of the 18 configurations (software and card, RAID 6): all 18 twice
    // take minutes in the test profile; `raidlab seeds C` runs them all.
    let opts = SeedOptions {
        only: vec!["sw-raid6-64k".into(), "hw-raid6-64k".into()],
        ..SeedOptions::default()
    };
    let a = seeds::run(&[Seed::C], &opts).unwrap();
    assert_eq!(a.cells.len(), 6, "2 configurations x 3 tests");
    let b = seeds::run(&[Seed::C], &opts).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_wrong_configuration_turns_a_finding_false() {
    let text = "a stripe doubles sequential reads and writes";
    let right = run(&[Seed::A], &[]);
    let f = right
        .findings
        .iter()
        .find(|f| f.text.starts_with(text))
        .unwrap();
    assert!(f.reproduced, "{}", f.why);
    // "RAID 0" that is really one disk cannot double anything.
    let wrong = run(&[Seed::A], &[("raid0-2", "hitachi-7k250")]);
    let f = wrong
        .findings
        .iter()
        .find(|f| f.text.starts_with(text))
        .unwrap();
    assert!(!f.reproduced, "{}", f.why);
}

#[test]
fn seed_e_is_deterministic_and_within_its_error_bound() {
    let a = run(&[Seed::E], &[]);
    let b = run(&[Seed::E], &[]);
    assert_eq!(a, b);
    // Every cell of the article's table (36 figures) and the single drive's
    // SEQ1M Q1T1 pair the article left out.
    assert_eq!(a.cells.len(), 42);
    let e = a.seed_e_error.expect("seed E error");
    println!("{e:?}");
    assert_eq!(e.cells, 36);
    assert_eq!(e.prediction_cells, 32);
    assert!(e.median_abs_error <= 0.15, "{e:?}");
    // The exact figure (deterministic): a model change that moves it shows here.
    // 13.4 % until the SSD model paid SATA's framing, an LDPC decode and a
    // per-write controller time (docs/seeds.md, seed E); 8.2 % until a
    // request of at most 16 MiB across a multiple of the engine's piece was
    // carried out in one round instead of two (docs/seeds.md).
    assert_eq!((e.median_abs_error * 1000.0).round(), 79.0, "{e:?}");
    let cal = a
        .cells
        .iter()
        .filter(|c| c.role == Some("calibration"))
        .count();
    assert_eq!(cal, seeds::E_CALIBRATION.len());
    for f in a.findings.iter().filter(|f| {
        f.text.contains("random writes fall sharply")
            || f.text.contains("do not scale")
            || f.text.contains("does not reach 4x")
    }) {
        assert!(f.reproduced, "{}: {}", f.text, f.why);
    }
}

/// What-if, not a prediction: seed C's software RAID with a per-stripe-head
/// cost on md 2008's single raid5d thread (`host-stripe-head-us`), a cost no
/// source gives for that kernel and CPU (docs/seeds.md, seed C). Prints each
/// finding per value; checks only that the cost can slow software writes and
/// never speeds them up. All 18 configurations per value: minutes in the test
/// profile, so ignored; `cargo test --release -p raidlab-bench --test seeds --
/// --ignored --nocapture seed_c_what_if`.
#[test]
#[ignore = "a sweep of seed C, minutes long; run by hand for docs/seeds.md"]
fn seed_c_what_if_md_stripe_head_cost() {
    let mut last: Option<f64> = None;
    for us in [0.0, 20.0, 40.0, 60.0] {
        let overrides: Vec<(String, String)> = seeds::configs(Seed::C)
            .into_iter()
            .filter(|c| c.name.starts_with("sw-"))
            .map(|c| (c.name, format!("{}:host-stripe-head-us={us}", c.spec)))
            .collect();
        let opts = SeedOptions {
            overrides,
            ..SeedOptions::default()
        };
        let r = seeds::run(&[Seed::C], &opts).unwrap();
        println!("host-stripe-head-us={us}");
        for f in &r.findings {
            println!("  {}: {} ({})", f.text, f.reproduced, f.why);
        }
        let out = r
            .cells
            .iter()
            .find(|c| c.config == "sw-raid5-64k" && c.test == "block_output")
            .unwrap()
            .simulated;
        if let Some(prev) = last {
            assert!(out <= prev, "{us} µs: {out} MB/s above {prev}");
        }
        last = Some(out);
    }
}

/// What-if, not a prediction: seed C's software RAID 5 and 6 with raidlab's
/// stripe cache cut to the memory md 2.6.2x's default gives it, 256 stripe
/// heads of one 4 KiB page per member (NR_STRIPES and STRIPE_SIZE in
/// drivers/md/raid5.c): 1 MiB per member, i.e. 1 MiB / chunk of raidlab's
/// whole-chunk stripes (16 at 64K, 4 at 256K, 1 at 1M) against its default 64.
/// A published 2.6.19 measurement saw md's default cache halve dd's writes
/// (docs/seeds.md, "Sourced bounds searched for seed C"); this asks whether
/// the capacity alone does that here. Checks only that the smaller cache never
/// speeds block output up (a cache that helps when smaller is a bug). Two
/// runs of the 6 configurations: ignored; `cargo test --release -p
/// raidlab-bench --test seeds -- --ignored --nocapture seed_c_what_if`.
#[test]
#[ignore = "two runs of seed C's software parity arrays; run by hand for docs/seeds.md"]
fn seed_c_what_if_md_stripe_cache_capacity() {
    let sw: Vec<_> = seeds::configs(Seed::C)
        .into_iter()
        .filter(|c| c.name.starts_with("sw-raid5") || c.name.starts_with("sw-raid6"))
        .collect();
    let only: Vec<String> = sw.iter().map(|c| c.name.clone()).collect();
    let stripes = |name: &str| match name.rsplit('-').next() {
        Some("64k") => 16,
        Some("256k") => 4,
        Some("1m") => 1,
        other => panic!("{name}: chunk {other:?}"),
    };
    let base = seeds::run(
        &[Seed::C],
        &SeedOptions {
            only: only.clone(),
            ..SeedOptions::default()
        },
    )
    .unwrap();
    let md = seeds::run(
        &[Seed::C],
        &SeedOptions {
            overrides: sw
                .iter()
                .map(|c| {
                    let n = stripes(&c.name);
                    (c.name.clone(), format!("{}:stripe-cache={n}", c.spec))
                })
                .collect(),
            only,
            ..SeedOptions::default()
        },
    )
    .unwrap();
    assert_eq!(base.cells.len(), md.cells.len());
    for (b, m) in base.cells.iter().zip(&md.cells) {
        assert_eq!((&b.config, &b.test), (&m.config, &m.test));
        println!(
            "{} {}: {:.1} -> {:.1} MB/s (stripe-cache={})",
            b.config,
            b.test,
            b.simulated,
            m.simulated,
            stripes(&b.config)
        );
        if b.test == "block_output" {
            assert!(
                m.simulated <= b.simulated * 1.005,
                "{}: {} MB/s with md's capacity above {} with 64 stripes",
                b.config,
                m.simulated,
                b.simulated
            );
        }
    }
}
