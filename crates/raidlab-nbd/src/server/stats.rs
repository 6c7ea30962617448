//! What a [`Server`](super::Server) has served, per export: connections
//! (accepted into transmission, open now) and requests by command with the
//! ones that failed and a latency histogram, for a metrics endpoint.
//!
//! It only counts; it must never change how a request is served, and it
//! stays cheap on the path of every request (relaxed atomic additions, no
//! locks). A request's latency runs from the moment it was read in full
//! (header and payload) to its reply handed to the connection's writer,
//! queue wait included; a reply the reader holds back in its cork may leave
//! the socket a little later. Requests refused while being parsed (outside
//! the export, unknown flags, too long) never reach the volume and are not
//! counted here.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// Upper bounds of the latency buckets, in microseconds (10 µs: a request
/// served from memory; 1 s: a disk retrying or a large flush).
pub const LATENCY_BOUNDS_US: [u64; 16] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    500_000, 1_000_000,
];

/// The commands counted, in the order of [`ExportStats::commands`].
pub const COMMANDS: [&str; 5] = ["read", "write", "flush", "trim", "write_zeroes"];

/// A latency histogram: `counts[i]` calls took at most `bounds_us[i]` and
/// more than the bound before (per bucket, not cumulative); the last count,
/// past every bound, is +Inf.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LatencyHistogram {
    pub bounds_us: Vec<u64>,
    pub counts: Vec<u64>,
    /// The sum of the latencies counted, in microseconds.
    pub sum_us: u64,
}

/// One command's figures on one export.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandStats {
    /// One of [`COMMANDS`].
    pub command: &'static str,
    /// Requests served (answered, successfully or not).
    pub requests: u64,
    /// Of those, answered with an error.
    pub errors: u64,
    pub latency: LatencyHistogram,
}

/// One export's figures since the server started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportStats {
    pub export: String,
    /// Connections that reached transmission on this export.
    pub connections_total: u64,
    pub connections_open: u64,
    /// One per entry of [`COMMANDS`], in that order.
    pub commands: Vec<CommandStats>,
}

#[derive(Debug)]
struct Command {
    requests: AtomicU64,
    errors: AtomicU64,
    counts: [AtomicU64; LATENCY_BOUNDS_US.len() + 1],
    sum_ns: AtomicU64,
}

impl Default for Command {
    fn default() -> Self {
        Command {
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }
}

#[derive(Debug, Default)]
struct Export {
    connections_total: AtomicU64,
    connections_open: AtomicU64,
    commands: [Command; COMMANDS.len()],
}

/// The live counters of every export of one server.
#[derive(Debug)]
pub(super) struct Counters {
    names: Vec<String>,
    exports: Vec<Export>,
}

/// Keeps a connection counted as open until it is dropped.
#[derive(Debug)]
pub(super) struct OpenConnection<'a>(&'a AtomicU64);

impl Drop for OpenConnection<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl Counters {
    pub(super) fn new(names: Vec<String>) -> Counters {
        let exports = names.iter().map(|_| Export::default()).collect();
        Counters { names, exports }
    }

    /// A connection entered transmission on export `i`.
    pub(super) fn connected(&self, i: usize) -> OpenConnection<'_> {
        let e = &self.exports[i];
        e.connections_total.fetch_add(1, Relaxed);
        e.connections_open.fetch_add(1, Relaxed);
        OpenConnection(&e.connections_open)
    }

    /// A request of command `c` (an index into [`COMMANDS`]) on export `i`,
    /// read in full at `received`, was answered (`ok`: without an error).
    pub(super) fn served(&self, i: usize, c: usize, received: Instant, ok: bool) {
        let ns = u64::try_from(received.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let cmd = &self.exports[i].commands[c];
        cmd.requests.fetch_add(1, Relaxed);
        if !ok {
            cmd.errors.fetch_add(1, Relaxed);
        }
        let b = LATENCY_BOUNDS_US
            .iter()
            .position(|&b| ns <= b * 1000)
            .unwrap_or(LATENCY_BOUNDS_US.len());
        cmd.counts[b].fetch_add(1, Relaxed);
        cmd.sum_ns.fetch_add(ns, Relaxed);
    }

    pub(super) fn snapshot(&self) -> Vec<ExportStats> {
        self.names
            .iter()
            .zip(&self.exports)
            .map(|(name, e)| ExportStats {
                export: name.clone(),
                connections_total: e.connections_total.load(Relaxed),
                connections_open: e.connections_open.load(Relaxed),
                commands: COMMANDS
                    .iter()
                    .zip(&e.commands)
                    .map(|(&command, c)| CommandStats {
                        command,
                        requests: c.requests.load(Relaxed),
                        errors: c.errors.load(Relaxed),
                        latency: LatencyHistogram {
                            bounds_us: LATENCY_BOUNDS_US.to_vec(),
                            counts: c.counts.iter().map(|n| n.load(Relaxed)).collect(),
                            sum_us: c.sum_ns.load(Relaxed) / 1000,
                        },
                    })
                    .collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_export_and_command() {
        let c = Counters::new(vec!["a".into(), "b".into()]);
        {
            let _open = c.connected(1);
            assert_eq!(c.snapshot()[1].connections_open, 1);
            c.served(1, 1, Instant::now(), true);
            c.served(1, 1, Instant::now(), false);
        }
        let s = c.snapshot();
        assert_eq!((s[1].connections_total, s[1].connections_open), (1, 0));
        assert_eq!(s[0].connections_total, 0);
        let w = &s[1].commands[1];
        assert_eq!((w.command, w.requests, w.errors), ("write", 2, 1));
        assert_eq!(w.latency.counts.iter().sum::<u64>(), 2);
        assert_eq!(w.latency.counts.len(), LATENCY_BOUNDS_US.len() + 1);
    }
}
