use super::*;

fn file(source: &str, suite: &str, rows: &[(&str, &str, &str, &str, f64)]) -> ResultFile {
    let mut targets: Vec<String> = Vec::new();
    for r in rows {
        if !targets.iter().any(|t| t == r.2) {
            targets.push(r.2.to_string());
        }
    }
    ResultFile {
        baseline: None,
        conditions: Vec::new(),
        simulated: Vec::new(),
        seed: None,
        source: source.to_string(),
        format: crate::FORMAT.to_string(),
        suite: suite.to_string(),
        created: None,
        host: Default::default(),
        targets,
        rows: rows
            .iter()
            .map(|&(group, test, target, metric, value)| Row {
                suite: suite.to_string(),
                group: group.into(),
                test: test.into(),
                target: target.into(),
                metric: metric.into(),
                value,
                higher_is_better: !metric.starts_with("latency"),
            })
            .collect(),
    }
}

#[test]
fn same_label_in_two_runs_of_a_suite_is_disambiguated_by_stem() {
    let a = file(
        "out/a.json",
        "cdm",
        &[("SEQ", "read", "RAID 0", "MB/s", 1.0)],
    );
    let b = file(
        "out/b.json",
        "cdm",
        &[("SEQ", "read", "RAID 0", "MB/s", 2.0)],
    );
    let files = [a, b];
    let m = Model::new(&files, None);
    assert_eq!(m.targets, ["RAID 0 (a)", "RAID 0 (b)"]);
    assert_eq!(m.rows[1].target, "RAID 0 (b)");
    assert_eq!(m.suites.len(), 1);
    assert_eq!(m.suites[0].charts[0].bar_count(), 2);
    assert_eq!(m.suites[0].summary[0].values, [Some(1.0), Some(2.0)]);
}

#[test]
fn same_stem_falls_back_to_path() {
    let a = file(
        "run1/cdm.json",
        "cdm",
        &[("SEQ", "read", "md", "MB/s", 1.0)],
    );
    let b = file(
        "run2/cdm.json",
        "cdm",
        &[("SEQ", "read", "md", "MB/s", 2.0)],
    );
    let files = [a, b];
    let m = Model::new(&files, None);
    assert_eq!(m.targets, ["md (run1/cdm)", "md (run2/cdm)"]);
}

#[test]
fn same_label_in_different_suites_stays_one_target() {
    let a = file("cdm.json", "cdm", &[("SEQ", "read", "RAID 0", "MB/s", 1.0)]);
    let b = file(
        "bon.json",
        "bonnie",
        &[("Block", "output", "RAID 0", "K/sec", 2.0)],
    );
    let files = [a, b];
    let m = Model::new(&files, None);
    assert_eq!(m.targets, ["RAID 0"]);
    assert_eq!(m.suites.len(), 2);
}

#[test]
fn shown_labels_stay_distinct_even_when_a_file_already_uses_the_suffix() {
    let a = file("a.json", "cdm", &[("SEQ", "read", "x", "MB/s", 1.0)]);
    let b = file(
        "b.json",
        "cdm",
        &[
            ("SEQ", "read", "x (a)", "MB/s", 2.0),
            ("SEQ", "read", "x", "MB/s", 3.0),
        ],
    );
    let files = [a, b];
    let m = Model::new(&files, None);
    let set: HashSet<&String> = m.targets.iter().collect();
    assert_eq!(set.len(), 3, "{:?}", m.targets);
    assert_eq!(m.suites[0].charts[0].bar_count(), 3);
}

#[test]
fn charts_per_metric_groups_first_seen_bars_in_target_order() {
    let f = file(
        "a.json",
        "cdm",
        &[
            ("SEQ1M Q8T1", "read", "one", "MB/s", 1.0),
            ("RND4K Q1T1", "read", "one", "MB/s", 2.0),
            ("RND4K Q1T1", "read", "raid0", "MB/s", 3.0),
            ("SEQ1M Q8T1", "read", "raid0", "MB/s", 4.0),
            ("SEQ1M Q8T1", "read", "one", "IOPS", 5.0),
            ("SEQ1M Q8T1", "read", "one", "latency µs", 6.0),
        ],
    );
    let files = [f];
    let m = Model::new(&files, None);
    let charts = &m.suites[0].charts;
    // One chart per metric and kind of test: sequential and random MB/s
    // each on their own scale.
    let metrics: Vec<(&str, Option<&str>)> =
        charts.iter().map(|c| (c.metric.as_str(), c.kind)).collect();
    assert_eq!(
        metrics,
        [
            ("MB/s", Some("sequential")),
            ("MB/s", Some("random")),
            ("IOPS", Some("sequential")),
            ("latency µs", Some("sequential"))
        ]
    );
    let groups: Vec<&str> = charts[0].groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(groups, ["SEQ1M Q8T1"]);
    assert_eq!(charts[1].groups[0].name, "RND4K Q1T1");
    assert_eq!(charts[0].groups[0].tests[0].bars, [(0, 1.0), (1, 4.0)]);
    assert_eq!(charts[0].higher_is_better, Some(true));
    assert_eq!(charts[3].higher_is_better, Some(false));
    let summary: Vec<(&str, &str)> = m.suites[0]
        .summary
        .iter()
        .map(|r| (r.group.as_str(), r.metric.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("SEQ1M Q8T1", "MB/s"),
            ("RND4K Q1T1", "MB/s"),
            ("SEQ1M Q8T1", "IOPS"),
            ("SEQ1M Q8T1", "latency µs")
        ]
    );
    assert_eq!(m.suites[0].summary[2].values, [Some(5.0), None]);
    // The comparison's line per test: MB/s heads SEQ1M Q8T1, not IOPS.
    let heads: Vec<(&str, &str)> = m.suites[0]
        .headlines()
        .iter()
        .map(|r| (r.group.as_str(), r.metric.as_str()))
        .collect();
    assert_eq!(heads, [("SEQ1M Q8T1", "MB/s"), ("RND4K Q1T1", "MB/s")]);
}

#[test]
fn kinds_of_test() {
    assert_eq!(kind("SEQ1M Q8T1", "read"), Some("sequential"));
    assert_eq!(kind("raid5-3ssd", "RND4K-Q1T1-read"), Some("random"));
    assert_eq!(kind("SEQUENTIAL", "x"), None);
    assert_eq!(kind("Sequential block", "Block output"), None);
}

fn with_conditions(f: &mut ResultFile, target: &str, io: &str) {
    f.conditions.push(Conditions {
        target: target.into(),
        io: io.into(),
        test_size: 1 << 30,
        runs: Some(5),
        measure_s: Some(5.0),
        engine: "io_uring".into(),
        simulated: false,
        job: None,
        workload: None,
        queue_depth: None,
    });
}

#[test]
fn baseline_and_mixed_conditions() {
    let rows = [
        ("SEQ1M Q8T1", "read", "one", "MB/s", 1.0),
        ("SEQ1M Q8T1", "read", "two", "MB/s", 2.0),
    ];
    let mut f = file("a.json", "cdm", &rows);
    with_conditions(&mut f, "one", "O_DIRECT");
    with_conditions(&mut f, "two", "O_DIRECT");
    let files = [f.clone()];
    let m = Model::new(&files, None);
    assert_eq!(m.suites[0].baseline, 0);
    assert!(!m.suites[0].mixed_conditions());
    f.baseline = Some("two".into());
    f.conditions[1].io = "page cache".into();
    let files = [f.clone()];
    let m = Model::new(&files, None);
    assert_eq!(m.suites[0].baseline, 1);
    assert!(m.suites[0].mixed_conditions());
    // The caller's baseline wins; an unknown one leaves the file's.
    assert_eq!(Model::new(&files, Some("one")).suites[0].baseline, 0);
    assert_eq!(Model::new(&files, Some("zz")).suites[0].baseline, 1);
    // One target recorded, the other not: mixed too.
    f.conditions.pop();
    let files = [f];
    assert!(Model::new(&files, None).suites[0].mixed_conditions());
}
