//! A device whose service is fixed by construction: a delay per request, one
//! request at a time, and a token-bucket bandwidth cap. It models a member
//! built from nbdkit's filters (noparallel serialize=all-requests, delay
//! rdelay/wdelay, rate rate/burstiness; scripts/nbd-delay-lib.sh), the device
//! the simulator is checked against the real engine on (scripts/sim-vs-real.sh).
//!
//! Decides: only its own service time, as those filters give it. A request
//! waits its turn (first come, first served), then its delay (reads
//! `read_delay_ms`; writes, write-zeroes and trims `write_delay_ms`; flushes
//! none: the delay filter does not delay them), then, for reads and writes, the
//! bucket of its direction: the bucket gains `rate_mb_per_s` worth of bits over
//! virtual time up to `burst_s` of them, starts full, and a request short of
//! bits waits until the missing ones have accrued (nbdkit's bucket_run). So a
//! busy device serves a request in max(delay, bits / rate) once the bucket is
//! empty, not delay + bits / rate: the bucket refills during the delay.
//! A read or write larger than `max_transfer_bytes` reaches nbdkit in pieces
//! of that size (the last one the rest), one after the other, each with its
//! delay and its bits: the member's loop device splits it at its queue's
//! max_sectors_kb, which sim-vs-real.sh sets to this size (nbd-delay-lib.sh;
//! nbdkit's log filter shows every 1 MiB request then arriving as two 512
//! KiB ones), and the host's plug merges none past it
//! ([`Device::max_request_bytes`]).
//! Every request, and every piece of one, also pays `stack_latency_us`: what
//! the loop device, FUSE, nbdfuse and the socket add in front of nbdkit,
//! measured on the member alone.
//! It must never stand in for a disk or SSD (no seek, no cache, no queueing
//! inside): the HDD and SSD models are for those.

use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request, MS, SEC};
use crate::hdd::ParamError;
use crate::serial::Serial;
use raidlab_core::IoKind;

/// The filters' settings, each unit in its name.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedParams {
    pub capacity_bytes: u64,
    /// nbdkit delay filter's rdelay, as it applies it (whole milliseconds).
    pub read_delay_ms: f64,
    /// wdelay: writes, write-zeroes and trims.
    pub write_delay_ms: f64,
    /// The rate filter's rate in decimal MB/s (its bits per second / 8e6);
    /// 0: no rate filter.
    pub rate_mb_per_s: f64,
    /// The rate filter's burstiness: the bucket holds this many seconds of rate.
    pub burst_s: f64,
    /// The most one read or write carries when it reaches nbdkit, in bytes:
    /// the member loop device's max_sectors_kb (a larger one is split into
    /// pieces of this size, the last the rest, served one after the other;
    /// the host's plug merges none past it); 0: never split.
    #[serde(default)]
    pub max_transfer_bytes: u64,
    /// What the stack in front of nbdkit (the loop device, FUSE, nbdfuse,
    /// the socket) adds to every request, and every piece of one, in µs,
    /// inside the one-at-a-time service (at depth it does not overlap:
    /// measured, the preset's sources).
    #[serde(default)]
    pub stack_latency_us: f64,
}

impl FixedParams {
    /// Check every value, naming the first key that makes no device.
    pub fn validate(&self) -> Result<(), ParamError> {
        let non_negative = |key: &'static str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(ParamError {
                    key,
                    message: format!("must be zero or more, is {v}"),
                })
            }
        };
        if self.capacity_bytes == 0 {
            return Err(ParamError {
                key: "capacity_bytes",
                message: "must be positive".into(),
            });
        }
        non_negative("read_delay_ms", self.read_delay_ms)?;
        non_negative("write_delay_ms", self.write_delay_ms)?;
        non_negative("rate_mb_per_s", self.rate_mb_per_s)?;
        non_negative("burst_s", self.burst_s)?;
        non_negative("stack_latency_us", self.stack_latency_us)?;
        if self.rate_mb_per_s > 0.0 && self.burst_s == 0.0 {
            // nbdkit would then sleep for every bit of every request: a rate
            // with no bucket is not what its filter does by default either.
            return Err(ParamError {
                key: "burst_s",
                message: "must be positive when rate_mb_per_s is set".into(),
            });
        }
        Ok(())
    }

    /// Every parameter with its unit, for `ModelInfo`.
    pub fn params(&self) -> Vec<Param> {
        let p = Param::new;
        vec![
            p("capacity_bytes", self.capacity_bytes as f64, "bytes"),
            p("read_delay_ms", self.read_delay_ms, "ms"),
            p("write_delay_ms", self.write_delay_ms, "ms"),
            p("rate_mb_per_s", self.rate_mb_per_s, "MB/s"),
            p("burst_s", self.burst_s, "s"),
            p(
                "max_transfer_bytes",
                self.max_transfer_bytes as f64,
                "bytes",
            ),
            p("stack_latency_us", self.stack_latency_us, "µs"),
        ]
    }
}

/// nbdkit's token bucket in virtual time: bits, refilled on use.
#[derive(Debug, Clone)]
struct Bucket {
    /// Bits per second; 0 is no limit.
    rate: u64,
    capacity: u64,
    level: u64,
    /// When the bucket was last refilled.
    at: Ns,
}

impl Bucket {
    fn new(rate: u64, burst_s: f64) -> Bucket {
        let capacity = (rate as f64 * burst_s) as u64;
        Bucket {
            rate,
            capacity,
            level: capacity,
            at: 0,
        }
    }

    /// Take `bits` at `now`; returns when the request may go on.
    fn take(&mut self, now: Ns, bits: u64) -> Ns {
        if self.rate == 0 {
            return now;
        }
        let add = (self.rate as u128 * (now - self.at) as u128 / SEC as u128) as u64;
        self.level = (self.level + add.min(self.capacity - self.level)).min(self.capacity);
        self.at = now;
        if self.level >= bits {
            self.level -= bits;
            return now;
        }
        // Short: what is there goes, the rest accrues while the request sleeps
        // and is spent at once.
        let missing = bits - self.level;
        let wait = (missing as u128 * SEC as u128).div_ceil(self.rate as u128) as Ns;
        self.level = 0;
        self.at = now + wait;
        now + wait
    }
}

/// One member behind nbdkit's noparallel, delay and rate filters.
#[derive(Debug, Clone)]
pub struct Fixed {
    name: String,
    params: FixedParams,
    sources: Vec<String>,
    service: Service,
    serial: Serial,
}

/// How long a request takes: the delay filter's, then the rate filter's.
#[derive(Debug, Clone)]
struct Service {
    read_delay: Ns,
    write_delay: Ns,
    read_bucket: Bucket,
    write_bucket: Bucket,
    /// 0: no split.
    max_transfer: u64,
    stack: Ns,
}

impl Fixed {
    pub fn new(name: &str, params: FixedParams, sources: Vec<String>) -> Result<Fixed, ParamError> {
        params.validate()?;
        let ns = |ms: f64| (ms * MS as f64).round() as Ns;
        let rate = (params.rate_mb_per_s * 8e6).round() as u64;
        Ok(Fixed {
            name: name.into(),
            service: Service {
                read_delay: ns(params.read_delay_ms),
                write_delay: ns(params.write_delay_ms),
                read_bucket: Bucket::new(rate, params.burst_s),
                write_bucket: Bucket::new(rate, params.burst_s),
                max_transfer: params.max_transfer_bytes,
                stack: (params.stack_latency_us * 1e3).round() as Ns,
            },
            params,
            sources,
            serial: Serial::default(),
        })
    }
}

impl Service {
    /// When a request started at `start` completes (moves the buckets).
    fn finish_time(&mut self, start: Ns, r: &Request) -> Ns {
        // Reads and writes over the largest transfer arrive as that many
        // pieces, one after the other (noparallel serves nothing between
        // them: they are the only request of this device in flight).
        let pieces = match self.max_transfer {
            0 => 1,
            m => r.len.div_ceil(m).max(1),
        };
        // The block layer splits at max_sectors: whole pieces, then the rest.
        let max = self.max_transfer;
        let piece_bits = |i: u64| match max {
            0 => r.len * 8,
            m => m.min(r.len - i * m) * 8,
        };
        let stack = self.stack;
        match r.kind {
            IoKind::Read => (0..pieces).fold(start, |t, i| {
                self.read_bucket
                    .take(t + stack + self.read_delay, piece_bits(i))
            }),
            IoKind::Write => (0..pieces).fold(start, |t, i| {
                self.write_bucket
                    .take(t + stack + self.write_delay, piece_bits(i))
            }),
            // The rate filter counts only reads and writes.
            IoKind::Zero | IoKind::Trim => start + stack + self.write_delay,
            IoKind::Flush => start + stack,
        }
    }
}

impl Device for Fixed {
    fn capacity(&self) -> u64 {
        self.params.capacity_bytes
    }
    fn submit(&mut self, now: Ns, req: Request) {
        let service = &mut self.service;
        self.serial
            .submit(now, req, |start, r| service.finish_time(start, r));
    }
    fn next_event(&self) -> Option<Ns> {
        self.serial.next_event()
    }
    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        let service = &mut self.service;
        self.serial
            .advance(now, done, |start, r| service.finish_time(start, r));
    }
    fn max_request_bytes(&self) -> u64 {
        self.params.max_transfer_bytes
    }
    fn info(&self) -> ModelInfo {
        ModelInfo::device(
            "fixed",
            &self.name,
            self.params.params(),
            self.sources.clone(),
        )
    }
}
