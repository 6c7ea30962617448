//! IOzone's record-size x file-size matrix, its `-a` text layout and its `-R`
//! ("Excel") report.
//!
//! For each file size and record size the thirteen tests of IOzone's `-a` run in
//! its order, each moving one file size of data in records of the record size:
//! write (a new file: a test file on a file system is truncated first, so blocks
//! are allocated again as IOzone's fresh file would), rewrite, read, re-read,
//! random read and random write (by the engine), then backward read (the records
//! from the last to the first), record rewrite (the first record written over
//! and over), stride read (every 17th record, wrapping around: IOzone's default
//! stride of 17 records, `-j`), and fwrite, re-fwrite, fread and re-fread
//! (through a user-space buffer of one 4 KiB block as the C library's stdio
//! keeps one, module `stdio`). Auto mode covers IOzone's `-a` ranges: files 64 KiB to
//! 512 MiB, records 4 KiB to 16 MiB, records no larger than the file, and, as
//! IOzone does without `-z`, no records under 64 KiB for files over 32 MiB.
//! Figures are KiB/s (IOzone's "kBytes/sec"). Buffered by default as IOzone is;
//! O_DIRECT on request (IOzone's `-I`). Flush time is counted only on request
//! (IOzone's `-e`). This module never prints.

mod more;

use crate::engine::{self, Access, Control, DataFill, Dir, EngineKind, Limit, Rewrite, Workload};
use crate::schema::BenchReport;
use crate::table::{keys_in_order, SideBySide};
use crate::target::Target;
use raidlab_core::size::{format_size, parse_size};
use raidlab_core::{Error, Op, Result};
use serde::Serialize;
use std::fmt::Write as _;

/// IOzone's tests the engine runs, in its order and with its report titles.
pub const TESTS: [(&str, &str); 6] = [
    ("write", "Writer report"),
    ("rewrite", "Re-writer report"),
    ("read", "Reader report"),
    ("re-read", "Re-Reader report"),
    ("random read", "Random read report"),
    ("random write", "Random write report"),
];

/// IOzone's other seven tests of `-a`, after [`TESTS`], in its order and with
/// its report titles (module `more` runs them).
pub const MORE_TESTS: [(&str, &str); 7] = [
    ("bkwd read", "Backward read report"),
    ("record rewrite", "Record rewrite report"),
    ("stride read", "Stride read report"),
    ("fwrite", "Fwrite report"),
    ("re-fwrite", "Re-Fwrite report"),
    ("fread", "Fread report"),
    ("re-fread", "Re-Fread report"),
];

/// All thirteen tests, the order of [`Cell::kib_s`].
pub fn all_tests() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    TESTS.iter().chain(MORE_TESTS.iter())
}

/// How many tests a cell holds.
pub const ALL: usize = TESTS.len() + MORE_TESTS.len();

#[derive(Debug, Clone)]
pub struct IozoneConfig {
    pub file_sizes: Vec<u64>,
    pub record_sizes: Vec<u64>,
    /// Skip records under 64 KiB for files over 32 MiB (IOzone's -a without -z).
    pub auto_skip: bool,
    /// Count the flush after each write test (IOzone's -e).
    pub include_flush: bool,
    pub engine: EngineKind,
}

/// Powers of two from `lo` to `hi`.
fn doubling(lo: u64, hi: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut x = lo;
    while x <= hi {
        v.push(x);
        x *= 2;
    }
    v
}

impl IozoneConfig {
    /// IOzone's `-a` ranges.
    pub fn auto() -> Self {
        IozoneConfig {
            file_sizes: doubling(64 << 10, 512 << 20),
            record_sizes: doubling(4 << 10, 16 << 20),
            auto_skip: true,
            include_flush: false,
            engine: EngineKind::Auto,
        }
    }

    /// The (file size, record size) pairs that run.
    pub fn cells(&self) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        for &f in &self.file_sizes {
            for &r in &self.record_sizes {
                if r > f || (self.auto_skip && f > (32 << 20) && r < (64 << 10)) {
                    continue;
                }
                v.push((f, r));
            }
        }
        v
    }
}

/// Sizes given as `MIN:MAX` (powers of two between) or a comma list.
pub fn parse_sizes(what: &str, s: &str) -> Result<Vec<u64>> {
    let bad = |m: String| Error::invalid(format!("{what} '{s}': {m}"));
    let v = if let Some((lo, hi)) = s.split_once(':') {
        let (lo, hi) = (
            parse_size(lo).map_err(|e| bad(e.message))?,
            parse_size(hi).map_err(|e| bad(e.message))?,
        );
        if lo == 0 || lo > hi {
            return Err(bad("give MIN:MAX with 0 < MIN <= MAX".into()));
        }
        doubling(lo, hi)
    } else {
        s.split(',')
            .map(|x| parse_size(x).map_err(|e| bad(e.message)))
            .collect::<Result<Vec<_>>>()?
    };
    if v.is_empty() || v.contains(&0) {
        return Err(bad("sizes must be more than 0".into()));
    }
    Ok(v)
}

#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub file_size: u64,
    pub record_size: u64,
    /// KiB/s for each of [`TESTS`] then [`MORE_TESTS`], in order.
    pub kib_s: [f64; ALL],
}

#[derive(Debug, Clone, Serialize)]
pub struct IozoneResult {
    pub label: String,
    pub direct: bool,
    pub cells: Vec<Cell>,
    pub interrupted: bool,
}

/// Run the matrix on `target` (whose size must hold the largest file).
pub fn run(
    target: &Target,
    cfg: &IozoneConfig,
    control: &Control,
    on_cell: &mut dyn FnMut(u64, u64),
) -> Result<IozoneResult> {
    let cells = cfg.cells();
    if cells.is_empty() {
        return Err(Error::invalid(
            "no record size fits any file size: records must not be larger than files",
        ));
    }
    let largest = cells.iter().map(|c| c.0).max().unwrap_or(0);
    if largest > target.size {
        return Err(Error::invalid(format!(
            "the largest file size ({}) does not fit the target ({} bytes)",
            format_size(largest),
            target.size
        ))
        .on_device(target.label.clone()));
    }
    let mut out = IozoneResult {
        label: target.label.clone(),
        direct: target.direct,
        cells: Vec::new(),
        interrupted: false,
    };
    for (file, rec) in cells {
        if control.stopped() {
            break;
        }
        on_cell(file, rec);
        let mut kib_s = [0.0; ALL];
        for (i, (name, _)) in TESTS.iter().enumerate() {
            if control.stopped() {
                break;
            }
            let (access, dir) = match *name {
                "write" | "rewrite" => (Access::Seq, Dir::Write),
                "read" | "re-read" => (Access::Seq, Dir::Read),
                "random read" => (Access::Rand, Dir::Read),
                _ => (Access::Rand, Dir::Write),
            };
            if *name == "write" {
                fresh_file(target, largest)?;
            }
            let w = Workload {
                access,
                dir,
                bs: rec as usize,
                offset: 0,
                size: file,
                threads: 1,
                qd: 1,
                limit: Limit {
                    time: None,
                    bytes: Some(file / rec * rec),
                },
                data: DataFill::Random,
                rewrite: Rewrite::Never,
                random_map: false,
                seed: i as u64,
                split: true,
                engine: cfg.engine,
            };
            let m = engine::run(target, &w, control)?;
            // The engine's own clock starts when its workers are ready, so thread
            // start-up (large next to a 64 KiB file) is not counted, as IOzone
            // times only its I/O calls.
            let mut secs = m.elapsed.as_secs_f64();
            if cfg.include_flush && dir == Dir::Write {
                // Timed by the target's clock (virtual on a simulated target).
                let t0 = target.now();
                target.volume.flush()?;
                secs += (target.now() - t0).as_secs_f64();
            }
            let secs = secs.max(1e-9);
            kib_s[i] = m.main().bytes as f64 / 1024.0 / secs;
        }
        for (j, (name, _)) in MORE_TESTS.iter().enumerate() {
            if control.stopped() {
                break;
            }
            if *name == "fwrite" {
                fresh_file(target, largest)?;
            }
            kib_s[TESTS.len() + j] = more::run(target, name, file, rec, cfg.include_flush)?;
        }
        out.cells.push(Cell {
            file_size: file,
            record_size: rec,
            kib_s,
        });
    }
    out.interrupted = control.stopped();
    Ok(out)
}

/// Give a file system test file fresh blocks (IOzone writes a new file); devices,
/// arrays and memory are written in place.
fn fresh_file(target: &Target, size: u64) -> Result<()> {
    let Some(f) = &target.file else { return Ok(()) };
    let Ok(meta) = f.metadata() else {
        return Ok(());
    };
    if !meta.is_file() {
        return Ok(());
    }
    let name = target.volume.name();
    f.set_len(0)
        .and_then(|_| f.set_len(size.max(meta.len())))
        .map_err(|e| Error::io(Op::Write, name, e).at(0, size))
}

/// IOzone's `-R` report: one table per test, file sizes down, record sizes across
/// (both in KiB), KiB/s in the cells.
pub fn excel_report(r: &IozoneResult) -> String {
    let mut recs: Vec<u64> = r.cells.iter().map(|c| c.record_size).collect();
    recs.sort_unstable();
    recs.dedup();
    let mut files: Vec<u64> = r.cells.iter().map(|c| c.file_size).collect();
    files.sort_unstable();
    files.dedup();
    let mut s = String::from("Excel output is below:\n");
    for (i, (_, title)) in all_tests().enumerate() {
        let _ = write!(s, "\n\"{title}\"\n      ");
        for rec in &recs {
            let _ = write!(s, "  \"{}\"", rec >> 10);
        }
        s.push('\n');
        for f in &files {
            let _ = write!(s, "\"{}\"", f >> 10);
            for rec in &recs {
                match r
                    .cells
                    .iter()
                    .find(|c| c.file_size == *f && c.record_size == *rec)
                {
                    Some(c) => {
                        let _ = write!(s, "  {:.0}", c.kib_s[i]);
                    }
                    None => s.push_str("  "),
                }
            }
            s.push('\n');
        }
    }
    s
}

/// IOzone's own `-a` text layout: one line per file and record size (both in
/// KiB), the thirteen tests across in its order, kBytes/sec in whole numbers,
/// under its two-line header.
pub fn iozone_text(r: &IozoneResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>16}{:>8}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}",
        "", "", "", "", "", "", "random", "random", "bkwd", "record", "stride", "", "", "", ""
    );
    let _ = writeln!(
        s,
        "{:>16}{:>8}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}",
        "kB",
        "reclen",
        "write",
        "rewrite",
        "read",
        "reread",
        "read",
        "write",
        "read",
        "rewrite",
        "read",
        "fwrite",
        "frewrite",
        "fread",
        "freread"
    );
    for c in &r.cells {
        let _ = write!(s, "{:>16}{:>8}", c.file_size >> 10, c.record_size >> 10);
        for v in c.kib_s {
            let _ = write!(s, "{:>9.0}", v);
        }
        s.push('\n');
    }
    s
}

/// The side-by-side text table: a row per test, file size and record size (in
/// IOzone's order), a column of KiB/s per target; "-" where a target has no
/// figure for the cell (an interrupted run).
pub fn table(results: &[IozoneResult]) -> String {
    let mut t = SideBySide::new(
        &[("test", 12), ("file", 9), ("record", 9)],
        results.iter().map(|r| r.label.clone()).collect(),
        &[("kBytes/sec", 16)],
    );
    let cells = keys_in_order(results.iter().map(|r| {
        r.cells
            .iter()
            .map(|c| (c.file_size, c.record_size))
            .collect()
    }));
    for (i, (test, _)) in all_tests().enumerate() {
        for &(file, rec) in &cells {
            let values = results
                .iter()
                .map(|r| {
                    r.cells
                        .iter()
                        .find(|c| (c.file_size, c.record_size) == (file, rec))
                        .map(|c| vec![format!("{:.0}", c.kib_s[i])])
                })
                .collect();
            t.row(
                vec![test.to_string(), format_size(file), format_size(rec)],
                values,
            );
        }
    }
    t.render()
}

/// The raidlab-bench/1 report: group = test, test = "FILE/RECORD".
pub fn report(results: &[IozoneResult]) -> BenchReport {
    let mut rep = BenchReport::new("iozone", results.iter().map(|r| r.label.clone()).collect());
    for r in results {
        for c in &r.cells {
            let test = format!(
                "{}/{}",
                format_size(c.file_size),
                format_size(c.record_size)
            );
            for (i, (name, _)) in all_tests().enumerate() {
                rep.push(name, &test, &r.label, "KB/s", c.kib_s[i]);
            }
        }
    }
    rep.details = serde_json::json!({ "results": results });
    rep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_mode_ranges_follow_iozone() {
        let cells = IozoneConfig::auto().cells();
        assert_eq!(cells.first(), Some(&(64 << 10, 4 << 10)));
        assert!(cells.contains(&(512 << 20, 16 << 20)));
        assert!(cells.contains(&(32 << 20, 4 << 10)));
        assert!(!cells.contains(&(64 << 20, 32 << 10)));
        assert!(cells.contains(&(64 << 20, 64 << 10)));
        assert!(cells.iter().all(|(f, r)| r <= f));
    }

    #[test]
    fn sizes_parse_as_ranges_or_lists() {
        assert_eq!(parse_sizes("x", "4K:16K").unwrap(), [4096, 8192, 16384]);
        assert_eq!(parse_sizes("x", "1M,16M").unwrap(), [1 << 20, 16 << 20]);
        let e = parse_sizes("--file-sizes", "8K:4K")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--file-sizes '8K:4K'"), "{e}");
    }

    #[test]
    fn excel_report_is_a_matrix_per_test() {
        let r = IozoneResult {
            label: "t".into(),
            direct: false,
            cells: vec![
                Cell {
                    file_size: 64 << 10,
                    record_size: 4 << 10,
                    kib_s: [
                        1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0,
                    ],
                },
                Cell {
                    file_size: 128 << 10,
                    record_size: 8 << 10,
                    kib_s: [7.0; ALL],
                },
            ],
            interrupted: false,
        };
        let s = excel_report(&r);
        assert!(
            s.contains("\"Writer report\"\n        \"4\"  \"8\"\n\"64\"  1  \n\"128\"    7\n"),
            "{s}"
        );
        assert!(s.contains("\"Random write report\""));
        assert!(
            s.contains("\"Re-Fread report\"\n        \"4\"  \"8\"\n\"64\"  13  \n"),
            "{s}"
        );
        // IOzone's -a layout: one line per cell, thirteen figures across.
        let t = iozone_text(&r);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[1]
                .trim_start()
                .starts_with("kB  reclen    write  rewrite"),
            "{t}"
        );
        assert!(
            lines[1]
                .trim_end()
                .ends_with("fwrite frewrite    fread  freread"),
            "{t}"
        );
        let row: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            row,
            ["64", "4", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13"]
        );
    }
}
