//! `raidlab sim`: the simulator's presets and what a configuration amounts to.
//! Parsing and building are raidlab-sim's; this prints.

use crate::cli::{SimCommand, SimDevicesArgs, SimShowArgs, SimTortureArgs};
use anyhow::{anyhow, Result};
use raidlab_core::size::format_size;
use raidlab_sim::config::{card_presets, SimConfig};
use raidlab_sim::device::ModelInfo;
use std::path::Path;
use std::process::ExitCode;

pub fn run(c: SimCommand) -> Result<ExitCode> {
    match c {
        SimCommand::Devices(a) => devices(a),
        SimCommand::Show(a) => show(a),
        SimCommand::Torture(a) => torture(a),
    }
}

/// `--save-images`: the first passed run of each class among the runs,
/// saved for the real md (`raidlab_sim::torture::images`); the sets as JSON.
fn save_images(opts: &raidlab_sim::torture::Options, dir: &Path) -> Result<ExitCode> {
    let mut kinds = std::collections::BTreeSet::new();
    let mut sets = Vec::new();
    let mut failed = false;
    for run in opts.first_run..opts.first_run + opts.runs {
        let kind = raidlab_sim::torture::run_config(opts, run).kind();
        if kinds.contains(&kind) {
            continue;
        }
        let to = dir.join(format!("run-{run}"));
        match raidlab_sim::torture::images::save_images(opts, run, &to) {
            Ok(set) => {
                kinds.insert(kind);
                sets.push(set);
            }
            // Beyond tolerance: nothing for md to read; the next run of
            // the class is taken.
            Err(why) if why.contains("beyond its level's tolerance") => {}
            Err(why) => {
                eprintln!("raidlab: seed {} {why}", opts.seed);
                failed = true;
            }
        }
    }
    outln!("{}", serde_json::to_string_pretty(&sets)?);
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// One run's outcome as it ends (`--verbose`). A closed stdout ends
/// nothing here: the tallies still follow.
fn say_run(r: &raidlab_sim::torture::RunResult) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stdout(),
        "run {} ({}): {}",
        r.run,
        r.config.label(),
        r.violation
            .as_ref()
            .map_or("ok".to_string(), |v| format!("VIOLATION at op {}", v.op))
    );
}

/// `raidlab sim torture`: the runs' tallies per configuration kind; each
/// failure with its configuration, operation, last events and replay.
fn torture(a: SimTortureArgs) -> Result<ExitCode> {
    let level = a
        .level
        .as_deref()
        .map(raidlab_layout::Level::from_name)
        .transpose()
        .map_err(|e| anyhow!("--level: {e}"))?;
    if a.ops == 0 || a.runs == 0 {
        return Err(anyhow!("--runs and --ops must be at least 1"));
    }
    if a.reshapes {
        return reshapes(&a);
    }
    let opts = raidlab_sim::torture::Options {
        seed: a.seed,
        first_run: a.first_run,
        runs: a.runs,
        ops: a.ops,
        level,
        skip_known_gaps: a.skip_known_gaps,
        stale_members: a.stale_members,
        cache_tier: a.cache_tier,
        misdirected: a.misdirected,
        cuts_inside: a.cuts_inside,
        queue_depths: a.queue_depths,
    };
    if let Some(dir) = &a.save_images {
        return save_images(&opts, dir);
    }
    if let Some(file) = &a.script {
        return script(file);
    }
    let sweep = raidlab_sim::torture::sweep(&opts, |r| {
        if a.verbose {
            say_run(r);
        }
    });
    for r in &sweep.failures {
        let Some(v) = &r.violation else { continue };
        outln!(
            "FAILED seed {} run {} ({}), op {}: {}",
            r.seed,
            r.run,
            r.config.label(),
            v.op,
            v.what
        );
        outln!("  last events:");
        for e in &v.trace {
            outln!("    {e}");
        }
        outln!("  replay: {}", r.replay_command(a.ops));
        if a.shrink {
            shrink(&opts, r.run, a.shrink_budget, a.save_shrunk.as_deref())?;
        }
    }
    outln!(
        "{:<16} {:>6} {:>6} {:>8} {:>11} {:>7} {:>6} {:>6} {:>8} {:>8} {:>6}",
        "kind",
        "runs",
        "passed",
        "ops",
        "member I/Os",
        "faults",
        "cuts",
        "starts",
        "rebuilds",
        "checks",
        "beyond"
    );
    for (kind, (n, ok, c)) in &sweep.kinds {
        outln!(
            "{kind:<16} {n:>6} {ok:>6} {:>8} {:>11} {:>7} {:>6} {:>6} {:>8} {:>8} {:>6}",
            c.ops,
            c.member_ios,
            c.faults,
            c.power_cuts,
            c.restarts,
            c.rebuilds,
            c.checks,
            c.beyond_tolerance
        );
    }
    let t = sweep.total();
    outln!(
        "{} of {} runs passed ({} operations, {} simulated member I/Os, {} faults, {} power cuts, {} restarts, {} replaces, {} write-hole sectors allowed)",
        sweep.passed(),
        sweep.runs(),
        t.ops,
        t.member_ios,
        t.faults,
        t.power_cuts,
        t.restarts,
        t.replaces,
        t.write_hole_sectors
    );
    if a.stale_members {
        outln!(
            "members that left came back {} times: {} left out of the assembly as out of date, {} re-added with the bitmap",
            t.returns,
            t.stale_left_out,
            t.re_adds
        );
    }
    if a.misdirected {
        outln!(
            "misdirected member writes {} (each found by the check where one could run: {}), misdirected member reads {}",
            t.misdirected_writes,
            t.misdirected_found,
            t.misdirected_reads
        );
    }
    if a.cuts_inside {
        outln!(
            "power cuts inside a request: {}; superblocks torn by a cut (the device left out, as mdadm refuses it): {}",
            t.inside_cuts,
            t.torn_superblocks
        );
    }
    if a.queue_depths {
        outln!(
            "requests in flight together: {} batches of {} requests, {} member faults while they ran, {} power cuts among them",
            t.batches,
            t.batch_requests,
            t.batch_faults,
            t.batch_cuts
        );
    }
    if t.room_made > 0 {
        outln!(
            "every device slot was taken {} times: the faulty members were removed to add a device",
            t.room_made
        );
    }
    if a.cache_tier {
        outln!(
            "{} runs had a cache tier in front: {} opens after a power cut, {} blocks written back",
            t.cache_runs,
            t.cache_recoveries,
            t.cache_written_back
        );
    }
    Ok(if sweep.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `--shrink`: run `run` of `opts` cut down to the operations that still
/// make it fail the same way; its events, and the script saved under `dir`.
fn shrink(
    opts: &raidlab_sim::torture::Options,
    run: u64,
    budget: usize,
    dir: Option<&Path>,
) -> Result<()> {
    use raidlab_sim::torture::shrink::{shrink, Saved};
    let Some(s) = shrink(opts, run, None, budget) else {
        outln!("  shrink: run {run} passed when recorded: not shrunk");
        return Ok(());
    };
    outln!(
        "  shrunk to {} of {} operation(s) in {} replays, still failing with \"{}\":",
        s.kept.len(),
        s.original_ops,
        s.trials,
        s.kind
    );
    if let Some(v) = &s.result.violation {
        for e in &v.trace {
            outln!("    {e}");
        }
        outln!("    violation at op {}: {}", v.op, v.what);
    }
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow!("--save-shrunk {}: {e}", dir.display()))?;
        let path = dir.join(format!("seed-{}-run-{run}.toml", opts.seed));
        Saved::from_shrunk(opts, &s)
            .save(&path)
            .map_err(|e| anyhow!(e))?;
        outln!(
            "  saved: {} (replay: raidlab sim torture --script {0})",
            path.display()
        );
    }
    Ok(())
}

/// `--script FILE`: replay a saved shrunk run; its events and outcome.
fn script(file: &Path) -> Result<ExitCode> {
    let saved = raidlab_sim::torture::shrink::Saved::load(file).map_err(|e| anyhow!(e))?;
    let r = saved
        .replay()
        .map_err(|e| anyhow!("{}: {e}", file.display()))?;
    outln!(
        "seed {} run {} ({}), {} operation(s) kept of {}; saved as {:?}, violation kind \"{}\"",
        saved.seed,
        saved.run,
        r.config.label(),
        saved.keep.len(),
        saved.ops,
        saved.status,
        saved.violation
    );
    match &r.violation {
        None => {
            outln!("passed");
            Ok(ExitCode::SUCCESS)
        }
        Some(v) => {
            for e in &v.trace {
                outln!("  {e}");
            }
            outln!("FAILED at op {}: {}", v.op, v.what);
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `raidlab sim torture --reshapes`: each run's change, cuts and outcome;
/// failures with their replay.
fn reshapes(a: &SimTortureArgs) -> Result<ExitCode> {
    use raidlab_sim::torture::reshape::reshape_run;
    let (mut passed, mut cuts, mut died, mut writes) = (0u64, 0u64, 0u64, 0u64);
    let mut failed = Vec::new();
    for run in a.first_run..a.first_run + a.runs {
        let r = reshape_run(a.seed, run);
        cuts += u64::from(r.cuts);
        died += u64::from(r.member_died);
        writes += r.writes;
        if a.verbose {
            outln!(
                "run {run}: {} - {} cut(s){}, {} member writes without a cut: {}",
                r.label,
                r.cuts,
                if r.member_died { ", a member died" } else { "" },
                r.writes,
                r.violation.as_deref().unwrap_or("ok")
            );
        }
        match &r.violation {
            None => passed += 1,
            Some(v) => {
                outln!("FAILED seed {} run {run} ({}): {v}", a.seed, r.label);
                outln!(
                    "  replay: raidlab sim torture --reshapes --seed {} --first-run {run} --runs 1 -v",
                    a.seed
                );
                failed.push(run);
            }
        }
    }
    outln!(
        "{passed} of {} reshape runs passed ({cuts} power cuts, {died} with a member gone, {writes} member writes of the reshapes without a cut)",
        a.runs
    );
    if !failed.is_empty() {
        outln!("failed runs: {failed:?}");
    }
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn devices(a: SimDevicesArgs) -> Result<ExitCode> {
    let devices = raidlab_sim::presets::list();
    if devices.is_empty() {
        // The built-in file is checked by tests; this is a build broken elsewhere.
        return Err(anyhow!(
            "the built-in device presets did not load: {}",
            raidlab_sim::presets::builtin()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        ));
    }
    let cards = card_presets().map_err(|e| anyhow!("{e}"))?;
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "devices": devices,
                "cards": cards,
            }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    outln!("Device presets (use as `sim:NAME`, or members as `sim:raid5:4xNAME`):");
    for d in &devices {
        print_model(d, "  ")?;
    }
    outln!("RAID card presets (`sim:raid5:4xNAME:card=CARD`, or `card=CARD/pass-through`):");
    for (name, c) in &cards {
        outln!("  {name}: {}", c.description);
        let params: Vec<String> = c
            .params()
            .iter()
            .map(|p| format!("{}={} {}", p.name, p.value, p.unit))
            .collect();
        outln!("    {}", params.join(", "));
        for s in &c.sources {
            outln!("    source: {s}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_model(m: &ModelInfo, indent: &str) -> Result<()> {
    outln!("{indent}{} ({})", m.name, m.model);
    if !m.params.is_empty() {
        let params: Vec<String> = m
            .params
            .iter()
            .map(|p| format!("{}={} {}", p.name, p.value, p.unit))
            .collect();
        outln!("{indent}  {}", params.join(", "));
    }
    for s in &m.sources {
        outln!("{indent}  source: {s}");
    }
    Ok(())
}

fn show(a: SimShowArgs) -> Result<ExitCode> {
    let (cfg, extra) = if a.config.ends_with(".toml") {
        SimConfig::load(Path::new(&a.config)).map_err(|e| anyhow!("{e}"))?
    } else {
        // As benchmarks name it (`sim:SPEC`) or bare.
        let spec = a.config.strip_prefix("sim:").unwrap_or(&a.config);
        (
            SimConfig::short(spec).map_err(|e| anyhow!("{e}"))?,
            Vec::new(),
        )
    };
    let s = raidlab_sim::summary::summarise(&cfg, &extra).map_err(|e| anyhow!("{e}"))?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{}", s.describe);
    outln!(
        "  usable capacity: {} ({} bytes)",
        format_size(s.capacity_bytes),
        s.capacity_bytes
    );
    outln!(
        "  failures tolerated: {} member(s), whichever they are{}",
        s.failures_tolerated,
        if s.failed_now > 0 {
            format!(" ({} failed now: running degraded)", s.failed_now)
        } else {
            String::new()
        }
    );
    match s.rebuild_seconds {
        Some(secs) => outln!(
            "  rebuild of one member: about {:.1} h ({:.0} s) at the member's own sequential speed, \
             with no other I/O and no rate limit (more under load)",
            secs / 3600.0,
            secs
        ),
        None => outln!("  rebuild: none (no redundancy)"),
    }
    if let (Some(secs), Some(role)) = (s.engine_rebuild_seconds, s.rebuild_role) {
        outln!(
            "  raidlab's live rebuild of role {role} (`raidlab add` while serving: 1 MiB steps, \
             one at a time): about {:.1} h ({:.0} s), simulated with the engine at 16 points",
            secs / 3600.0,
            secs
        );
    }
    if let Some(secs) = s.engine_check_seconds {
        outln!(
            "  raidlab's check of the whole array (`raidlab check`, a scrub; a resync reads the same): \
             about {:.1} h ({:.0} s), simulated with the engine at 16 points",
            secs / 3600.0,
            secs
        );
    }
    if let Some(m) = &s.mismatches {
        outln!(
            "  mismatch ranges: {}; raidlab's check finds {} mismatched sectors (md's mismatch_cnt), \
             its repair issues {} member writes ({} bytes), after which they compare consistent",
            m.ranges,
            m.mismatch_sectors,
            m.rewrites,
            m.rewritten_bytes
        );
    }
    outln!("Made of:");
    walk(&s.model, "  ")?;
    Ok(ExitCode::SUCCESS)
}

/// Parts that are all alike are printed once with a count.
fn walk(m: &ModelInfo, indent: &str) -> Result<()> {
    print_model(m, indent)?;
    let mut i = 0;
    while i < m.parts.len() {
        let mut j = i + 1;
        while j < m.parts.len() && m.parts[j] == m.parts[i] {
            j += 1;
        }
        if j - i > 1 {
            outln!("{indent}  {} x:", j - i);
        }
        walk(&m.parts[i], &format!("{indent}    "))?;
        i = j;
    }
    Ok(())
}
