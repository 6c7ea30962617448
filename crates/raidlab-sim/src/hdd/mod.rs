//! A rotating disk in virtual time: seek curve, platter angle, zoned media rate,
//! on-disk read-ahead and write-back cache, and NCQ with shortest positioning time
//! first.
//!
//! Decides: when each request to one disk completes, from the disk's mechanics and
//! firmware policy. It must never read the wall clock or an unseeded random source:
//! the platter's angle is a function of virtual time, so a run is the same on every
//! machine.
//!
//! Geometry, as simplifications the figures tolerate:
//! - The media rate falls linearly in LBA from `outer_mb_per_s` at LBA 0 to
//!   `inner_mb_per_s` at the last LBA (datasheets quote the two ends, not the
//!   radius law).
//! - `tau(x)`, the number of revolutions of media passing the head from LBA 0 to
//!   byte `x`, integrates that rate; its whole part is the track and its fraction the
//!   angle of the byte. Reading `a..b` then takes exactly `rev * (tau(b) - tau(a))`,
//!   so a stream that keeps up costs no rotation and a random one averages half a
//!   revolution.
//! - The cylinder is linear in the capacity fraction (radial position linear in
//!   LBA); cylinders = tracks / heads.

mod cache;
mod params;
mod round;

use crate::device::{Completion, Device, ModelInfo, Ns, Request};
use cache::{ReadSegments, WriteCache};
pub use params::{lee_coefficients, HddParams, ParamError};
use raidlab_core::IoKind;
#[cfg(test)]
use round::trunc;
use round::{floor, fract, ns};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// A command inside the drive, ready (past firmware overhead) at `ready`.
#[derive(Debug, Clone, Copy)]
struct Cmd {
    req: Request,
    ready: Ns,
    /// Where its offset is, once it waits for the media (zeros before),
    /// kept: shortest-positioning-time-first weighs every queued command at
    /// each dispatch, and `tau` is a logarithm.
    at: Place,
}

/// Where a byte is on the platters, as weighing a command needs it: `tau`
/// of the byte, its cylinder, and `tau`'s whole part (the track) and
/// fraction (the angle), each computed once.
#[derive(Debug, Clone, Copy, Default)]
struct Place {
    tau: f64,
    cyl: u64,
    track: f64,
    angle: f64,
}

/// Read-ahead in progress: the head streams from byte `from` (reached at `t0`)
/// towards `limit`; the segment holds `seg_start..` what has been read.
#[derive(Debug, Clone, Copy)]
struct Stream {
    seg_start: u64,
    from: u64,
    t0: Ns,
    limit: u64,
    /// `tau(from)`, and when the head reaches `limit` (`Hdd::stream_avail`
    /// of it), kept up to date: `next_event` asks for the end after every
    /// event, and each is two logarithms.
    tau_from: f64,
    end: Ns,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Read(Cmd, Ns),
    Write(Cmd),
    Destage { len: u64 },
}

#[derive(Debug, Clone, Copy)]
enum Mech {
    Idle,
    Stream(Stream),
    Busy { until: Ns, op: Op },
}

/// A simulated hard disk.
#[derive(Debug)]
pub struct Hdd {
    name: String,
    sources: Vec<String>,
    p: HddParams,
    rev: f64,
    /// Media rate at the outer and inner edge, bytes per ns.
    ro: f64,
    ri: f64,
    cylinders: u64,
    seek_a: f64,
    seek_b: f64,
    link_ns_per_byte: f64,
    seg_bytes: u64,
    host_q: VecDeque<(Request, Ns)>,
    in_drive: u32,
    arriving: VecDeque<Cmd>,
    media_q: Vec<Cmd>,
    space_wait: VecDeque<Cmd>,
    done: BinaryHeap<Reverse<(Ns, u64)>>,
    mech: Mech,
    head: u64,
    segments: ReadSegments,
    cache: WriteCache,
    ctrl_free: Ns,
    link_free: Ns,
}

/// Where the head is, for weighing commands: its cylinder, and its track
/// (`floor(tau)`, a logarithm) once a command on the same cylinder asks.
struct HeadPos {
    at: u64,
    cyl: u64,
    track: Option<f64>,
}

impl Hdd {
    pub fn new(name: &str, p: HddParams, sources: Vec<String>) -> Result<Hdd, ParamError> {
        p.validate()?;
        let (seek_a, seek_b) = lee_coefficients(
            p.track_to_track_ms,
            p.average_seek_ms,
            p.full_stroke_seek_ms,
        );
        let mut d = Hdd {
            name: name.into(),
            sources,
            rev: 60e9 / p.rpm,
            ro: p.outer_mb_per_s * 1e-3,
            ri: p.inner_mb_per_s * 1e-3,
            cylinders: 1,
            seek_a: seek_a * 1e6,
            seek_b: seek_b * 1e6,
            // 8b/10b: ten line bits per byte, so Gbit/s * 100 = MB/s.
            link_ns_per_byte: 1.0 / (p.interface_gbit_per_s * 100.0 * 1e-3),
            seg_bytes: (p.cache_bytes / 4).max(4096),
            host_q: VecDeque::new(),
            in_drive: 0,
            arriving: VecDeque::new(),
            media_q: Vec::new(),
            space_wait: VecDeque::new(),
            done: BinaryHeap::new(),
            mech: Mech::Idle,
            head: 0,
            segments: ReadSegments::new((p.cache_bytes / 4).max(4096)),
            cache: WriteCache::new((p.cache_bytes / 2).max(4096), (p.cache_bytes / 4).max(4096)),
            ctrl_free: 0,
            link_free: 0,
            p,
        };
        let tracks = d.tau(d.p.capacity_bytes);
        d.cylinders = ((tracks / d.p.heads as f64).ceil() as u64).max(2);
        Ok(d)
    }

    pub fn params(&self) -> &HddParams {
        &self.p
    }

    /// Revolutions of media from LBA 0 to byte `x` (the integral of 1/(rate*rev)).
    fn tau(&self, x: u64) -> f64 {
        let c = self.p.capacity_bytes as f64;
        let u = x as f64 / c;
        let k = self.ri - self.ro;
        if k.abs() < 1e-12 * self.ro {
            return x as f64 / (self.ro * self.rev);
        }
        c / (self.rev * k) * ((self.ro + k * u) / self.ro).ln()
    }

    fn tau_inv(&self, t: f64) -> u64 {
        let c = self.p.capacity_bytes as f64;
        let k = self.ri - self.ro;
        let x = if k.abs() < 1e-12 * self.ro {
            t * self.ro * self.rev
        } else {
            let r = self.ro * (t * self.rev * k / c).exp();
            (r - self.ro) / k * c
        };
        (x.max(0.0) as u64).min(self.p.capacity_bytes)
    }

    #[cfg(test)]
    fn media_ns(&self, a: u64, b: u64) -> f64 {
        self.media_from_ns(self.tau(a), b)
    }

    /// [`Hdd::media_ns`] with `tau(a)` already known.
    fn media_from_ns(&self, tau_a: f64, b: u64) -> f64 {
        self.rev * (self.tau(b) - tau_a)
    }

    fn cylinder(&self, x: u64) -> u64 {
        let f = x as f64 / self.p.capacity_bytes as f64;
        ((f * self.cylinders as f64) as u64).min(self.cylinders - 1)
    }

    /// Seek or head switch from the track under the head to the one holding `x`.
    #[cfg(test)]
    fn seek_ns(&self, from: u64, to: u64) -> f64 {
        let mut head = self.head_pos(from);
        let to = self.place(to);
        self.seek_to_ns(&mut head, to.cyl, to.track)
    }

    /// Byte `x`'s place ([`Place`]).
    fn place(&self, x: u64) -> Place {
        let tau = self.tau(x);
        Place {
            tau,
            cyl: self.cylinder(x),
            track: floor(tau),
            angle: fract(tau),
        }
    }

    fn head_pos(&self, at: u64) -> HeadPos {
        HeadPos {
            at,
            cyl: self.cylinder(at),
            track: None,
        }
    }

    /// Seek or head switch from `head` to track `track` (`floor(tau)` of a
    /// byte on it) on cylinder `cyl`.
    fn seek_to_ns(&self, head: &mut HeadPos, cyl: u64, track: f64) -> f64 {
        let d = head.cyl.abs_diff(cyl);
        if d == 0 {
            let at = match head.track {
                Some(t) => t,
                None => *head.track.insert(floor(self.tau(head.at))),
            };
            if at == track {
                0.0
            } else {
                self.p.head_switch_ms * 1e6
            }
        } else {
            // The longest move is N-1 cylinders; it must cost the full stroke.
            let f = (d - 1) as f64 / (self.cylinders - 2).max(1) as f64;
            self.p.track_to_track_ms * 1e6 + self.seek_a * f.sqrt() + self.seek_b * f
        }
    }

    /// Time from `t` (head on `self.head`'s track) until byte `x` passes under the
    /// head, given the data may not go to the media before `not_before`.
    #[cfg(test)]
    fn position_ns(&self, t: Ns, x: u64, not_before: Ns) -> f64 {
        let mut head = self.head_pos(self.head);
        self.position_at_ns(&mut head, t, &self.place(x), not_before)
    }

    /// [`Hdd::position_ns`] with the head's place and the byte's already
    /// known.
    fn position_at_ns(&self, head: &mut HeadPos, t: Ns, x: &Place, not_before: Ns) -> f64 {
        let arrive = (t as f64 + self.seek_to_ns(head, x.cyl, x.track)).max(not_before as f64);
        let angle = fract(arrive / self.rev);
        let target = x.angle;
        let mut turn = (target - angle).rem_euclid(1.0);
        // Times are whole nanoseconds, so a stream that continues exactly where
        // the head is may land a hair past its sector; that is no revolution.
        if turn > 1.0 - 1e-6 {
            turn = 0.0;
        }
        let wait = turn * self.rev;
        arrive + wait - t as f64
    }

    fn stream_reached(&self, s: &Stream, t: Ns) -> u64 {
        let turns = t.saturating_sub(s.t0) as f64 / self.rev;
        self.tau_inv(s.tau_from + turns).clamp(s.from, s.limit)
    }

    fn stream_avail(&self, s: &Stream, x: u64) -> Ns {
        s.t0 + ns(self.media_from_ns(s.tau_from, x.max(s.from)))
    }

    /// A stream from `from` (reached at `t0`) towards `limit`, its end known.
    fn stream(&self, seg_start: u64, from: u64, t0: Ns, limit: u64) -> Stream {
        let mut s = Stream {
            seg_start,
            from,
            t0,
            limit,
            tau_from: self.tau(from),
            end: 0,
        };
        s.end = self.stream_avail(&s, limit);
        s
    }

    /// Send `len` bytes over the link, starting no earlier than `start` and
    /// finishing no earlier than `data_end`; the link is shared by all commands.
    fn link(&mut self, start: Ns, len: u64, data_end: Ns) -> Ns {
        let s = start.max(self.link_free);
        self.link_free = s + ns(len as f64 * self.link_ns_per_byte);
        self.link_free.max(data_end)
    }

    /// Stop read-ahead at `t`, keeping what it read.
    fn stop_stream(&mut self, t: Ns) {
        if let Mech::Stream(s) = self.mech {
            let reached = self.stream_reached(&s, t);
            self.head = reached;
            self.mech = Mech::Idle;
            self.segments.keep(s.seg_start, reached);
        }
    }

    fn admit(&mut self, t: Ns, req: Request) {
        self.in_drive += 1;
        let ready = t.max(self.ctrl_free) + ns(self.p.command_overhead_us * 1e3);
        self.ctrl_free = ready;
        self.arriving.push_back(Cmd {
            req,
            ready,
            at: Place::default(),
        });
    }

    /// Queue `c` for the media, its `tau` known from now on.
    fn queue_for_media(&mut self, mut c: Cmd) {
        c.at = self.place(c.req.offset);
        self.media_q.push(c);
    }

    /// A command past its firmware overhead: answer from cache or queue for media.
    fn classify(&mut self, t: Ns, c: Cmd) {
        let (a, b) = (c.req.offset, c.req.offset + c.req.len);
        match c.req.kind {
            IoKind::Trim => self.done.push(Reverse((t, c.req.id))),
            IoKind::Flush => {
                if self.cache.flush(c.req.id) {
                    self.done.push(Reverse((t, c.req.id)));
                }
            }
            IoKind::Read => {
                if let Mech::Stream(mut s) = self.mech {
                    // Waiting for read-ahead pays only while the data is in the
                    // buffer or passes under the head within a revolution; data
                    // further along the stream is cheaper to seek to.
                    let soon = a <= self.stream_reached(&s, t)
                        || self.stream_avail(&s, a) as f64 <= t as f64 + self.rev;
                    if a >= s.seg_start && a <= s.limit && soon {
                        s.limit = (b + self.seg_bytes.max(b - a)).min(self.p.capacity_bytes);
                        s.seg_start = a;
                        s.end = self.stream_avail(&s, s.limit);
                        self.mech = Mech::Stream(s);
                        let at = self.link(t, c.req.len, self.stream_avail(&s, b));
                        self.done.push(Reverse((at, c.req.id)));
                        return;
                    }
                }
                if self.segments.covers(a, b) {
                    let at = self.link(t, c.req.len, t);
                    self.done.push(Reverse((at, c.req.id)));
                } else {
                    self.queue_for_media(c);
                }
            }
            // No write-zeroes command is modelled: the zeros are written.
            IoKind::Write | IoKind::Zero => {
                self.segments.overwrite(a, b);
                if let Mech::Stream(s) = self.mech {
                    // Read-ahead of data being overwritten is stale: stop it and
                    // keep none of it.
                    if a < s.limit && s.seg_start < b {
                        self.head = self.stream_reached(&s, t);
                        self.mech = Mech::Idle;
                    }
                }
                if self.p.write_cache && self.cache.takes(c.req.len) {
                    self.space_wait.push_back(c);
                    self.take_cached_writes(t);
                } else {
                    self.queue_for_media(c);
                }
            }
        }
    }

    /// Acknowledge waiting writes, in order, while they fit in the cache.
    fn take_cached_writes(&mut self, t: Ns) {
        while let Some(c) = self.space_wait.front().copied() {
            if !self.cache.fits(c.req.len) {
                break;
            }
            self.space_wait.pop_front();
            let at = self.link(t, c.req.len, t);
            self.done.push(Reverse((at, c.req.id)));
            self.cache.insert(c.req.offset, c.req.offset + c.req.len);
        }
    }

    /// Whether write-back may take the mechanism now. A read-ahead in progress
    /// keeps it (drives serve a sequential reader before idle write-back; a
    /// destage between two reads of a stream would cost each read a seek and a
    /// revolution) unless the cache is three-quarters full of dirty data, a
    /// write waits for room, or a flush waits.
    fn destage_now(&self) -> bool {
        !matches!(self.mech, Mech::Stream(_))
            || self.cache.pressed()
            || !self.space_wait.is_empty()
            || self.cache.flush_waiting()
    }

    /// Give the mechanism its next job if it has none it cannot interrupt.
    fn dispatch(&mut self, t: Ns) {
        if matches!(self.mech, Mech::Busy { .. }) {
            return;
        }
        if !self.media_q.is_empty() {
            self.stop_stream(t);
            let mut head = self.head_pos(self.head);
            // Shortest positioning time first; ties go to the oldest. A
            // read's start is its positioning time from now, so the winner's
            // is kept.
            let (pick, read_pos) = if self.p.ncq_depth == 1 {
                (0, None)
            } else {
                let mut best = (f64::INFINITY, 0);
                for (i, c) in self.media_q.iter().enumerate() {
                    let cost = self.position_at_ns(&mut head, t, &c.at, t);
                    if cost < best.0 {
                        best = (cost, i);
                    }
                }
                // None when no cost was below infinity (then the first
                // goes, its start weighed again, as before this was kept).
                (best.1, (best.0 < f64::INFINITY).then_some(best.0))
            };
            let c = self.media_q.remove(pick);
            let b = c.req.offset + c.req.len;
            let media = ns(self.media_from_ns(c.at.tau, b));
            let (start, op) = if c.req.kind == IoKind::Read {
                let pos = match read_pos {
                    Some(p) => p,
                    None => self.position_at_ns(&mut head, t, &c.at, t),
                };
                let start = t + ns(pos);
                (start, Op::Read(c, start))
            } else {
                // The media may start once it cannot overtake the data still
                // arriving over the link.
                let link_start = t.max(self.link_free);
                let xfer = self.link(t, c.req.len, t);
                let not_before = link_start.max(xfer.saturating_sub(media));
                (
                    t + ns(self.position_at_ns(&mut head, t, &c.at, not_before)),
                    Op::Write(c),
                )
            };
            let until = start + media;
            self.mech = Mech::Busy { until, op };
            self.head = b;
        } else if let Some(d) = self
            .destage_now()
            .then(|| self.cache.start_destage(self.head))
            .flatten()
        {
            self.stop_stream(t);
            let mut head = self.head_pos(self.head);
            let at = self.place(d.start);
            let pos = self.position_at_ns(&mut head, t, &at, t);
            let start = t + ns(pos);
            let until = start + ns(self.media_from_ns(at.tau, d.end));
            self.mech = Mech::Busy {
                until,
                op: Op::Destage {
                    len: d.end - d.start,
                },
            };
            self.head = d.end;
        }
    }

    fn finish(&mut self, t: Ns, op: Op) {
        self.mech = Mech::Idle;
        match op {
            Op::Read(c, start) => {
                let (a, b) = (c.req.offset, c.req.offset + c.req.len);
                let at = self.link(start, c.req.len, t);
                self.done.push(Reverse((at, c.req.id)));
                let limit = (b + self.seg_bytes.max(b - a)).min(self.p.capacity_bytes);
                if self.p.read_ahead && limit > b {
                    self.mech = Mech::Stream(self.stream(a, b, t, limit));
                } else {
                    self.segments.keep(a, b);
                }
            }
            Op::Write(c) => self.done.push(Reverse((t, c.req.id))),
            Op::Destage { len } => {
                // A flush waits for every write acknowledged before it.
                for id in self.cache.finish_destage(len) {
                    self.done.push(Reverse((t, id)));
                }
                self.take_cached_writes(t);
            }
        }
    }

    fn stream_end(&self) -> Option<Ns> {
        match self.mech {
            Mech::Stream(s) => Some(s.end),
            _ => None,
        }
    }
}

impl Device for Hdd {
    fn capacity(&self) -> u64 {
        self.p.capacity_bytes
    }

    fn submit(&mut self, now: Ns, req: Request) {
        if self.in_drive < self.p.ncq_depth && self.host_q.is_empty() {
            self.admit(now, req);
        } else {
            self.host_q.push_back((req, now));
        }
    }

    fn next_event(&self) -> Option<Ns> {
        // The earliest of what is due, written out: the array of four
        // options flattened was a tenth of a RAID 6 of HDDs' host time (it
        // is asked after every event, by `advance` and by the array).
        fn min(a: Option<Ns>, b: Option<Ns>) -> Option<Ns> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, None) => a,
                (None, b) => b,
            }
        }
        let mech = match self.mech {
            Mech::Busy { until, .. } => Some(until),
            Mech::Stream(s) => Some(s.end),
            Mech::Idle => None,
        };
        min(
            min(
                self.done.peek().map(|r| r.0 .0),
                self.arriving.front().map(|c| c.ready),
            ),
            mech,
        )
    }

    fn advance(&mut self, now: Ns, out: &mut Vec<Completion>) {
        while let Some(t) = self.next_event().filter(|&t| t <= now) {
            if let Some(&Reverse((at, id))) = self.done.peek().filter(|r| r.0 .0 == t) {
                self.done.pop();
                out.push(Completion { id, at });
                self.in_drive -= 1;
                if let Some((req, _)) = self.host_q.pop_front() {
                    self.admit(t, req);
                }
                continue;
            }
            if self.arriving.front().is_some_and(|c| c.ready == t) {
                if let Some(c) = self.arriving.pop_front() {
                    self.classify(t, c);
                }
            } else if let Mech::Busy { until, op } = self.mech {
                if until == t {
                    self.finish(t, op);
                }
            } else if self.stream_end() == Some(t) {
                self.stop_stream(t);
            }
            self.dispatch(t);
        }
    }

    fn info(&self) -> ModelInfo {
        ModelInfo::device("hdd", &self.name, self.p.params(), self.sources.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk() -> Hdd {
        let p = crate::presets::builtin()
            .ok()
            .and_then(|all| all.into_iter().find(|p| p.name == "hdd-7200"))
            .map(|p| p.model);
        match p {
            Some(crate::presets::Model::Hdd(mut p)) => {
                p.capacity_bytes = 1_000_000_000_000;
                Hdd::new("t", p, vec![]).expect("valid")
            }
            other => panic!("hdd-7200 preset: {other:?}"),
        }
    }

    #[test]
    fn lee_curve_reproduces_min_average_and_full_stroke() {
        let (min, avg, max) = (0.8, 8.5, 16.0);
        let (a, b) = lee_coefficients(min, avg, max);
        let t = |f: f64| min + a * f.sqrt() + b * f;
        assert!((t(0.0) - min).abs() < 1e-12);
        assert!((t(1.0) - max).abs() < 1e-9);
        // Mean over two uniform random positions: distance density 2(1-f).
        let n = 200_000;
        let mean: f64 = (0..n)
            .map(|i| {
                let f = (i as f64 + 0.5) / n as f64;
                t(f) * 2.0 * (1.0 - f) / n as f64
            })
            .sum();
        assert!((mean - avg).abs() < 1e-3, "mean seek {mean}");
        // The model's own seeks: one cylinder, full stroke, none.
        let d = disk();
        let cyl = d.p.capacity_bytes / d.cylinders;
        assert!((d.seek_ns(0, cyl + 1) - 0.8e6).abs() < 1.0);
        assert!((d.seek_ns(0, d.p.capacity_bytes - 1) - 16e6).abs() < 1.0);
        assert_eq!(d.seek_ns(4096, 8192), 0.0);
    }

    #[test]
    fn media_rate_is_zoned_and_tau_inverts() {
        let d = disk();
        let cap = d.p.capacity_bytes;
        // 1 MB at the start takes 1/160 s, at the end 1/80 s.
        assert!((d.media_ns(0, 1_000_000) / 6.25e6 - 1.0).abs() < 1e-4);
        assert!((d.media_ns(cap - 1_000_000, cap) / 12.5e6 - 1.0).abs() < 1e-4);
        for x in [0, 4096, cap / 3, cap - 512] {
            assert!(d.tau_inv(d.tau(x)).abs_diff(x) <= 1, "{x}");
        }
    }

    #[test]
    fn rounding_helpers_match_the_library_bit_for_bit() {
        let mut xs = vec![
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            -0.5,
            -2.5,
            0.49999999999999994,
            4_503_599_627_370_495.5,
            4_503_599_627_370_496.0,
            9_007_199_254_740_993.0,
            1.8446744073709552e19,
            3e19,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        // Times and revolutions as the model makes them, and their neighbours.
        let mut x = 1e-3f64;
        while x < 1e22 {
            for v in [x, x * 1.37, x + 0.5, -x] {
                xs.extend([
                    v,
                    f64::from_bits(v.to_bits() + 1),
                    f64::from_bits(v.to_bits() - 1),
                ]);
            }
            x *= 3.1;
        }
        let d = disk();
        xs.extend((0..1000u64).map(|i| d.tau(i * (d.p.capacity_bytes / 1000))));
        for x in xs {
            assert_eq!(ns(x), x.max(0.0).round() as Ns, "ns({x:e})");
            assert_eq!(fract(x).to_bits(), x.fract().to_bits(), "fract({x:e})");
            assert_eq!(trunc(x).to_bits(), x.trunc().to_bits(), "trunc({x:e})");
            assert_eq!(floor(x).to_bits(), x.floor().to_bits(), "floor({x:e})");
        }
    }

    #[test]
    fn a_continuing_stream_costs_no_rotation_and_a_late_one_a_turn() {
        let mut d = disk();
        d.head = 1 << 20;
        // The head reaches byte 1 MiB at the time it has turned tau(1 MiB).
        let t = ns(d.tau(1 << 20) * d.rev);
        assert!(d.position_ns(t, 1 << 20, t) < 1.0);
        let late = d.position_ns(t + 1000, 1 << 20, t + 1000);
        assert!((late - (d.rev - 1000.0)).abs() < 2.0, "{late}");
    }
}
