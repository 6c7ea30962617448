//! Bonnie++'s output conventions: its CSV line (format 1.98, read by
//! `bon_csv2html`), its table, and the raidlab-bench/1 report. It decides how a
//! figure is written (`+++++` for a test too short to measure, latency units,
//! the size field); it must never print a figure Bonnie++ would not.

use super::{BonnieResult, Figure, DEFAULT_CHUNK};
use crate::schema::BenchReport;
use crate::table::{keys_in_order, SideBySide};

/// Bonnie++'s latency text: whole microseconds up to five digits, then whole
/// milliseconds (its `%dus` / `%dms`).
fn latency(us: f64) -> String {
    if us < 100_000.0 {
        format!("{}us", us.round() as u64)
    } else {
        format!("{}ms", (us / 1000.0).round() as u64)
    }
}

/// The size field as Bonnie++ writes it: whole GiB as `1G`, else MiB (`512M`).
pub fn size_text(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes % (1 << 30) == 0 {
        format!("{}G", bytes >> 30)
    } else {
        format!("{}M", bytes >> 20)
    }
}

/// One line of Bonnie++'s CSV (format version 1.98), as `bon_csv2html` reads it.
pub fn csv_line(r: &BonnieResult, machine: &str) -> String {
    // Commas would split fields: the name is the only free text.
    let name: String = machine
        .chars()
        .map(|c| if c == ',' { '_' } else { c })
        .collect();
    let kib = |f: &Figure| {
        if !f.measured() {
            return "+++++,+++".to_string();
        }
        format!(
            "{},{}",
            (f.rate / 1024.0).round() as u64,
            f.cpu_pct.round() as u64
        )
    };
    let ops = |f: &Figure| {
        if !f.measured() {
            return "+++++,+++".to_string();
        }
        format!("{},{}", f.rate.round() as u64, f.cpu_pct.round() as u64)
    };
    // A per-character test not run: both fields empty, as bonnie++ -f leaves them.
    let chars = |f: &Option<Figure>| f.as_ref().map_or_else(|| ",".to_string(), kib);
    let seeks = if r.random_seeks.measured() {
        format!(
            "{:.1},{}",
            r.random_seeks.rate,
            r.random_seeks.cpu_pct.round() as u64
        )
    } else {
        "+++++,+++".to_string()
    };
    let mut f: Vec<String> = vec![
        "1.98".into(),
        "2.00a".into(),
        name,
        "1".into(),
        r.seed.to_string(),
        size_text(r.size),
        if r.chunk == DEFAULT_CHUNK {
            String::new()
        } else {
            r.chunk.to_string()
        },
        r.seeks.to_string(),
        r.seekers.to_string(),
        chars(&r.put_char),
        kib(&r.put_block),
        kib(&r.rewrite),
        chars(&r.get_char),
        kib(&r.get_block),
        seeks,
    ];
    match &r.files {
        Some(ft) => {
            f.push((ft.files / 1024).to_string());
            f.push(",,,".into()); // max_size, min_size, num_dirs, file_chunk_size: defaults
            for x in [
                &ft.seq_create,
                &ft.seq_stat,
                &ft.seq_delete,
                &ft.ran_create,
                &ft.ran_stat,
                &ft.ran_delete,
            ] {
                f.push(ops(x));
            }
        }
        None => {
            f.push(String::new());
            f.push(",,,".into());
            for _ in 0..6 {
                f.push(",".into());
            }
        }
    }
    let char_latency = |f: &Option<Figure>| f.map_or(String::new(), |f| latency(f.max_latency_us));
    f.push(char_latency(&r.put_char));
    f.push(latency(r.put_block.max_latency_us));
    f.push(latency(r.rewrite.max_latency_us));
    f.push(char_latency(&r.get_char));
    f.push(latency(r.get_block.max_latency_us));
    f.push(latency(r.random_seeks.max_latency_us));
    match &r.files {
        Some(ft) => {
            for x in [
                &ft.seq_create,
                &ft.seq_stat,
                &ft.seq_delete,
                &ft.ran_create,
                &ft.ran_stat,
                &ft.ran_delete,
            ] {
                f.push(latency(x.max_latency_us));
            }
        }
        None => f.push(",,,,,".into()),
    }
    f.join(",")
}

/// Every figure of one result in report order: (group, test, unit, the rate in
/// that unit, the figure). The table and the raidlab-bench/1 rows both read it.
fn figures(r: &BonnieResult) -> Vec<(&'static str, &'static str, &'static str, f64, Figure)> {
    let mut v = Vec::new();
    // Bonnie++'s per-character tests, when they ran.
    for (test, f) in [("write", r.put_char), ("read", r.get_char)] {
        if let Some(f) = f {
            v.push(("per char", test, "MB/s", f.rate / 1e6, f));
        }
    }
    for (test, f) in [
        ("write", r.put_block),
        ("rewrite", r.rewrite),
        ("read", r.get_block),
    ] {
        v.push(("block", test, "MB/s", f.rate / 1e6, f));
    }
    let seeks = r.random_seeks;
    v.push(("seeks", "random seeks", "seeks/s", seeks.rate, seeks));
    if let Some(ft) = &r.files {
        for (group, test, f) in [
            ("files sequential", "create", ft.seq_create),
            ("files sequential", "stat", ft.seq_stat),
            ("files sequential", "delete", ft.seq_delete),
            ("files random", "create", ft.ran_create),
            ("files random", "stat", ft.ran_stat),
            ("files random", "delete", ft.ran_delete),
        ] {
            v.push((group, test, "files/s", f.rate, f));
        }
    }
    v
}

/// The raidlab-bench/1 report; `details` has every figure and the CSV lines.
pub fn report(results: &[BonnieResult], machine: &str) -> BenchReport {
    let mut rep = BenchReport::new("bonnie", results.iter().map(|r| r.label.clone()).collect());
    for r in results {
        let l = &r.label;
        for (group, test, unit, value, f) in figures(r) {
            rep.push(group, test, l, unit, value);
            rep.push(group, test, l, "latency max µs", f.max_latency_us);
        }
    }
    rep.details = serde_json::json!({
        "results": results,
        "csv": results.iter().map(|r| csv_line(r, machine)).collect::<Vec<_>>(),
    });
    rep
}

/// The side-by-side text table: a row per test, a column group per target (rate,
/// %CPU and the slowest operation, in Bonnie++'s latency text); "-" where a
/// target has no figure (file tests run on directory targets only).
pub fn table(results: &[BonnieResult]) -> String {
    let mut t = SideBySide::new(
        &[("test", 16), ("", 12), ("unit", 7)],
        results.iter().map(|r| r.label.clone()).collect(),
        &[("rate", 10), ("%CPU", 5), ("slowest", 9)],
    );
    let all: Vec<_> = results.iter().map(figures).collect();
    let keys = keys_in_order(
        all.iter()
            .map(|fs| fs.iter().map(|f| (f.0, f.1, f.2)).collect()),
    );
    for (group, test, unit) in keys {
        let cells = all
            .iter()
            .map(|fs| {
                fs.iter()
                    .find(|f| (f.0, f.1, f.2) == (group, test, unit))
                    .map(|&(_, _, _, value, f)| {
                        if f.measured() {
                            vec![
                                format!("{value:.1}"),
                                format!("{:.0}", f.cpu_pct),
                                latency(f.max_latency_us),
                            ]
                        } else {
                            // Bonnie++'s mark for a test too short to measure.
                            vec!["+++++".into(), "+++".into(), latency(f.max_latency_us)]
                        }
                    })
            })
            .collect();
        t.row(vec![group.into(), test.into(), unit.into()], cells);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bonnie::FileTests;

    fn fig(rate: f64) -> Figure {
        Figure {
            rate,
            cpu_pct: 12.4,
            max_latency_us: 1500.0,
            seconds: 2.0,
        }
    }

    #[test]
    fn csv_line_has_bonnies_fields_in_place() {
        let r = BonnieResult {
            label: "x".into(),
            size: 64 << 20,
            chunk: DEFAULT_CHUNK,
            seeks: 8192,
            seekers: 5,
            seed: 42,
            put_char: Some(fig(3.0 * 1024.0 * 1024.0)),
            get_char: Some(fig(4.0 * 1024.0 * 1024.0)),
            put_block: fig(10.0 * 1024.0 * 1024.0),
            rewrite: fig(5.0 * 1024.0 * 1024.0),
            get_block: fig(20.0 * 1024.0 * 1024.0),
            random_seeks: fig(321.25),
            files: Some(FileTests {
                files: 1024,
                seq_create: fig(1000.0),
                seq_stat: fig(2000.0),
                seq_delete: fig(3000.0),
                ran_create: fig(4000.0),
                ran_stat: fig(5000.0),
                ran_delete: fig(6000.0),
            }),
            interrupted: false,
        };
        let line = csv_line(&r, "box,1");
        let f: Vec<&str> = line.split(',').collect();
        // 50 fields, as bonnie++ 2.00a writes them.
        assert_eq!(f.len(), 50, "{line}");
        assert_eq!(
            &f[..9],
            ["1.98", "2.00a", "box_1", "1", "42", "64M", "", "8192", "5"]
        );
        assert_eq!((f[9], f[10]), ("3072", "12"));
        assert_eq!((f[11], f[12]), ("10240", "12"));
        assert_eq!(f[13], "5120");
        assert_eq!((f[15], f[16]), ("4096", "12"));
        assert_eq!(f[17], "20480");
        assert_eq!(f[19], "321.2");
        assert_eq!(f[21], "1");
        assert_eq!(f[26], "1000");
        assert_eq!(f[36], "6000");
        assert_eq!(f[38], "1500us");
        assert_eq!(f[39], "1500us");
        assert_eq!(f[41], "1500us");
        assert_eq!(f[49], "1500us");
        let mut no_files = r.clone();
        no_files.files = None;
        assert_eq!(csv_line(&no_files, "m").split(',').count(), 50);
        // Per-character tests not run (-f): their figures and latencies empty.
        let mut fast = r.clone();
        fast.put_char = None;
        fast.get_char = None;
        let line = csv_line(&fast, "m");
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 50, "{line}");
        for i in [9, 10, 15, 16, 38, 41] {
            assert_eq!(f[i], "", "field {i} of {line}");
        }
        assert_eq!((f[11], f[17]), ("10240", "20480"));
        assert!(!table(&[fast]).contains("per char"));
        assert!(table(std::slice::from_ref(&r)).contains("per char"));
        // Bonnie++'s conventions: 1G, not 1024M; a test under 0.5 s is +++++.
        let mut quick = r.clone();
        quick.size = 1 << 30;
        quick.rewrite.seconds = 0.2;
        quick.files.as_mut().unwrap().seq_stat.seconds = 0.01;
        let line = csv_line(&quick, "m");
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 50, "{line}");
        assert_eq!(f[5], "1G");
        assert_eq!((f[13], f[14]), ("+++++", "+++"));
        assert_eq!((f[11], f[12]), ("10240", "12"));
        assert_eq!((f[28], f[29]), ("+++++", "+++"));
        assert_eq!(size_text(512 << 20), "512M");
        assert_eq!(size_text(3 << 29), "1536M");
        let t = table(&[quick]);
        assert!(t.contains("+++++"), "{t}");
    }

    #[test]
    fn latency_units_as_bonnie() {
        assert_eq!(latency(44.0), "44us");
        assert_eq!(latency(12_789.0), "12789us");
        assert_eq!(latency(250_400.0), "250ms");
    }
}
