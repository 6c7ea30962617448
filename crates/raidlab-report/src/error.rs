//! Errors of the report: each names the file and, for bad content, the JSON path of
//! the problem (`$.rows[3].value`), and says what to do about it.

use std::path::PathBuf;

/// Why a report could not be made. Nothing has been written when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// No input files were given.
    #[error(
        "no result files given: pass one or more RESULT.json files written by `raidlab bench`"
    )]
    NoInputs,
    /// An input file could not be read.
    #[error("cannot read result file {file}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// An input file is not JSON at all (or is cut short).
    #[error("{file}: not valid JSON ({detail}); a raidlab-bench result is one JSON object, and an interrupted run can leave the file cut short: run the benchmark again")]
    Syntax { file: String, detail: String },
    /// The file is JSON but says it is a result format this raidlab does not read.
    #[error("{file}: unknown result format {found} at $.format: this raidlab reads \"{expected}\" results; report them with the raidlab that wrote them, or run the benchmark again with this one")]
    UnknownFormat {
        file: String,
        /// What the file holds at `$.format`, as JSON (so a number shows as one).
        found: String,
        expected: &'static str,
    },
    /// The file's content breaks the result schema at `path`.
    #[error("{file}: at {path}: {message}")]
    Invalid {
        file: String,
        /// JSONPath-style location, e.g. `$.rows[3].value`.
        path: String,
        message: String,
    },
    /// The same input file was given twice (its rows would be counted twice).
    #[error("{file} is given more than once; give each result file once")]
    DuplicateInput { file: String },
    /// All inputs together hold no measurement.
    #[error("the result files hold no rows (no measurements), so there is nothing to chart: check that the benchmark ran to the end")]
    NoRows,
    /// `--baseline` names no target of the results.
    #[error("--baseline {baseline} is not one of the targets ({targets}): give one of them as the report shows it")]
    UnknownBaseline { baseline: String, targets: String },
    /// An output path names one of the inputs.
    #[error("{path} is one of the input result files; refusing to overwrite it: choose another output file")]
    OutputIsInput { path: PathBuf },
    /// `--output` and `--csv` name the same file (one would overwrite the other).
    #[error("{path} is named both as the page and as the CSV: give the CSV another name")]
    SameOutput { path: PathBuf },
    /// Writing an output failed. Outputs are written to a temporary file and renamed
    /// into place, so a failed write leaves no half-written report behind.
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
