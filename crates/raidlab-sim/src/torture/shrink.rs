//! The shrinker: a failing run cut down to the few operations that still
//! make it fail the same way, and saved as a script that a test replays.
//!
//! A run draws everything from its random streams in order, so leaving an
//! operation out would shift every draw after it and the run would become
//! another run. Instead a first pass records where each operation's draws
//! begin in every stream (ChaCha's word position: the main stream, and the
//! stale-member, misdirection and cache-tier streams when the run has
//! them). A replay carries out only the kept operations, each from its
//! recorded positions, so a kept operation draws exactly the numbers it
//! drew in the full run; what it then does can differ, because the array it
//! meets is the one the kept operations left. The configuration and the
//! array's creation draw from the streams' start, as in every run.
//!
//! It decides which operations a reduced run keeps: a greedy delta
//! debugging (drop halves, then quarters, down to single operations, until
//! no single operation can go) under "the run still fails with a violation
//! of the same kind" ([`kind_of`]). It never changes what an operation does
//! or what counts as a violation, and a replay with every operation kept is
//! the full run, hash for hash (tested).

use super::run::{run_scripted, Plant, Rig};
use super::{Options, RunResult};
use raidlab_layout::Level;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where one operation's draws begin in each of the run's random streams
/// (32-bit words drawn before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// The operation's index in the full run.
    pub op: usize,
    pub main: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misdirect: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inside: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u64>,
}

/// What a run does with its operations' starts.
#[derive(Debug, Clone, Default)]
pub enum Script {
    /// Every operation, nothing recorded (every run but the shrinker's).
    #[default]
    Off,
    /// Every operation, each one's start recorded.
    Record(Vec<Mark>),
    /// Only these operations (sorted by index), each from its start.
    Replay(Vec<Mark>),
}

fn pos(r: &ChaCha8Rng) -> u64 {
    // A run draws some thousands of words; 2^64 would take centuries.
    u64::try_from(r.get_word_pos()).unwrap_or(u64::MAX)
}

impl Rig {
    /// At the start of operation `op`: record where the streams stand, or
    /// (replaying) move them to where `op` began in the full run. False:
    /// `op` is left out.
    pub(super) fn script_step(&mut self, op: usize) -> bool {
        match &self.script {
            Script::Off => true,
            Script::Record(_) => {
                let m = Mark {
                    op,
                    main: pos(&self.rng),
                    stale: self.stale.as_ref().map(pos),
                    misdirect: self.misdirect.as_ref().map(pos),
                    tier: self.tier.as_ref().map(|t| pos(&t.rng)),
                    inside: self.inside.as_ref().map(pos),
                    depth: self.depth.as_ref().map(pos),
                };
                if let Script::Record(marks) = &mut self.script {
                    marks.push(m);
                }
                true
            }
            Script::Replay(kept) => {
                let Ok(i) = kept.binary_search_by_key(&op, |m| m.op) else {
                    return false;
                };
                let m = kept[i];
                self.rng.set_word_pos(u128::from(m.main));
                if let (Some(r), Some(p)) = (self.stale.as_mut(), m.stale) {
                    r.set_word_pos(u128::from(p));
                }
                if let (Some(r), Some(p)) = (self.misdirect.as_mut(), m.misdirect) {
                    r.set_word_pos(u128::from(p));
                }
                if let (Some(t), Some(p)) = (self.tier.as_mut(), m.tier) {
                    t.rng.set_word_pos(u128::from(p));
                }
                if let (Some(r), Some(p)) = (self.inside.as_mut(), m.inside) {
                    r.set_word_pos(u128::from(p));
                }
                if let (Some(r), Some(p)) = (self.depth.as_mut(), m.depth) {
                    r.set_word_pos(u128::from(p));
                }
                true
            }
        }
    }
}

/// The kind of a violation, what two runs must share to fail "the same
/// way": its words before the first ": " or " (", every number as '#'
/// (offsets, counts and devices differ between a run and its shrunk form).
pub fn kind_of(what: &str) -> String {
    let head = [": ", " ("]
        .iter()
        .filter_map(|s| what.find(s))
        .min()
        .map_or(what, |i| &what[..i]);
    let mut out = String::with_capacity(head.len());
    for c in head.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Run `run` of `opts` recording each operation's start: the result and
/// the marks of the operations it carried out (up to its violation).
pub fn record(opts: &Options, run: u64, plant: Option<Plant>) -> (RunResult, Vec<Mark>) {
    let (result, rig) = run_scripted(opts, run, plant, Script::Record(Vec::new()));
    let marks = match rig.script {
        Script::Record(m) => m,
        Script::Off | Script::Replay(_) => Vec::new(),
    };
    (result, marks)
}

/// Run `run` of `opts` carrying out only the operations of `kept` (sorted
/// by index), each from its recorded start; the trace keeps every event.
pub fn replay(opts: &Options, run: u64, plant: Option<Plant>, kept: &[Mark]) -> RunResult {
    let mut kept = kept.to_vec();
    kept.sort_by_key(|m| m.op);
    run_scripted(opts, run, plant, Script::Replay(kept)).0
}

/// A failing run and its shrunk form.
#[derive(Debug, Clone)]
pub struct Shrunk {
    pub original: RunResult,
    /// Operations the full run carried out (up to its violation).
    pub original_ops: usize,
    /// The kind both runs' violations share.
    pub kind: String,
    pub kept: Vec<Mark>,
    /// The replay of `kept`: it fails with a violation of `kind`.
    pub result: RunResult,
    /// Replays tried.
    pub trials: usize,
}

/// Shrink run `run` of `opts` (with `plant`, for the planted bugs' tests):
/// `None` when the run passes. At most `budget` replays are tried; the
/// operations kept then are the smallest failing set found so far.
pub fn shrink(opts: &Options, run: u64, plant: Option<Plant>, budget: usize) -> Option<Shrunk> {
    let (original, marks) = record(opts, run, plant);
    let kind = kind_of(&original.violation.as_ref()?.what);
    let original_ops = marks.len();
    let mut trials = 0;
    let fails = |cand: &[Mark]| {
        replay(opts, run, plant, cand)
            .violation
            .is_some_and(|v| kind_of(&v.what) == kind)
    };
    let mut keep = marks;
    let mut chunk = (keep.len() / 2).max(1);
    loop {
        let mut dropped = false;
        let mut i = 0;
        while i < keep.len() && trials < budget {
            let end = (i + chunk).min(keep.len());
            let cand: Vec<Mark> = keep[..i].iter().chain(&keep[end..]).copied().collect();
            trials += 1;
            if fails(&cand) {
                keep = cand;
                dropped = true;
            } else {
                i = end;
            }
        }
        if trials >= budget || (chunk == 1 && !dropped) {
            break;
        }
        chunk = (chunk / 2).max(1);
    }
    let result = replay(opts, run, plant, &keep);
    Some(Shrunk {
        original,
        original_ops,
        kind,
        kept: keep,
        result,
        trials,
    })
}

/// Whether a saved run still fails (an open gap) or must pass (fixed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Open,
    Fixed,
}

/// A shrunk run saved as a regression test (TOML; the test
/// `tests/regressions.rs` replays every one).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Saved {
    pub seed: u64,
    pub run: u64,
    /// The full run's operation count (the index of its planted bug, if
    /// any, and where its end phase begins).
    pub ops: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    #[serde(default)]
    pub skip_known_gaps: bool,
    #[serde(default)]
    pub stale_members: bool,
    #[serde(default)]
    pub cache_tier: bool,
    #[serde(default)]
    pub misdirected: bool,
    #[serde(default)]
    pub cuts_inside: bool,
    #[serde(default)]
    pub queue_depths: bool,
    /// The violation's kind ([`kind_of`]).
    pub violation: String,
    pub status: Status,
    /// What the run shows, in a person's words (the gap, or the fix).
    #[serde(default)]
    pub note: String,
    /// The shrunk run's events when it was saved (written as comments
    /// above the fields, for a person; not read back).
    #[serde(skip)]
    pub trace: Vec<String>,
    pub keep: Vec<Mark>,
}

impl Saved {
    /// `s` as saved, open: it fails today.
    pub fn from_shrunk(opts: &Options, s: &Shrunk) -> Saved {
        Saved {
            seed: s.original.seed,
            run: s.original.run,
            ops: opts.ops,
            level: opts.level.map(|l| l.name().to_string()),
            skip_known_gaps: opts.skip_known_gaps,
            stale_members: opts.stale_members,
            cache_tier: opts.cache_tier,
            misdirected: opts.misdirected,
            cuts_inside: opts.cuts_inside,
            queue_depths: opts.queue_depths,
            violation: s.kind.clone(),
            status: Status::Open,
            note: String::new(),
            trace: s.result.violation.as_ref().map_or_else(Vec::new, |v| {
                let mut t = v.trace.clone();
                t.push(format!("violation at op {}: {}", v.op, v.what));
                t
            }),
            keep: s.kept.clone(),
        }
    }

    /// The sweep options the run belongs to.
    pub fn options(&self) -> Result<Options, String> {
        let level = self
            .level
            .as_deref()
            .map(Level::from_name)
            .transpose()
            .map_err(|e| format!("level: {e}"))?;
        Ok(Options {
            seed: self.seed,
            first_run: self.run,
            runs: 1,
            ops: self.ops,
            level,
            skip_known_gaps: self.skip_known_gaps,
            stale_members: self.stale_members,
            cache_tier: self.cache_tier,
            misdirected: self.misdirected,
            cuts_inside: self.cuts_inside,
            queue_depths: self.queue_depths,
        })
    }

    /// Replay the saved operations.
    pub fn replay(&self) -> Result<RunResult, String> {
        Ok(replay(&self.options()?, self.run, None, &self.keep))
    }

    pub fn load(path: &Path) -> Result<Saved, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read the saved run: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| {
            format!(
                "{}: not a saved torture run (raidlab sim torture --shrink --save writes them): {e}",
                path.display()
            )
        })
    }

    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text =
            toml::to_string(self).map_err(|e| format!("cannot write the run as TOML: {e}"))?;
        let head = format!(
            "# Torture run {} of seed {} shrunk to {} of its operations (raidlab sim torture --shrink).\n\
             # Replay: raidlab sim torture --script {}\n\
             # status: open = it still fails (an engine gap), fixed = it must pass.\n",
            self.run,
            self.seed,
            self.keep.len(),
            path.display()
        );
        let mut events = String::from("# Its events when it was saved:\n");
        for e in &self.trace {
            events.push_str(&format!("#   {e}\n"));
        }
        std::fs::write(path, head + &events + &text)
            .map_err(|e| format!("{}: cannot save the run: {e}", path.display()))
    }
}
