//! A flash SSD in virtual time: controller, host link, channels and dies, a write
//! buffer, a log-structured write point and garbage collection.
//!
//! Decides: when each request to one SSD completes, from the flash timings and the
//! drive's parallelism. It must never read the wall clock or an unseeded random
//! source; garbage collection's cost comes from a closed form, not from sampling.
//!
//! Layout: logical page `n` (of `page_bytes`) is read from die `n mod dies`, dies
//! numbered channel first (die `d` sits on channel `d mod channels`), so a request
//! of several pages spreads over channels, then over dies on a channel. Writes go
//! to a log-structured write point that moves round-robin over the dies in the same
//! order, one page at a time, whatever their logical address.
//!
//! Every die and every channel is a server with a busy-until time, reserved in
//! request order (first come, first served), so each request costs O(pages) and
//! O(log n) heap work, with no per-request scan of the drive.
//!
//! A read's data crosses the host link at `interface_mb_per_s x link_efficiency`
//! (SATA's line rate after 8b/10b, less its framing), after an ECC decode of
//! `ecc_decode_us` per page that delays the read but occupies no server (the
//! decoders are pipelined beside the channels).
//!
//! Mapping state is a bitmap of mapped logical pages (one bit per page: 7.6 MB for
//! 1 TB of 16 KiB pages), not a full page map with reverse pointers (two u32 per
//! page would be 500 MB at 1 TB). What a full map would give, the valid pages in a
//! garbage-collection victim, comes instead from the greedy/LRW steady-state
//! formula of Desnoyers ("Analytic Modeling of SSD Write Performance", SYSTOR
//! 2012): under uniform random writes with `rho` = live pages / physical pages,
//! the victim's valid fraction `v` solves `v = exp(-(1 - v) / rho)` (write
//! amplification `1 / (1 - v)`, equal to his `a / (a + W(-a e^-a))`, `a = 1/rho`).
//! Trimmed pages are not live, so trimming lowers `rho` and the cost of later GC.

use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request};
use crate::hdd::ParamError;
use raidlab_core::IoKind;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Interface {
    Sata,
    Nvme,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Never written: every physical page is free, no GC until the spare runs out.
    Fresh,
    /// Full and rewritten at random long enough that GC runs on every block.
    Steady,
}

/// An SSD's parameters, every unit in its name. Sizes are bytes, rates decimal MB/s.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdParams {
    pub capacity_bytes: u64,
    pub interface: Interface,
    /// SATA only: commands queued in the drive (1..=32).
    #[serde(default)]
    pub ncq_depth: Option<u32>,
    /// NVMe only: submission queues and the depth of each.
    #[serde(default)]
    pub queues: Option<u32>,
    #[serde(default)]
    pub queue_depth: Option<u32>,
    pub interface_mb_per_s: f64,
    pub channels: u32,
    pub dies_per_channel: u32,
    pub page_bytes: u64,
    pub read_us: f64,
    pub program_us: f64,
    pub erase_ms: f64,
    pub pages_per_block: u32,
    pub channel_mb_per_s: f64,
    /// Controller time per command, serialised (one command processor).
    pub command_overhead_us: f64,
    /// Controller time a write costs beyond `command_overhead_us`, on the same
    /// processor (its mapping update and buffer allocation). 0, the default,
    /// where no source separates writes from reads.
    #[serde(default)]
    pub write_overhead_us: f64,
    /// Share of `interface_mb_per_s` left for data once the link's own
    /// protocol is paid (on SATA: each Data FIS's header, CRC and delimiters,
    /// the flow-control and ALIGN primitives, the command and status FISes).
    /// 1.0, the default, when `interface_mb_per_s` is already a payload rate.
    #[serde(default = "full_link")]
    pub link_efficiency: f64,
    /// Error-correction decode time per page read, after the page crosses the
    /// channel. Decoders are pipelined beside the channels, so this delays each
    /// read without occupying a die, a channel or the command processor.
    /// 0, the default, where no source gives a figure.
    #[serde(default)]
    pub ecc_decode_us: f64,
    pub write_buffer_bytes: u64,
    /// Spare flash as a fraction of the user capacity (0.07 = 7%).
    pub over_provisioning: f64,
    pub state: State,
}

fn full_link() -> f64 {
    1.0
}

fn bad(key: &'static str, message: impl Into<String>) -> ParamError {
    ParamError {
        key,
        message: message.into(),
    }
}

impl SsdParams {
    /// How many commands the drive holds at once.
    pub fn device_queue(&self) -> u32 {
        match self.interface {
            Interface::Sata => self.ncq_depth.unwrap_or(1),
            Interface::Nvme => self
                .queues
                .unwrap_or(1)
                .saturating_mul(self.queue_depth.unwrap_or(1)),
        }
    }

    /// Check every value, naming the first key that makes no SSD.
    pub fn validate(&self) -> Result<(), ParamError> {
        let pos = |key: &'static str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(bad(key, format!("must be positive, is {v}")))
            }
        };
        let non_negative = |key: &'static str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(bad(key, format!("must not be negative, is {v}")))
            }
        };
        if self.capacity_bytes == 0 || self.capacity_bytes % 512 != 0 {
            return Err(bad(
                "capacity_bytes",
                format!(
                    "must be a positive multiple of 512, is {}",
                    self.capacity_bytes
                ),
            ));
        }
        match self.interface {
            Interface::Sata => {
                match self.ncq_depth {
                    Some(1..=32) => {}
                    Some(n) => return Err(bad("ncq_depth", format!("must be 1..=32, is {n}"))),
                    None => return Err(bad("ncq_depth", "a SATA SSD needs ncq_depth (1..=32)")),
                }
                if self.queues.is_some() {
                    return Err(bad("queues", "is for NVMe; SATA has ncq_depth"));
                }
                if self.queue_depth.is_some() {
                    return Err(bad("queue_depth", "is for NVMe; SATA has ncq_depth"));
                }
            }
            Interface::Nvme => {
                if self.ncq_depth.is_some() {
                    return Err(bad(
                        "ncq_depth",
                        "is for SATA; NVMe has queues and queue_depth",
                    ));
                }
                match self.queues {
                    Some(1..=65535) => {}
                    _ => return Err(bad("queues", "an NVMe SSD needs queues (1..=65535)")),
                }
                match self.queue_depth {
                    Some(1..=65536) => {}
                    _ => {
                        return Err(bad(
                            "queue_depth",
                            "an NVMe SSD needs queue_depth (1..=65536)",
                        ))
                    }
                }
            }
        }
        pos("interface_mb_per_s", self.interface_mb_per_s)?;
        if self.channels == 0 {
            return Err(bad("channels", "must be at least 1"));
        }
        if self.dies_per_channel == 0 {
            return Err(bad("dies_per_channel", "must be at least 1"));
        }
        if self.page_bytes < 512 || self.page_bytes % 512 != 0 {
            return Err(bad("page_bytes", "must be a positive multiple of 512"));
        }
        if self.capacity_bytes < self.page_bytes {
            return Err(bad("capacity_bytes", "is smaller than one page"));
        }
        pos("read_us", self.read_us)?;
        pos("program_us", self.program_us)?;
        pos("erase_ms", self.erase_ms)?;
        if self.pages_per_block < 2 {
            return Err(bad("pages_per_block", "must be at least 2"));
        }
        pos("channel_mb_per_s", self.channel_mb_per_s)?;
        non_negative("command_overhead_us", self.command_overhead_us)?;
        non_negative("write_overhead_us", self.write_overhead_us)?;
        non_negative("ecc_decode_us", self.ecc_decode_us)?;
        if !(self.link_efficiency > 0.0 && self.link_efficiency <= 1.0) {
            return Err(bad(
                "link_efficiency",
                format!(
                    "must be above 0 and at most 1 (a share of interface_mb_per_s), is {}",
                    self.link_efficiency
                ),
            ));
        }
        if self.write_buffer_bytes < self.page_bytes {
            return Err(bad(
                "write_buffer_bytes",
                "must hold at least one page (page_bytes)",
            ));
        }
        if !(self.over_provisioning > 0.0 && self.over_provisioning <= 10.0) {
            return Err(bad(
                "over_provisioning",
                format!(
                    "must be above 0 (GC needs spare flash) and at most 10, is {}",
                    self.over_provisioning
                ),
            ));
        }
        Ok(())
    }

    /// Every parameter with its unit, for `ModelInfo`.
    pub fn params(&self) -> Vec<Param> {
        let p = Param::new;
        let mut v = vec![
            p("capacity_bytes", self.capacity_bytes as f64, "bytes"),
            p(
                "interface_nvme",
                (self.interface == Interface::Nvme) as u8 as f64,
                "bool",
            ),
        ];
        match self.interface {
            Interface::Sata => v.push(p(
                "ncq_depth",
                self.ncq_depth.unwrap_or(0) as f64,
                "commands",
            )),
            Interface::Nvme => {
                v.push(p("queues", self.queues.unwrap_or(0) as f64, "queues"));
                v.push(p(
                    "queue_depth",
                    self.queue_depth.unwrap_or(0) as f64,
                    "commands",
                ));
            }
        }
        v.extend([
            p("interface_mb_per_s", self.interface_mb_per_s, "MB/s"),
            p("channels", self.channels as f64, "channels"),
            p("dies_per_channel", self.dies_per_channel as f64, "dies"),
            p("page_bytes", self.page_bytes as f64, "bytes"),
            p("read_us", self.read_us, "us"),
            p("program_us", self.program_us, "us"),
            p("erase_ms", self.erase_ms, "ms"),
            p("pages_per_block", self.pages_per_block as f64, "pages"),
            p("channel_mb_per_s", self.channel_mb_per_s, "MB/s"),
            p("command_overhead_us", self.command_overhead_us, "us"),
            p("write_overhead_us", self.write_overhead_us, "us"),
            p("link_efficiency", self.link_efficiency, "fraction"),
            p("ecc_decode_us", self.ecc_decode_us, "us"),
            p(
                "write_buffer_bytes",
                self.write_buffer_bytes as f64,
                "bytes",
            ),
            p("over_provisioning", self.over_provisioning, "fraction"),
            p(
                "state_steady",
                (self.state == State::Steady) as u8 as f64,
                "bool",
            ),
        ]);
        v
    }
}

/// The valid fraction of a GC victim when `rho` of the physical pages are live
/// (see the module doc): the root of `v = exp(-(1 - v)/rho)` below 1. The
/// function `g(v) = v - exp(-(1-v)/rho)` is concave, negative at 0 and zero at 1,
/// positive just below 1 when `rho < 1`, so bisection finds the one root in (0, 1).
pub fn greedy_valid_fraction(rho: f64) -> f64 {
    if rho <= 0.0 {
        return 0.0;
    }
    if rho >= 1.0 {
        return 1.0;
    }
    let g = |v: f64| v - (-(1.0 - v) / rho).exp();
    let (mut lo, mut hi) = (0.0f64, 1.0 - 1e-12);
    for _ in 0..64 {
        let mid = 0.5 * (lo + hi);
        if g(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// A simulated SSD.
#[derive(Debug)]
pub struct Ssd {
    name: String,
    sources: Vec<String>,
    p: SsdParams,
    dies: usize,
    overhead: Ns,
    write_overhead: Ns,
    t_read: Ns,
    t_prog: Ns,
    t_erase: Ns,
    t_ecc: Ns,
    chan_ns_per_byte: f64,
    link_ns_per_byte: f64,
    die_free: Vec<Ns>,
    chan_free: Vec<Ns>,
    ctrl_free: Ns,
    link_free: Ns,
    queue_limit: u32,
    in_dev: u32,
    host_q: VecDeque<Request>,
    done: BinaryHeap<Reverse<(Ns, u64)>>,
    /// Mapped logical pages, one bit each.
    mapped: Vec<u64>,
    mapped_pages: u64,
    physical_pages: u64,
    /// Free (erased) physical pages; may dip below zero by less than a block while
    /// GC catches up.
    free_pages: i64,
    gc_low: i64,
    /// Valid fraction cached with the live-page count it was computed for.
    gc_valid: (u64, f64),
    gc_carry: f64,
    write_point: usize,
    buf_used: u64,
    buf_release: BinaryHeap<Reverse<(Ns, u64)>>,
    last_ack: Ns,
    partial: u64,
    last_prog_end: Ns,
    clock: Ns,
    /// Counters for tests and reports.
    pub gc_blocks: u64,
    pub gc_copied_pages: u64,
    pub programmed_pages: u64,
}

fn ns(x: f64) -> Ns {
    x.max(0.0).round() as Ns
}

impl Ssd {
    pub fn new(name: &str, p: SsdParams, sources: Vec<String>) -> Result<Ssd, ParamError> {
        p.validate()?;
        let dies = (p.channels * p.dies_per_channel) as usize;
        let user_pages = p.capacity_bytes.div_ceil(p.page_bytes);
        let physical_pages = ((user_pages as f64) * (1.0 + p.over_provisioning)).ceil() as u64;
        let words = user_pages.div_ceil(64) as usize;
        let gc_low = (dies as i64) * p.pages_per_block as i64;
        let (mapped, mapped_pages, free_pages) = match p.state {
            State::Fresh => (vec![0u64; words], 0, physical_pages as i64),
            State::Steady => {
                let mut m = vec![!0u64; words];
                let tail = user_pages % 64;
                if tail != 0 {
                    if let Some(last) = m.last_mut() {
                        *last = (1u64 << tail) - 1;
                    }
                }
                (m, user_pages, gc_low)
            }
        };
        Ok(Ssd {
            name: name.into(),
            sources,
            dies,
            overhead: ns(p.command_overhead_us * 1e3),
            write_overhead: ns(p.write_overhead_us * 1e3),
            t_read: ns(p.read_us * 1e3),
            t_prog: ns(p.program_us * 1e3),
            t_erase: ns(p.erase_ms * 1e6),
            t_ecc: ns(p.ecc_decode_us * 1e3),
            chan_ns_per_byte: 1e3 / p.channel_mb_per_s,
            link_ns_per_byte: 1e3 / (p.interface_mb_per_s * p.link_efficiency),
            die_free: vec![0; dies],
            chan_free: vec![0; p.channels as usize],
            ctrl_free: 0,
            link_free: 0,
            queue_limit: p.device_queue(),
            in_dev: 0,
            host_q: VecDeque::new(),
            done: BinaryHeap::new(),
            mapped,
            mapped_pages,
            physical_pages,
            free_pages,
            gc_low,
            gc_valid: (u64::MAX, 0.0),
            gc_carry: 0.0,
            write_point: 0,
            buf_used: 0,
            buf_release: BinaryHeap::new(),
            last_ack: 0,
            partial: 0,
            last_prog_end: 0,
            clock: 0,
            gc_blocks: 0,
            gc_copied_pages: 0,
            programmed_pages: 0,
            p,
        })
    }

    pub fn params(&self) -> &SsdParams {
        &self.p
    }

    /// Live (mapped) pages as a fraction of the physical pages.
    pub fn live_fraction(&self) -> f64 {
        self.mapped_pages as f64 / self.physical_pages as f64
    }

    fn channel_of(&self, die: usize) -> usize {
        die % self.p.channels as usize
    }

    fn start(&mut self, t: Ns, req: Request) {
        self.in_dev += 1;
        let extra = if matches!(req.kind, IoKind::Write | IoKind::Zero) {
            self.write_overhead
        } else {
            0
        };
        let s = t.max(self.ctrl_free) + self.overhead + extra;
        self.ctrl_free = s;
        let at = match req.kind {
            IoKind::Read => self.read(s, req),
            // No write-zeroes command is modelled: the zeros are programmed.
            IoKind::Write | IoKind::Zero => self.write(s, req),
            IoKind::Trim => {
                self.trim(req);
                s
            }
            IoKind::Flush => {
                if self.partial > 0 {
                    // The buffered tail is programmed as a padded page.
                    let bytes = std::mem::take(&mut self.partial);
                    self.program_page(s, bytes);
                }
                s.max(self.last_prog_end)
            }
        };
        self.done.push(Reverse((at, req.id)));
    }

    fn read(&mut self, s: Ns, req: Request) -> Ns {
        let pb = self.p.page_bytes;
        let (mut first, mut last) = (Ns::MAX, s);
        let mut off = req.offset;
        let end = req.offset + req.len;
        while off < end {
            let page = off / pb;
            let bytes = ((page + 1) * pb).min(end) - off;
            let die = (page % self.dies as u64) as usize;
            let ch = self.channel_of(die);
            let sensed = s.max(self.die_free[die]) + self.t_read;
            let xfer_end =
                sensed.max(self.chan_free[ch]) + ns(bytes as f64 * self.chan_ns_per_byte);
            self.die_free[die] = xfer_end;
            self.chan_free[ch] = xfer_end;
            let decoded = xfer_end + self.t_ecc;
            first = first.min(decoded);
            last = last.max(decoded);
            off += bytes;
        }
        if first == Ns::MAX {
            first = s;
        }
        // The link streams the data out as it arrives from the channels.
        let ls = first.max(self.link_free);
        self.link_free = ls + ns(req.len as f64 * self.link_ns_per_byte);
        self.link_free.max(last)
    }

    fn write(&mut self, s: Ns, req: Request) -> Ns {
        let ls = s.max(self.link_free);
        self.link_free = ls + ns(req.len as f64 * self.link_ns_per_byte);
        // Writes enter the buffer in order; one that does not fit waits for
        // programs to free space.
        let mut ack = self.link_free.max(self.last_ack);
        let cap = self.p.write_buffer_bytes;
        let len = req.len.min(cap);
        loop {
            while let Some(&Reverse((at, bytes))) = self.buf_release.peek() {
                if at > ack {
                    break;
                }
                self.buf_release.pop();
                self.buf_used -= bytes;
            }
            if self.buf_used + len <= cap {
                break;
            }
            match self.buf_release.peek() {
                Some(&Reverse((at, _))) => ack = at,
                None => break,
            }
        }
        // A request larger than the buffer may overfill it; later writes then
        // wait until its pages are programmed.
        self.buf_used += req.len;
        self.last_ack = ack;
        self.map(req.offset, req.len);
        self.partial += req.len;
        while self.partial >= self.p.page_bytes {
            self.partial -= self.p.page_bytes;
            self.program_page(ack, self.p.page_bytes);
        }
        ack
    }

    /// Program one page holding `bytes` of buffered data at the write point,
    /// after any GC it needs; the buffer space is freed when the program ends.
    fn program_page(&mut self, t: Ns, bytes: u64) {
        let die = self.write_point;
        self.write_point = (self.write_point + 1) % self.dies;
        if self.free_pages <= self.gc_low {
            self.collect(die);
        }
        self.free_pages -= 1;
        let ch = self.channel_of(die);
        let xfer_end =
            t.max(self.chan_free[ch]) + ns(self.p.page_bytes as f64 * self.chan_ns_per_byte);
        self.chan_free[ch] = xfer_end;
        let end = xfer_end.max(self.die_free[die]) + self.t_prog;
        self.die_free[die] = end;
        self.last_prog_end = self.last_prog_end.max(end);
        self.programmed_pages += 1;
        self.buf_release.push(Reverse((end, bytes)));
    }

    /// Reclaim one block on `die`: copy its valid pages inside the die (read +
    /// program each, no channel transfer) and erase it.
    fn collect(&mut self, die: usize) {
        if self.gc_valid.0.abs_diff(self.mapped_pages) > self.physical_pages / 1000 {
            self.gc_valid = (
                self.mapped_pages,
                greedy_valid_fraction(self.live_fraction()),
            );
        }
        let exact = self.gc_valid.1 * self.p.pages_per_block as f64 + self.gc_carry;
        let copies = (exact.floor() as u64).min(self.p.pages_per_block as u64 - 1);
        self.gc_carry = exact - copies as f64;
        let cost = copies * (self.t_read + self.t_prog) + self.t_erase;
        self.die_free[die] = self.die_free[die].max(self.clock) + cost;
        self.last_prog_end = self.last_prog_end.max(self.die_free[die]);
        self.free_pages += self.p.pages_per_block as i64 - copies as i64;
        self.gc_blocks += 1;
        self.gc_copied_pages += copies;
    }

    fn map(&mut self, offset: u64, len: u64) {
        let pb = self.p.page_bytes;
        for page in offset / pb..(offset + len).div_ceil(pb) {
            let (w, b) = ((page / 64) as usize, page % 64);
            if let Some(word) = self.mapped.get_mut(w) {
                if *word & (1 << b) == 0 {
                    *word |= 1 << b;
                    self.mapped_pages += 1;
                }
            }
        }
    }

    /// Unmap the pages the range covers completely.
    fn trim(&mut self, req: Request) {
        let pb = self.p.page_bytes;
        let (mut page, end) = (req.offset.div_ceil(pb), (req.offset + req.len) / pb);
        while page < end {
            let (w, b) = ((page / 64) as usize, page % 64);
            // Whole words at once, so trimming a whole drive is not a page loop.
            let n = (64 - b).min(end - page);
            let mask = if n == 64 {
                !0u64
            } else {
                ((1u64 << n) - 1) << b
            };
            if let Some(word) = self.mapped.get_mut(w) {
                self.mapped_pages -= (*word & mask).count_ones() as u64;
                *word &= !mask;
            }
            page += n;
        }
    }
}

impl Device for Ssd {
    fn capacity(&self) -> u64 {
        self.p.capacity_bytes
    }

    fn submit(&mut self, now: Ns, req: Request) {
        self.clock = self.clock.max(now);
        if self.in_dev < self.queue_limit && self.host_q.is_empty() {
            self.start(now, req);
        } else {
            self.host_q.push_back(req);
        }
    }

    fn next_event(&self) -> Option<Ns> {
        let internal = (self.last_prog_end > self.clock).then_some(self.last_prog_end);
        match (self.done.peek().map(|r| r.0 .0), internal) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn advance(&mut self, now: Ns, out: &mut Vec<Completion>) {
        self.clock = self.clock.max(now);
        while let Some(&Reverse((at, id))) = self.done.peek() {
            if at > now {
                break;
            }
            self.done.pop();
            out.push(Completion { id, at });
            self.in_dev -= 1;
            if let Some(req) = self.host_q.pop_front() {
                self.start(at, req);
            }
        }
    }

    fn info(&self) -> ModelInfo {
        ModelInfo::device("ssd", &self.name, self.p.params(), self.sources.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_valid_fraction_solves_its_equation() {
        for rho in [0.5, 0.8, 1.0 / 1.07, 0.99] {
            let v = greedy_valid_fraction(rho);
            assert!(v > 0.0 && v < 1.0);
            assert!((v - (-(1.0 - v) / rho).exp()).abs() < 1e-9, "{rho}: {v}");
        }
        // 7% spare on a full drive: write amplification about 7.6 (LRW bound).
        let wa = 1.0 / (1.0 - greedy_valid_fraction(1.0 / 1.07));
        assert!((7.0..8.5).contains(&wa), "{wa}");
        // More spare, less copying.
        assert!(greedy_valid_fraction(0.5) < greedy_valid_fraction(0.8));
    }
}
