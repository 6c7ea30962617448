//! The result schema `raidlab-bench/1` (the contract with the benchmark runners) and
//! its strict reading: an unknown format, a wrong type, a row naming a target the
//! file does not list or a measurement given twice is an error naming the file and
//! the JSON path, never a silently wrong chart.

use crate::error::ReportError;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The only `format` this crate reads.
pub const FORMAT: &str = "raidlab-bench/1";

/// One result file: one benchmark run of one suite over one or more targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultFile {
    /// Where the file came from (a path as the user gave it, or any name); used in
    /// errors, in the page's list of sources and to tell apart identical target
    /// labels from different files. Not part of the JSON.
    #[serde(skip)]
    pub source: String,
    pub format: String,
    pub suite: String,
    /// RFC 3339 time of the run. Shown, never interpreted, so it is not checked.
    #[serde(default)]
    pub created: Option<String>,
    /// The machine the run was made on. Shown only, so every field may be absent.
    #[serde(default)]
    pub host: Host,
    /// Target labels in the order the run measured them; the first is the baseline
    /// of the ratio columns.
    pub targets: Vec<String>,
    pub rows: Vec<Row>,
    /// The target the others are compared with (`--baseline`); absent: the first
    /// listed.
    #[serde(default)]
    pub baseline: Option<String>,
    /// How each target was measured (absent in results written before raidlab
    /// recorded it; then the page says "not recorded").
    #[serde(default)]
    pub conditions: Vec<Conditions>,
    /// The simulated targets; only their labels are read, to say which figures
    /// are virtual.
    #[serde(default)]
    pub simulated: Vec<Simulated>,
    /// `raidlab seeds` results: the article's findings with their verdicts,
    /// the error figures and the simulated configurations (absent otherwise).
    #[serde(default)]
    pub seed: Option<crate::seed::Seed>,
    // `details` (suite-specific) is deliberately not read: unknown fields are
    // ignored, so runners can add to it without breaking reports.
}

/// The machine a result was measured on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Host {
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub cpus: Option<u64>,
    #[serde(default)]
    pub kernel: Option<String>,
}

/// How one target was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conditions {
    pub target: String,
    /// `O_DIRECT`, `page cache`, `in memory`, `NBD export` or `simulated`.
    pub io: String,
    /// Bytes of the test file or region.
    pub test_size: u64,
    #[serde(default)]
    pub runs: Option<u64>,
    #[serde(default)]
    pub measure_s: Option<f64>,
    pub engine: String,
    #[serde(default)]
    pub simulated: bool,
    /// `bench job`: the job section these conditions are of.
    #[serde(default)]
    pub job: Option<String>,
    /// `bench job`: the job's workload without its target (what jobs on
    /// different targets are paired by).
    #[serde(default)]
    pub workload: Option<String>,
    /// Requests in flight per job, where recorded.
    #[serde(default)]
    pub queue_depth: Option<u64>,
}

/// A simulated target of a result (its model is not read here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Simulated {
    pub target: String,
}

/// One measurement: the value of one metric of one test of one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub suite: String,
    /// The category the articles' graphs group by, e.g. `SEQ1M Q8T1`.
    pub group: String,
    /// e.g. `read`, `write`, `Block output`.
    pub test: String,
    pub target: String,
    /// The unit, treated as an opaque label: `MB/s`, `IOPS`, `latency µs`, `K/sec`...
    pub metric: String,
    pub value: f64,
    pub higher_is_better: bool,
}

impl Row {
    /// What identifies a measurement; two rows of one file must not share it.
    fn key(&self) -> (&str, &str, &str, &str, &str) {
        (
            &self.suite,
            &self.group,
            &self.test,
            &self.target,
            &self.metric,
        )
    }
}

impl ResultFile {
    /// Read one result from JSON text. `source` names it in errors and in the page.
    pub fn from_json(source: &str, text: &str) -> Result<ResultFile, ReportError> {
        // A byte-order mark (an editor on Windows) is not JSON but not an error
        // worth refusing a report for.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ReportError::Syntax {
                file: source.to_string(),
                detail: e.to_string(),
            })?;
        let invalid = |path: &str, message: String| ReportError::Invalid {
            file: source.to_string(),
            path: path.to_string(),
            message,
        };
        // The format is checked before anything else so that a file of a future
        // format is reported as such, not as a confusing missing-field error.
        let Some(obj) = value.as_object() else {
            return Err(invalid(
                "$",
                format!(
                    "expected a JSON object (one raidlab-bench result), found {}",
                    kind(&value)
                ),
            ));
        };
        match obj.get("format") {
            None => {
                return Err(invalid(
                    "$.format",
                    format!("missing: this is not a raidlab-bench result (those start with \"format\": \"{FORMAT}\")"),
                ))
            }
            Some(serde_json::Value::String(f)) if f == FORMAT => {}
            Some(other) => {
                return Err(ReportError::UnknownFormat {
                    file: source.to_string(),
                    found: other.to_string(),
                    expected: FORMAT,
                })
            }
        }
        let mut file: ResultFile = serde_path_to_error::deserialize(&value).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." {
                "$".to_string()
            } else {
                format!("$.{path}")
            };
            invalid(&path, plain_types(&e.into_inner().to_string()))
        })?;
        file.source = source.to_string();
        file.check()?;
        Ok(file)
    }

    /// The checks the type system cannot make.
    fn check(&self) -> Result<(), ReportError> {
        let invalid = |path: String, message: String| ReportError::Invalid {
            file: self.source.clone(),
            path,
            message,
        };
        if self.suite.trim().is_empty() {
            return Err(invalid(
                "$.suite".into(),
                "is empty: name the benchmark suite (cdm, bonnie, iozone, job, replay)".into(),
            ));
        }
        let mut listed: HashMap<&str, usize> = HashMap::new();
        for (i, t) in self.targets.iter().enumerate() {
            if t.trim().is_empty() {
                return Err(invalid(
                    format!("$.targets[{i}]"),
                    "is an empty target label: every target needs a name to show in charts".into(),
                ));
            }
            if let Some(first) = listed.insert(t, i) {
                return Err(invalid(
                    format!("$.targets[{i}]"),
                    format!("{t:?} is listed twice (also at $.targets[{first}]): give each target a distinct label"),
                ));
            }
        }
        if let Some(b) = &self.baseline {
            if !listed.contains_key(b.as_str()) {
                return Err(invalid(
                    "$.baseline".into(),
                    format!(
                        "{b:?} is not one of the file's $.targets {:?}: the baseline must be a measured target",
                        self.targets
                    ),
                ));
            }
        }
        for (i, c) in self.conditions.iter().enumerate() {
            if !listed.contains_key(c.target.as_str()) {
                return Err(invalid(
                    format!("$.conditions[{i}].target"),
                    format!(
                        "{:?} is not one of the file's $.targets {:?}",
                        c.target, self.targets
                    ),
                ));
            }
        }
        if let Some(seed) = &self.seed {
            seed.check().map_err(|(path, m)| invalid(path, m))?;
        }
        let mut seen: HashMap<(&str, &str, &str, &str, &str), usize> = HashMap::new();
        for (i, row) in self.rows.iter().enumerate() {
            for (field, text) in [
                ("suite", &row.suite),
                ("group", &row.group),
                ("test", &row.test),
                ("metric", &row.metric),
            ] {
                if text.trim().is_empty() {
                    return Err(invalid(
                        format!("$.rows[{i}].{field}"),
                        "is empty: charts need it as a label".into(),
                    ));
                }
            }
            if !listed.contains_key(row.target.as_str()) {
                return Err(invalid(
                    format!("$.rows[{i}].target"),
                    format!(
                        "{:?} is not one of the file's $.targets {:?}: a row must measure a listed target",
                        row.target, self.targets
                    ),
                ));
            }
            // serde_json never yields NaN or infinity, but a ResultFile built in
            // code can hold them; a chart cannot.
            if !row.value.is_finite() {
                return Err(invalid(
                    format!("$.rows[{i}].value"),
                    format!("{} is not a finite number", row.value),
                ));
            }
            if let Some(first) = seen.insert(row.key(), i) {
                return Err(invalid(
                    format!("$.rows[{i}]"),
                    format!("repeats $.rows[{first}] (same suite, group, test, target and metric): each measurement must appear once; average repeated runs before writing the result"),
                ));
            }
        }
        Ok(())
    }
}

/// serde names Rust types (`expected f64`); a person editing JSON thinks in JSON's.
fn plain_types(msg: &str) -> String {
    msg.replace("expected f64", "expected a number")
        .replace("expected u64", "expected a whole number")
        .replace("expected a sequence", "expected an array")
        .replace("expected struct Row", "expected an object (one row)")
        .replace("expected struct Host", "expected an object")
        .replace("expected struct ResultFile", "expected an object")
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"format":"raidlab-bench/1","suite":"cdm","created":"2026-11-21T10:00:00Z",
        "host":{"hostname":"h","cpus":4,"kernel":"6.1"},"targets":["a","b"],
        "rows":[{"suite":"cdm","group":"SEQ1M Q8T1","test":"read","target":"a","metric":"MB/s","value":1.5,"higher_is_better":true},
                {"suite":"cdm","group":"SEQ1M Q8T1","test":"read","target":"b","metric":"MB/s","value":3,"higher_is_better":true}],
        "details":{"anything":[1,2,3]}}"#;

    fn err(text: &str) -> String {
        ResultFile::from_json("r.json", text)
            .unwrap_err()
            .to_string()
    }

    fn with(path: &[&str], new: serde_json::Value) -> String {
        let mut v: serde_json::Value = serde_json::from_str(GOOD).unwrap();
        let mut at = &mut v;
        for p in &path[..path.len() - 1] {
            at = match p.parse::<usize>() {
                Ok(i) => &mut at[i],
                Err(_) => &mut at[*p],
            };
        }
        let last = path[path.len() - 1];
        match last.parse::<usize>() {
            Ok(i) => at[i] = new,
            Err(_) => at[last] = new,
        }
        v.to_string()
    }

    #[test]
    fn good_file_reads_and_ignores_details() {
        let f = ResultFile::from_json("r.json", GOOD).unwrap();
        assert_eq!(f.source, "r.json");
        assert_eq!(f.rows.len(), 2);
        assert_eq!(f.rows[1].value, 3.0);
        assert_eq!(f.host.cpus, Some(4));
    }

    #[test]
    fn byte_order_mark_is_accepted() {
        let f = ResultFile::from_json("r.json", &format!("\u{feff}{GOOD}")).unwrap();
        assert_eq!(f.rows.len(), 2);
    }

    #[test]
    fn host_and_created_may_be_absent() {
        let mut v: serde_json::Value = serde_json::from_str(GOOD).unwrap();
        v.as_object_mut().unwrap().remove("host");
        v.as_object_mut().unwrap().remove("created");
        let f = ResultFile::from_json("r.json", &v.to_string()).unwrap();
        assert_eq!(f.host, Host::default());
    }

    #[test]
    fn syntax_error_names_file_and_line() {
        let e = err("{\"format\": \"raidlab-bench/1\",\n \"rows\": [");
        assert!(e.starts_with("r.json: not valid JSON"), "{e}");
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn unknown_format_is_named() {
        let e = err(&with(&["format"], "raidlab-bench/2".into()));
        assert!(
            e.contains("r.json: unknown result format \"raidlab-bench/2\" at $.format"),
            "{e}"
        );
        assert!(e.contains("raidlab-bench/1"), "{e}");
        let e = err(&with(&["format"], 7.into()));
        assert!(e.contains("unknown result format 7 at $.format"), "{e}");
    }

    #[test]
    fn missing_format_and_non_object() {
        let mut v: serde_json::Value = serde_json::from_str(GOOD).unwrap();
        v.as_object_mut().unwrap().remove("format");
        let e = err(&v.to_string());
        assert!(e.contains("at $.format: missing"), "{e}");
        let e = err("[1,2]");
        assert!(e.contains("at $: expected a JSON object"), "{e}");
        assert!(e.contains("found an array"), "{e}");
    }

    #[test]
    fn wrong_type_names_json_path() {
        let e = err(&with(&["rows", "1", "value"], "fast".into()));
        assert!(
            e.starts_with("r.json: at $.rows[1].value: invalid type: string"),
            "{e}"
        );
        let e = err(&with(
            &["rows", "0", "higher_is_better"],
            serde_json::Value::Null,
        ));
        assert!(e.contains("at $.rows[0].higher_is_better"), "{e}");
        let mut v: serde_json::Value = serde_json::from_str(GOOD).unwrap();
        v["rows"][0].as_object_mut().unwrap().remove("metric");
        let e = err(&v.to_string());
        assert!(e.contains("at $.rows[0]: missing field `metric`"), "{e}");
        let e = err(&with(&["targets"], "a".into()));
        assert!(
            e.contains("at $.targets: invalid type: string \"a\", expected an array"),
            "{e}"
        );
        let e = err(&with(&["rows", "0"], 5.into()));
        assert!(
            e.contains("at $.rows[0]: invalid type: integer `5`, expected an object (one row)"),
            "{e}"
        );
        let e = err(&with(&["host", "cpus"], (-1).into()));
        assert!(
            e.contains("at $.host.cpus: invalid value: integer `-1`, expected a whole number"),
            "{e}"
        );
    }

    #[test]
    fn unlisted_target_is_refused() {
        let e = err(&with(&["rows", "1", "target"], "c".into()));
        assert!(
            e.contains("at $.rows[1].target: \"c\" is not one of the file's $.targets"),
            "{e}"
        );
    }

    #[test]
    fn duplicate_measurement_and_target_refused() {
        let e = err(&with(&["rows", "1", "target"], "a".into()));
        assert!(e.contains("at $.rows[1]: repeats $.rows[0]"), "{e}");
        let e = err(&with(&["targets"], serde_json::json!(["a", "b", "a"])));
        assert!(e.contains("at $.targets[2]: \"a\" is listed twice"), "{e}");
    }

    #[test]
    fn baseline_and_conditions_are_read_and_checked() {
        let cond = serde_json::json!([{"target":"b","io":"O_DIRECT","test_size":1073741824u64,
            "runs":5,"measure_s":5.0,"engine":"io_uring","simulated":false}]);
        let text = with(&["conditions"], cond);
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["baseline"] = "b".into();
        let f = ResultFile::from_json("r.json", &v.to_string()).unwrap();
        assert_eq!(f.baseline.as_deref(), Some("b"));
        assert_eq!(f.conditions[0].runs, Some(5));
        v["baseline"] = "z".into();
        let e = err(&v.to_string());
        assert!(e.contains("at $.baseline: \"z\" is not one of"), "{e}");
        let e = err(&with(
            &["conditions"],
            serde_json::json!([{"target":"q","io":"x","test_size":1,"engine":"e"}]),
        ));
        assert!(e.contains("at $.conditions[0].target"), "{e}");
    }

    #[test]
    fn empty_labels_refused() {
        let e = err(&with(&["rows", "0", "group"], " ".into()));
        assert!(e.contains("at $.rows[0].group: is empty"), "{e}");
        let e = err(&with(&["targets"], serde_json::json!(["a", ""])));
        assert!(
            e.contains("at $.targets[1]: is an empty target label"),
            "{e}"
        );
    }
}
