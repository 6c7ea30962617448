//! Text tables with one column group per target, the way the articles print
//! "one disk vs RAID 0 vs RAID 1": key columns on the left (test, direction, ...),
//! then for each target the same columns under its name. Every suite's
//! side-by-side table (CrystalDiskMark, Bonnie++, IOzone) is drawn here, so they
//! read alike. This module never prints; it returns the text.

use std::fmt::Write as _;

/// A column: its heading and its width in characters.
pub type Column = (&'static str, usize);

/// One target's values for a row, one per column; `None`: no figure ("-").
pub type Cells = Option<Vec<String>>;

/// A side-by-side table being built: [`SideBySide::row`] adds a row,
/// [`SideBySide::render`] draws it.
#[derive(Debug, Clone)]
pub struct SideBySide {
    keys: Vec<Column>,
    targets: Vec<String>,
    columns: Vec<Column>,
    rows: Vec<(Vec<String>, Vec<Cells>)>,
}

impl SideBySide {
    /// A table with these key columns (left-aligned), one group of `columns`
    /// (right-aligned) per target, in the order given.
    pub fn new(keys: &[Column], targets: Vec<String>, columns: &[Column]) -> Self {
        SideBySide {
            keys: keys.to_vec(),
            targets,
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Add a row: its key cells, then per target the values of its columns, or
    /// `None` where that target has no figure for the row (drawn as "-").
    pub fn row(&mut self, key: Vec<String>, cells: Vec<Cells>) {
        self.rows.push((key, cells));
    }

    /// Characters one target's group takes (its columns and the spaces between).
    fn group_width(&self) -> usize {
        self.columns.iter().map(|c| c.1).sum::<usize>() + self.columns.len().saturating_sub(1)
    }

    fn keys_line(&self, s: &mut String, cells: &[&str]) {
        for (i, (_, w)) in self.keys.iter().enumerate() {
            if i > 0 {
                s.push(' ');
            }
            let _ = write!(s, "{:<w$}", cells.get(i).copied().unwrap_or(""), w = *w);
        }
    }

    fn values(&self, s: &mut String, cells: &[&str]) {
        s.push_str(" |");
        for (i, (_, w)) in self.columns.iter().enumerate() {
            let _ = write!(s, " {:>w$}", cells.get(i).copied().unwrap_or(""), w = *w);
        }
    }

    /// The table as text: a line of target names, a line of column headings, a
    /// line per row.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let heads: Vec<&str> = self.keys.iter().map(|k| k.0).collect();
        let gw = self.group_width();
        self.keys_line(&mut s, &heads);
        for t in &self.targets {
            let _ = write!(s, " | {:<gw$}", truncate(t, gw));
        }
        s.push('\n');
        self.keys_line(&mut s, &[]);
        let titles: Vec<&str> = self.columns.iter().map(|c| c.0).collect();
        for _ in &self.targets {
            self.values(&mut s, &titles);
        }
        s.push('\n');
        for (key, cells) in &self.rows {
            let key: Vec<&str> = key.iter().map(String::as_str).collect();
            self.keys_line(&mut s, &key);
            for i in 0..self.targets.len() {
                match cells.get(i).and_then(Option::as_ref) {
                    Some(v) => {
                        let v: Vec<&str> = v.iter().map(String::as_str).collect();
                        self.values(&mut s, &v);
                    }
                    None => self.values(&mut s, &["-"]),
                }
            }
            s.push('\n');
        }
        s
    }
}

/// The distinct keys of several targets' results in first-seen order: the first
/// target's, then any that only later targets have.
pub fn keys_in_order<K: PartialEq + Clone>(per_target: impl IntoIterator<Item = Vec<K>>) -> Vec<K> {
    let mut keys: Vec<K> = Vec::new();
    for ks in per_target {
        for k in ks {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys
}

/// `s` cut to `n` characters from the left ("…" first), so the distinctive end of
/// a long path stays visible.
pub fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let skip = s.chars().count() - (n - 1);
        format!("…{}", s.chars().skip(skip).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_per_target_and_a_dash_where_one_has_no_figure() {
        let mut t = SideBySide::new(
            &[("test", 6)],
            vec!["disk".into(), "raid0".into()],
            &[("MB/s", 7), ("IOPS", 5)],
        );
        t.row(
            vec!["read".into()],
            vec![
                Some(vec!["1.50".into(), "3".into()]),
                Some(vec!["2.25".into(), "4".into()]),
            ],
        );
        t.row(
            vec!["write".into()],
            vec![None, Some(vec!["9.00".into(), "8".into()])],
        );
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(lines[0], "test   | disk          | raid0        ");
        assert_eq!(lines[1], "       |    MB/s  IOPS |    MB/s  IOPS");
        assert_eq!(lines[2], "read   |    1.50     3 |    2.25     4");
        assert_eq!(lines[3], "write  |       -       |    9.00     8");
    }

    #[test]
    fn long_names_keep_their_end() {
        assert_eq!(truncate("/very/long/path/disk0", 8), "…h/disk0");
        assert_eq!(truncate("short", 8), "short");
        assert_eq!(keys_in_order([vec![1, 2], vec![2, 3, 1]]), vec![1, 2, 3]);
    }
}
