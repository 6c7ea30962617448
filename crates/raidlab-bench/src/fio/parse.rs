//! fio's job-file grammar: sections, `[global]` defaults, `${VAR}`, and each
//! option's meaning in raidlab's terms. It decides what a job file means and
//! refuses what raidlab would run differently from fio; it must never run
//! anything or accept an option it would silently ignore.

use super::Job;
use crate::engine::{Access, Dir, EngineKind};
use raidlab_core::size::parse_size;
use raidlab_core::{Error, Result};
use std::path::Path;
use std::time::Duration;

/// Which engine a job's `ioengine` maps to. fio's asynchronous engines become
/// raidlab's io_uring engine (libaio's queue-depth behaviour is what io_uring
/// gives); synchronous ones become blocking workers, which with iodepth=1 is what
/// they are.
fn engine_for(v: &str) -> Option<EngineKind> {
    Some(match v {
        "io_uring" | "libaio" => EngineKind::Auto,
        "psync" | "sync" | "pvsync" => EngineKind::Threads,
        _ => return None,
    })
}

/// Said when an `ioengine` value runs on an engine of another name.
fn engine_note(v: &str) -> Option<String> {
    match v {
        "libaio" => Some("ioengine=libaio runs on raidlab's io_uring engine (both keep iodepth requests in flight; raidlab has no libaio engine)".into()),
        "psync" | "sync" | "pvsync" => Some(format!("ioengine={v} runs on raidlab's blocking worker threads (one per queue slot, each a pread/pwrite at a time)")),
        _ => None,
    }
}

const SUPPORTED: &str = "rw, readwrite, bs, blocksize, size, offset, iodepth, numjobs, direct, buffered, runtime, ramp_time, time_based, rwmixread, rwmixwrite, randrepeat, zero_buffers, refill_buffers, scramble_buffers, norandommap, filename, directory, stonewall, wait_for_previous, ioengine, thread, name, description, randseed";

/// One `key[=value]` line: (line number, key, value).
type OptLine = (usize, String, Option<String>);

/// Parse a job file's text. `file` names it in messages.
pub fn parse(file: &str, text: &str) -> Result<Vec<Job>> {
    let mut global: Vec<OptLine> = Vec::new();
    let mut sections: Vec<(String, usize, Vec<OptLine>)> = Vec::new();
    let mut in_global = false;
    let mut seen_section = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let expanded = expand_env(raw).map_err(|m| at(file, n, m))?;
        let line = expanded.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        // fio takes a comment after a section header: `[job] ; note`.
        let line = match line.split_once(']') {
            Some((head, tail))
                if head.starts_with('[')
                    && (tail.trim().is_empty()
                        || tail.trim_start().starts_with(';')
                        || tail.trim_start().starts_with('#')) =>
            {
                &line[..head.len() + 1]
            }
            _ => line,
        };
        if let Some(rest) = line.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']') else {
                return Err(at(
                    file,
                    n,
                    format!("'{line}' opens a section but does not close it with ']'"),
                ));
            };
            let name = name.trim();
            if name.is_empty() {
                return Err(at(
                    file,
                    n,
                    "a section needs a name, e.g. [seq-read]".into(),
                ));
            }
            seen_section = true;
            in_global = name == "global";
            if !in_global {
                if sections.iter().any(|s| s.0 == name) {
                    return Err(at(file, n, format!("job [{name}] is defined twice")));
                }
                sections.push((name.to_string(), n, Vec::new()));
            }
            continue;
        }
        if !seen_section {
            return Err(at(
                file,
                n,
                format!(
                    "'{line}' comes before any [section]: put options under [global] or a [job]"
                ),
            ));
        }
        if line.starts_with("include ") {
            return Err(at(
                file,
                n,
                format!("'{line}': includes are not supported by raidlab: write the options out"),
            ));
        }
        let (k, v) = match line.split_once('=') {
            Some((k, v)) => (k.trim().to_string(), Some(v.trim().to_string())),
            None => (line.to_string(), None),
        };
        if in_global {
            global.push((n, k, v));
        } else if let Some(s) = sections.last_mut() {
            s.2.push((n, k, v));
        }
    }
    if sections.is_empty() {
        return Err(Error::invalid(format!(
            "{file}: no jobs: add a [section] per job (options in [global] apply to all)"
        )));
    }
    let mut jobs = Vec::new();
    for (name, line, opts) in sections {
        let mut job = Job::defaults(&name, line);
        for (n, k, v) in global.iter().chain(opts.iter()) {
            apply(&mut job, file, *n, k, v.as_deref())?;
        }
        if let Dir::Mix { .. } = job.dir {
            job.dir = Dir::Mix {
                read_pct: job.mix.unwrap_or(50),
            };
        }
        if job.runtime.is_none() && job.time_based {
            return Err(at(
                file,
                line,
                format!("job [{name}]: time_based needs a runtime"),
            ));
        }
        if job.target().is_none() {
            return Err(at(file, line, format!("job [{name}] has no filename or directory: say where it runs, e.g. filename=/mnt/test/file")));
        }
        jobs.push(job);
    }
    Ok(jobs)
}

/// fio's environment variables in a job file: `${NAME}` becomes the
/// variable's value; an unset one is an error (fio would leave the text as
/// it is, and the option would then fail in a less helpful way).
fn expand_env(line: &str) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("'{line}': '${{' without a closing '}}'"));
        };
        let name = &after[..end];
        match std::env::var(name) {
            Ok(v) => out.push_str(&v),
            Err(_) => {
                return Err(format!(
                    "'{line}': the environment variable {name} is not set (export it, or write the value out)"
                ))
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn at(file: &str, line: usize, msg: String) -> Error {
    Error::invalid(format!("{file}:{line}: {msg}"))
}

fn apply(job: &mut Job, file: &str, n: usize, key: &str, val: Option<&str>) -> Result<()> {
    let need = || {
        val.filter(|v| !v.is_empty())
            .ok_or_else(|| at(file, n, format!("option '{key}' needs a value ({key}=...)")))
    };
    let bad = |what: &str| {
        at(
            file,
            n,
            format!("option '{key}': '{}' {what}", val.unwrap_or("")),
        )
    };
    let refused = |why: &str| at(file, n, format!("option '{key}' is not supported: {why}"));
    let int = |min: u64, max: u64| -> Result<u64> {
        let v = need()?;
        match v.parse::<u64>() {
            Ok(x) if (min..=max).contains(&x) => Ok(x),
            _ => Err(bad(&format!("is not a whole number from {min} to {max}"))),
        }
    };
    let boolean = || -> Result<bool> {
        match val {
            None => Ok(true),
            Some("1") | Some("true") => Ok(true),
            Some("0") | Some("false") => Ok(false),
            Some(_) => Err(bad("is not 0 or 1")),
        }
    };
    let size = || -> Result<u64> {
        let v = need()?;
        if v.contains(',') || v.contains(':') || v.ends_with('%') {
            return Err(bad("(per-direction sizes, ranges and percentages) is not supported by raidlab: give one size"));
        }
        parse_size(v).map_err(|_| bad("is not a size (e.g. 4k, 1m, 2g)"))
    };
    match key {
        "name" => job.name = need()?.to_string(),
        "description" | "thread" => {}
        "rw" | "readwrite" => {
            let (access, dir) = match need()? {
                "read" => (Access::Seq, Dir::Read),
                "write" => (Access::Seq, Dir::Write),
                "randread" => (Access::Rand, Dir::Read),
                "randwrite" => (Access::Rand, Dir::Write),
                "rw" | "readwrite" => (Access::Seq, Dir::Mix { read_pct: 50 }),
                "randrw" => (Access::Rand, Dir::Mix { read_pct: 50 }),
                v if v.contains(':') => return Err(bad("(an offset modifier after ':') is not supported by raidlab")),
                _ => return Err(bad("is not supported: use read, write, randread, randwrite, rw or randrw (trim is not supported)")),
            };
            job.dir = dir;
            job.access = access;
        }
        "rwmixread" | "rwmixwrite" => {
            let p = int(0, 100)? as u32;
            // Applied once every option is read: fio accepts it before rw= too.
            job.mix = Some(if key == "rwmixread" { p } else { 100 - p });
        }
        "bs" | "blocksize" => {
            let b = size()?;
            if b == 0 || b > (256 << 20) {
                return Err(bad("is out of range: use 1 byte to 256M"));
            }
            job.bs = b as usize;
        }
        "size" => job.size = Some(size()?),
        "offset" => job.offset = size()?,
        "iodepth" => job.iodepth = int(1, 4096)? as usize,
        "numjobs" => job.numjobs = int(1, 1024)? as usize,
        "direct" => job.direct = boolean()?,
        "buffered" => job.direct = !boolean()?,
        "time_based" => job.time_based = boolean()?,
        "randrepeat" => job.randrepeat = boolean()?,
        "zero_buffers" => job.zero_buffers = boolean()?,
        "refill_buffers" => job.refill_buffers = boolean()?,
        "scramble_buffers" => job.scramble_buffers = Some(boolean()?),
        "norandommap" => job.norandommap = boolean()?,
        "stonewall" | "wait_for_previous" => job.stonewall = boolean()?,
        "runtime" => {
            let v = need()?;
            job.runtime = Some(parse_time(v).ok_or_else(|| bad("is not a time (e.g. 30, 30s, 500ms, 2m)"))?);
        }
        "filename" => {
            let v = need()?;
            if v.contains(':') && !["array:", "mem:", "sim:", "cache:", "nbd://", "nbd+unix://"].iter().any(|p| v.starts_with(p)) {
                return Err(bad("(several files joined by ':') is not supported by raidlab: one file per job"));
            }
            job.filename = Some(v.to_string());
        }
        "directory" => job.directory = Some(need()?.to_string()),
        "randseed" => job.randseed = Some(int(0, u64::MAX)?),
        "group_reporting" => return Err(refused("raidlab reports every job and clone on its own (fio's JSON shape, one object per clone); summed group figures are not produced: remove it and add the clones' figures")),
        "ramp_time" => {
            let v = need()?;
            job.ramp = Some(parse_time(v).ok_or_else(|| bad("is not a time (e.g. 1, 1s, 500ms, 2m)"))?);
        }
        "fsync" | "fdatasync" | "end_fsync" | "fsync_on_close" => return Err(refused("raidlab's job runner issues no syncs, and timing them needs fio's sync statistics: remove it (raidlab bench iozone -e times a flush after each write test)")),
        "loops" => return Err(refused("raidlab runs each job once: repeat the job as more sections, or use runtime with time_based")),
        "bssplit" => return Err(refused("raidlab's engine issues one block size per job: write a job per block size")),
        "percentile_list" => return Err(refused("raidlab's fio JSON always carries fio's default percentiles and the whole latency histogram (json+ bins), from which any percentile follows: remove it")),
        "write_bw_log" | "write_iops_log" | "write_lat_log" | "write_hist_log" | "log_avg_msec" => return Err(refused("raidlab writes no time-series logs; its fio JSON carries the whole latency histogram (json+ bins): remove it")),
        "ioengine" => {
            let v = need()?;
            job.engine = engine_for(v)
                .ok_or_else(|| bad("is not an engine raidlab runs: use io_uring, libaio, psync, sync or pvsync"))?;
            if let Some(note) = engine_note(v) {
                job.notes.retain(|n| !n.starts_with("ioengine="));
                job.notes.push(note);
            }
        }
        _ => {
            return Err(at(
                file,
                n,
                format!("option '{key}' is not supported by raidlab (it would change what the job measures, so it is not ignored); supported: {SUPPORTED}"),
            ))
        }
    }
    job.options
        .insert(key.to_string(), val.unwrap_or("").to_string());
    Ok(())
}

/// fio's time values: plain numbers are seconds; us, ms, s, m, h suffixes.
fn parse_time(v: &str) -> Option<Duration> {
    let v = v.trim().to_ascii_lowercase();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    Some(match unit {
        "" | "s" | "sec" => Duration::from_secs(n),
        "ms" | "msec" => Duration::from_millis(n),
        "us" | "usec" => Duration::from_micros(n),
        "m" | "min" => Duration::from_secs(n.checked_mul(60)?),
        "h" => Duration::from_secs(n.checked_mul(3600)?),
        _ => return None,
    })
}

/// Read and parse a job file.
pub fn parse_file(path: &Path) -> Result<Vec<Job>> {
    let name = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::io(raidlab_core::Op::Open, &name, e))?;
    parse(&name, &text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Rewrite;

    #[test]
    fn global_options_apply_and_jobs_override() {
        let jobs = parse(
            "t.fio",
            "; comment\n[global]\nbs=64k\ndirect=1\nfilename=mem:8M\n\n[a]\nrw=randread\niodepth=8\n[b]\nrw=randrw\nrwmixread=70\nbs=4k\nstonewall\nnumjobs=2\nruntime=2s\ntime_based\n",
        )
        .unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(
            (jobs[0].bs, jobs[0].iodepth, jobs[0].direct),
            (65536, 8, true)
        );
        assert_eq!((jobs[0].access, jobs[0].dir), (Access::Rand, Dir::Read));
        assert_eq!(jobs[1].dir, Dir::Mix { read_pct: 70 });
        assert_eq!(
            (jobs[1].bs, jobs[1].numjobs, jobs[1].stonewall),
            (4096, 2, true)
        );
        assert_eq!(jobs[1].runtime, Some(Duration::from_secs(2)));
        assert!(jobs[1].time_based);
    }

    #[test]
    fn mix_before_rw_is_kept() {
        let jobs = parse("t.fio", "[a]\nfilename=x\nrwmixwrite=20\nrw=randrw\n").unwrap();
        assert_eq!(jobs[0].dir, Dir::Mix { read_pct: 80 });
    }

    #[test]
    fn env_variables_header_comments_randseed_and_refused_options() {
        std::env::set_var("RAIDLAB_FIO_TEST_BS", "64k");
        let jobs = parse(
            "t.fio",
            "[a] ; the first job\nfilename=mem:4M\nbs=${RAIDLAB_FIO_TEST_BS}\nrandseed=99\n[b] # second\nfilename=mem:4M\n",
        )
        .unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!((jobs[0].name.as_str(), jobs[0].bs), ("a", 64 << 10));
        assert_eq!(jobs[0].randseed, Some(99));
        assert_eq!(jobs[1].name, "b");
        let e = parse("t.fio", "[a]\nfilename=${RAIDLAB_FIO_TEST_UNSET_VAR}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("RAIDLAB_FIO_TEST_UNSET_VAR is not set"), "{e}");
        for (opt, why) in [
            ("group_reporting", "reports every job"),
            ("end_fsync=1", "issues no syncs"),
            ("loops=3", "runs each job once"),
            ("bssplit=4k/50:64k/50", "one block size per job"),
            ("percentile_list=50:99", "whole latency histogram"),
            ("write_lat_log=x", "no time-series logs"),
        ] {
            let e = parse("t.fio", &format!("[a]\nfilename=x\n{opt}\n"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("is not supported: ") && e.contains(why),
                "{opt}: {e}"
            );
        }
        let j = parse("t.fio", "[a]\nfilename=x\nioengine=libaio\n").unwrap();
        assert!(
            j[0].notes[0].contains("libaio runs on raidlab's io_uring"),
            "{:?}",
            j[0].notes
        );
    }

    #[test]
    fn errors_name_file_line_and_option() {
        let e = parse("jobs.fio", "[a]\nfilename=x\nloops=5\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("jobs.fio:3: option 'loops' is not supported"),
            "{e}"
        );
        let e = parse("jobs.fio", "[a]\nfilename=x\nbs=4q\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("jobs.fio:3: option 'bs': '4q'"), "{e}");
        let e = parse("jobs.fio", "[a]\nfilename=x\nrw=trim\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("jobs.fio:3") && e.contains("'rw'"), "{e}");
        let e = parse("jobs.fio", "bs=4k\n[a]\n").unwrap_err().to_string();
        assert!(e.starts_with("jobs.fio:1:"), "{e}");
        let e = parse("jobs.fio", "[a]\nrw=read\n").unwrap_err().to_string();
        assert!(e.starts_with("jobs.fio:1: job [a] has no filename"), "{e}");
        let e = parse("jobs.fio", "[a]\nfilename=x\nbs=4k,8k\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("jobs.fio:3: option 'bs'"), "{e}");
        let e = parse("jobs.fio", "[a]\nfilename=x\niodepth=0\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("jobs.fio:3: option 'iodepth'"), "{e}");
        let e = parse("jobs.fio", "[a]\nfilename=x\ntime_based\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("time_based needs a runtime"), "{e}");
        let e = parse("jobs.fio", "[a\n").unwrap_err().to_string();
        assert!(e.starts_with("jobs.fio:1:"), "{e}");
        let e = parse("jobs.fio", "# nothing\n").unwrap_err().to_string();
        assert!(e.starts_with("jobs.fio: no jobs"), "{e}");
    }

    #[test]
    fn written_buffers_follow_fios_rules() {
        let rewrite = |opts: &str| {
            parse("t.fio", &format!("[a]\nfilename=x\nrw=write\n{opts}")).unwrap()[0].rewrite()
        };
        assert_eq!(rewrite(""), Rewrite::Scramble);
        assert_eq!(rewrite("zero_buffers=0\n"), Rewrite::Scramble);
        assert_eq!(rewrite("zero_buffers\n"), Rewrite::Never);
        assert_eq!(rewrite("scramble_buffers=0\n"), Rewrite::Never);
        assert_eq!(
            rewrite("zero_buffers\nscramble_buffers=1\n"),
            Rewrite::Scramble
        );
        assert_eq!(rewrite("refill_buffers\n"), Rewrite::Refill);
        assert_eq!(
            rewrite("refill_buffers\nscramble_buffers=1\n"),
            Rewrite::Refill
        );
        let e = parse("t.fio", "[a]\nfilename=x\nscramble_buffers=maybe\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.fio:3: option 'scramble_buffers'"), "{e}");
    }

    #[test]
    fn times_in_fio_units() {
        assert_eq!(parse_time("30"), Some(Duration::from_secs(30)));
        assert_eq!(parse_time("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_time("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_time("1x"), None);
        assert_eq!(parse_time(""), None);
    }
}
