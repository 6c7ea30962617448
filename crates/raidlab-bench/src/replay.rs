//! Replay of recorded block I/O traces against a target: fio's iolog (version 2
//! and 3) and blkparse's default text output, as fast as possible or with the
//! recorded timing, reporting the same figures as the other suites.
//!
//! - fio iolog v2: `fio version 2 iolog`, then `FILE add|open|close` and
//!   `FILE read|write|sync|datasync|trim OFFSET LENGTH` and `FILE wait USEC`
//!   (relative to the previous wait; under 100 µs ignored, as fio does).
//! - fio iolog v3: `fio version 3 iolog`, each line led by a timestamp from the
//!   start of the run in microseconds (what fio 3.33 writes: a job at 100 IOPS
//!   logs its reads 10,000 apart); no `wait`.
//! - blkparse: `MAJ,MIN CPU SEQ SECONDS PID ACTION RWBS SECTOR + COUNT [PROC]`;
//!   the queue events (`Q`, what was asked of the device) are replayed, sectors
//!   of 512 bytes; `R`/`W` in RWBS choose the direction, `D` (discard) trims, `F`
//!   alone flushes; other events (G, I, D-ispatch, C, M, ...) and lines blkparse
//!   adds (summaries, notes such as `m N cfq...`) are skipped.
//!
//! No format read here names write-zeroes; a [`TraceOp`] of kind
//! [`IoKind::Zero`] built by a caller is replayed as the target's write-zeroes
//! (an error if the target has none) and counted with the writes.
//!
//! A trace names one file (or device): all of its I/O is replayed onto the one
//! target. Errors name the trace, line and field. This module never prints.

use crate::buffer::AlignedBuf;
use crate::engine::{Control, DirStats};
use crate::schema::BenchReport;
use crate::target::Target;
use raidlab_core::{Error, ErrorKind, IoKind, Op, Result};
use serde::Serialize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One recorded request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceOp {
    /// When it was issued, from the start of the trace.
    pub at: Duration,
    pub kind: IoKind,
    pub offset: u64,
    pub len: u64,
    /// Line in the trace file, for messages.
    pub line: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Format {
    FioV2,
    FioV3,
    Blkparse,
}

/// Parse a trace; the format is told by its first line.
pub fn parse(file: &str, text: &str) -> Result<(Format, Vec<TraceOp>)> {
    let first = text.lines().next().unwrap_or("").trim();
    match first {
        "fio version 2 iolog" => Ok((Format::FioV2, parse_fio(file, text, 2)?)),
        "fio version 3 iolog" => Ok((Format::FioV3, parse_fio(file, text, 3)?)),
        f if f.starts_with("fio version") => Err(Error::invalid(format!(
            "{file}:1: '{f}': raidlab replays fio iolog versions 2 and 3"
        ))),
        _ => Ok((Format::Blkparse, parse_blkparse(file, text)?)),
    }
}

fn at(file: &str, line: usize, msg: String) -> Error {
    Error::invalid(format!("{file}:{line}: {msg}"))
}

fn num(file: &str, line: usize, what: &str, v: Option<&str>) -> Result<u64> {
    let v = v.ok_or_else(|| at(file, line, format!("missing {what}")))?;
    v.parse()
        .map_err(|_| at(file, line, format!("{what} '{v}' is not a whole number")))
}

fn parse_fio(file: &str, text: &str, version: u32) -> Result<Vec<TraceOp>> {
    let mut ops = Vec::new();
    let mut clock = Duration::ZERO;
    let mut name: Option<String> = None;
    for (i, raw) in text.lines().enumerate().skip(1) {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let mut f = line.split_whitespace();
        if version == 3 {
            clock = Duration::from_micros(num(file, n, "timestamp", f.next())?);
        }
        let fname = f
            .next()
            .ok_or_else(|| at(file, n, "missing file name".into()))?;
        let action = f
            .next()
            .ok_or_else(|| at(file, n, "missing action".into()))?;
        match &name {
            None => name = Some(fname.to_string()),
            Some(prev) if prev != fname => {
                return Err(at(
                    file,
                    n,
                    format!("a second file '{fname}' (after '{prev}'): raidlab replays a trace of one file onto one target; split the trace per file"),
                ))
            }
            Some(_) => {}
        }
        let kind = match action {
            "add" | "open" | "close" => continue,
            "wait" if version == 2 => {
                let us = num(file, n, "wait time", f.next())?;
                if us >= 100 {
                    clock += Duration::from_micros(us);
                }
                continue;
            }
            "read" => IoKind::Read,
            "write" => IoKind::Write,
            "sync" | "datasync" => IoKind::Flush,
            "trim" => IoKind::Trim,
            other => {
                return Err(at(
                    file,
                    n,
                    format!("action '{other}' is not a fio iolog v{version} action (read, write, sync, datasync, trim{})", if version == 2 { ", wait, add, open, close" } else { ", add, open, close" }),
                ))
            }
        };
        let (offset, len) = if kind == IoKind::Flush {
            (0, 0)
        } else {
            (
                num(file, n, "offset", f.next())?,
                num(file, n, "length", f.next())?,
            )
        };
        if matches!(kind, IoKind::Read | IoKind::Write) && (len == 0 || len > (64 << 20)) {
            return Err(at(
                file,
                n,
                format!("length {len} is out of range (1 byte to 64M)"),
            ));
        }
        ops.push(TraceOp {
            at: clock,
            kind,
            offset,
            len,
            line: n,
        });
    }
    if ops.is_empty() {
        return Err(Error::invalid(format!(
            "{file}: the trace holds no reads, writes, syncs or trims"
        )));
    }
    Ok(ops)
}

fn parse_blkparse(file: &str, text: &str) -> Result<Vec<TraceOp>> {
    let mut ops = Vec::new();
    let mut first_time: Option<f64> = None;
    let mut looked_like_blkparse = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let f: Vec<&str> = raw.split_whitespace().collect();
        // Event lines start with MAJ,MIN; anything else is blkparse's summary.
        if f.len() < 7 || !f[0].contains(',') || f[0].split(',').any(|x| x.parse::<u32>().is_err())
        {
            continue;
        }
        looked_like_blkparse = true;
        if f[5] != "Q" {
            continue;
        }
        let secs: f64 = f[3].parse().map_err(|_| {
            at(
                file,
                n,
                format!("time '{}' is not a number of seconds", f[3]),
            )
        })?;
        let rwbs = f[6];
        let span = if f.len() >= 10 && f[8] == "+" {
            let sector = num(file, n, "sector", Some(f[7]))?;
            let count = num(file, n, "sector count", Some(f[9]))?;
            Some((sector * 512, count * 512))
        } else {
            None
        };
        let (kind, offset, len) = match span {
            // A preflush with no data ("FWS [sync]", "FWS 0 + 0"): a flush.
            None | Some((_, 0)) if rwbs.contains('F') => (IoKind::Flush, 0, 0),
            // 'N' (no data) and the like move nothing.
            None if !rwbs.contains(['R', 'W', 'D']) => continue,
            None => {
                return Err(at(
                    file,
                    n,
                    format!("expected 'SECTOR + COUNT' after '{rwbs}'"),
                ))
            }
            Some((_, 0)) => continue,
            Some((off, len)) => {
                let kind = if rwbs.contains('D') {
                    IoKind::Trim
                } else if rwbs.contains('W') {
                    IoKind::Write
                } else if rwbs.contains('R') {
                    IoKind::Read
                } else {
                    continue;
                };
                (kind, off, len)
            }
        };
        let t0 = *first_time.get_or_insert(secs);
        ops.push(TraceOp {
            at: Duration::from_secs_f64((secs - t0).max(0.0)),
            kind,
            offset,
            len,
            line: n,
        });
    }
    if !looked_like_blkparse {
        return Err(Error::invalid(format!(
            "{file}: not a trace raidlab reads: the first line is neither 'fio version 2 iolog' nor 'fio version 3 iolog', and no line looks like blkparse's default output ('8,0 1 1 0.000000000 123 Q W 2048 + 8 [proc]')"
        )));
    }
    if ops.is_empty() {
        return Err(Error::invalid(format!(
            "{file}: the blkparse output holds no queue (Q) events with data"
        )));
    }
    Ok(ops)
}

/// The region a trace touches: the target must be at least this large.
pub fn extent(ops: &[TraceOp]) -> u64 {
    ops.iter().map(|o| o.offset + o.len).max().unwrap_or(0)
}

#[derive(Debug, Clone)]
pub struct ReplayConfig {
    /// Keep the recorded issue times (false: as fast as possible).
    pub timed: bool,
    /// Requests in flight at most.
    pub qd: usize,
}

#[derive(Debug, Clone)]
pub struct ReplayResult {
    pub label: String,
    pub read: DirStats,
    pub write: DirStats,
    pub flushes: u64,
    pub trims: u64,
    /// Trims the target does not support (counted, not an error: TRIM is advice).
    pub trims_unsupported: u64,
    pub elapsed: Duration,
    pub interrupted: bool,
}

/// Replay `ops` onto `target` in order, `qd` at a time.
pub fn run(
    target: &Target,
    ops: &[TraceOp],
    cfg: &ReplayConfig,
    control: &Control,
) -> Result<ReplayResult> {
    if cfg.qd == 0 {
        return Err(Error::invalid("queue depth must be at least 1"));
    }
    if let Some(o) = ops.iter().find(|o| o.offset + o.len > target.volume.size()) {
        return Err(Error::new(
            ErrorKind::OutOfRange,
            Op::Read,
            format!(
                "trace line {} reaches past the end of the target ({} bytes): give a larger target",
                o.line,
                target.volume.size()
            ),
        )
        .on_device(target.label.clone())
        .at(o.offset, o.len));
    }
    if target.direct {
        if let Some(o) = ops
            .iter()
            .find(|o| o.kind != IoKind::Flush && (o.offset % 512 != 0 || o.len % 512 != 0))
        {
            return Err(Error::invalid(format!(
                "trace line {} ({} bytes at {}) is not 512-byte aligned, which O_DIRECT needs: replay it --buffered",
                o.line, o.len, o.offset
            ))
            .on_device(target.label.clone()));
        }
    }
    if let Some(sim) = &target.sim {
        return Ok(replay_simulated(target, sim, ops, cfg, control));
    }
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<Error>> = Mutex::new(None);
    let max_len = ops.iter().map(|o| o.len).max().unwrap_or(0) as usize;
    let start = Instant::now();
    let stats: Vec<(DirStats, DirStats, u64, u64, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.qd)
            .map(|_| {
                s.spawn(|| {
                    let mut buf = AlignedBuf::new(max_len.max(512));
                    let (mut rd, mut wr) = (DirStats::default(), DirStats::default());
                    let (mut fl, mut tr, mut tru) = (0, 0, 0);
                    loop {
                        if control.stopped() || failed.lock().map_or(true, |f| f.is_some()) {
                            break;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(o) = ops.get(i) else { break };
                        if cfg.timed {
                            let due = start + o.at;
                            let now = Instant::now();
                            if due > now {
                                std::thread::sleep(due - now);
                            }
                        }
                        let len = o.len as usize;
                        let t0 = Instant::now();
                        let r = match o.kind {
                            IoKind::Read => target
                                .volume
                                .read_at(&mut buf.as_mut_slice()[..len], o.offset),
                            IoKind::Write => {
                                target.volume.write_at(&buf.as_slice()[..len], o.offset)
                            }
                            IoKind::Zero => target.volume.write_zeroes(o.offset, o.len),
                            IoKind::Flush => target.volume.flush(),
                            IoKind::Trim => match target.volume.discard(o.offset, o.len) {
                                Err(e) if e.kind == ErrorKind::Unsupported => {
                                    tru += 1;
                                    Ok(())
                                }
                                r => r,
                            },
                        };
                        let lat = t0.elapsed();
                        if let Err(e) = r {
                            let msg = format!("{} (trace line {})", e.message, o.line);
                            let mut e = e.on_device(target.label.clone()).at(o.offset, o.len);
                            e.message = msg;
                            if let Ok(mut f) = failed.lock() {
                                f.get_or_insert(e);
                            }
                            break;
                        }
                        match o.kind {
                            IoKind::Read => rd.record(o.len, lat),
                            IoKind::Write | IoKind::Zero => wr.record(o.len, lat),
                            IoKind::Flush => fl += 1,
                            IoKind::Trim => tr += 1,
                        }
                        control.add_done(o.len);
                    }
                    (rd, wr, fl, tr, tru)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let elapsed = start.elapsed();
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    if stats.len() != cfg.qd {
        return Err(Error::invalid(
            "internal error: a replay worker panicked (a bug: please report it)",
        ));
    }
    let mut r = ReplayResult {
        label: target.label.clone(),
        read: DirStats::default(),
        write: DirStats::default(),
        flushes: 0,
        trims: 0,
        trims_unsupported: 0,
        elapsed,
        interrupted: control.stopped(),
    };
    for (rd, wr, fl, tr, tru) in &stats {
        r.read.merge(rd);
        r.write.merge(wr);
        r.flushes += fl;
        r.trims += tr;
        r.trims_unsupported += tru;
    }
    Ok(r)
}

/// A replay on a simulated target, in virtual time.
fn replay_simulated(
    target: &Target,
    sim: &crate::sim::SimTarget,
    ops: &[TraceOp],
    cfg: &ReplayConfig,
    control: &Control,
) -> ReplayResult {
    let plan: Vec<(u64, IoKind, u64, u64)> = ops
        .iter()
        .map(|o| (o.at.as_nanos() as u64, o.kind, o.offset, o.len))
        .collect();
    let (done, elapsed) = sim.replay(&plan, cfg.qd, cfg.timed);
    let mut r = ReplayResult {
        label: target.label.clone(),
        read: DirStats::default(),
        write: DirStats::default(),
        flushes: 0,
        trims: 0,
        trims_unsupported: 0,
        elapsed: Duration::from_nanos(elapsed),
        interrupted: false,
    };
    for (i, lat) in done {
        let o = &ops[i];
        let lat = Duration::from_nanos(lat);
        match o.kind {
            IoKind::Read => r.read.record(o.len, lat),
            IoKind::Write | IoKind::Zero => r.write.record(o.len, lat),
            IoKind::Flush => r.flushes += 1,
            IoKind::Trim => r.trims += 1,
        }
        control.add_done(o.len);
    }
    r
}

/// The raidlab-bench/1 report: group = the trace, tests read and write.
pub fn report(
    results: &[ReplayResult],
    trace: &str,
    format: Format,
    cfg: &ReplayConfig,
) -> BenchReport {
    let mut rep = BenchReport::new("replay", results.iter().map(|r| r.label.clone()).collect());
    let mut details = Vec::new();
    for r in results {
        for (test, d) in [("read", &r.read), ("write", &r.write)] {
            if d.ios == 0 {
                continue;
            }
            rep.push(trace, test, &r.label, "MB/s", d.mb_s(r.elapsed));
            rep.push(trace, test, &r.label, "IOPS", d.iops(r.elapsed));
            rep.push(trace, test, &r.label, "latency µs", d.mean_lat_us());
            rep.push(
                trace,
                test,
                &r.label,
                "latency p99 µs",
                d.hist.value_at_quantile(0.99) as f64 / 1000.0,
            );
        }
        details.push(serde_json::json!({
            "target": r.label,
            "seconds": r.elapsed.as_secs_f64(),
            "read": {"bytes": r.read.bytes, "ios": r.read.ios},
            "write": {"bytes": r.write.bytes, "ios": r.write.ios},
            "flushes": r.flushes,
            "trims": r.trims,
            "trims_unsupported": r.trims_unsupported,
            "interrupted": r.interrupted,
        }));
    }
    rep.details = serde_json::json!({
        "trace": trace,
        "format": format,
        "timed": cfg.timed,
        "qd": cfg.qd,
        "targets": details,
    });
    rep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_v2_with_waits() {
        let t = "fio version 2 iolog\n/f add\n/f open\n/f read 0 4096\n/f wait 1000\n/f write 8192 512\n/f wait 50\n/f sync 0 0\n/f trim 0 4096\n/f close\n";
        let (fmt, ops) = parse("t.log", t).unwrap();
        assert_eq!(fmt, Format::FioV2);
        assert_eq!(ops.len(), 4);
        assert_eq!(
            (ops[0].kind, ops[0].offset, ops[0].len, ops[0].at),
            (IoKind::Read, 0, 4096, Duration::ZERO)
        );
        assert_eq!(
            (ops[1].kind, ops[1].at, ops[1].line),
            (IoKind::Write, Duration::from_micros(1000), 6)
        );
        // A wait under 100 µs is ignored, as fio does.
        assert_eq!(ops[2].at, Duration::from_micros(1000));
        assert_eq!(ops[3].kind, IoKind::Trim);
    }

    #[test]
    fn fio_v3_as_fio_writes_it() {
        let t = "fio version 3 iolog\n20 /tmp/f add\n125 /tmp/f open\n127 /tmp/f read 61440 4096\n11670 /tmp/f write 774144 4096\n40378 /tmp/f close\n";
        let (fmt, ops) = parse("t.log", t).unwrap();
        assert_eq!(fmt, Format::FioV3);
        assert_eq!(ops[1].at, Duration::from_micros(11670));
        assert_eq!(extent(&ops), 774144 + 4096);
    }

    #[test]
    fn blkparse_queue_events() {
        let t = "  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]\n  8,0    3        2     0.000001000   697  G   W 223490 + 8 [kjournald]\n  8,0    1        3     0.500000000   700  Q  RA 100 + 16 [cat]\n  8,0    1        4     0.600000000   700  Q  FWS [sync]\n  8,0    1        5     0.700000000   700  Q   D 0 + 2048 [fstrim]\nCPU0 (sda):\n Reads Queued:           1,        8KiB\n";
        let (fmt, ops) = parse("b.txt", t).unwrap();
        assert_eq!(fmt, Format::Blkparse);
        assert_eq!(ops.len(), 4);
        assert_eq!(
            (ops[0].kind, ops[0].offset, ops[0].len),
            (IoKind::Write, 223490 * 512, 4096)
        );
        assert_eq!(
            (ops[1].kind, ops[1].at),
            (IoKind::Read, Duration::from_millis(500))
        );
        assert_eq!(ops[2].kind, IoKind::Flush);
        assert_eq!((ops[3].kind, ops[3].len), (IoKind::Trim, 2048 * 512));
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = parse("t.log", "fio version 2 iolog\n/f read x 4096\n")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "t.log:2: offset 'x' is not a whole number");
        let e = parse("t.log", "fio version 2 iolog\n/f frob 0 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.log:2: action 'frob'"), "{e}");
        let e = parse("t.log", "fio version 3 iolog\n10 /f wait 100\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.log:2: action 'wait'"), "{e}");
        let e = parse(
            "t.log",
            "fio version 2 iolog\n/f read 0 4096\n/g read 0 4096\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("t.log:3: a second file"), "{e}");
        let e = parse("t.log", "fio version 4 iolog\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.log:1:"), "{e}");
        let e = parse("t.log", "hello\n").unwrap_err().to_string();
        assert!(e.starts_with("t.log: not a trace"), "{e}");
        let e = parse("b.txt", "  8,0 1 1 0.1 7 Q W 5 x 8 [p]\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("b.txt:1: expected 'SECTOR + COUNT'"), "{e}");
    }
}
