//! Which copy a mirrored read (RAID 1, RAID 10) goes to.
//!
//! Decides, after md's raid1 read balancing: a read that continues where the
//! last read planned on a member ended stays on that member (a sequential stream
//! keeps its disk and the disk's read-ahead). Otherwise the read prefers a member
//! that is not serving a stream, and among those the one whose last read was
//! planned longest ago (md takes an idle disk: a member used least recently is
//! the likeliest to be idle), then the one whose head is nearest (the end of its
//! last read: md's head position). Exact ties go round in turn.
//!
//! A member stops counting as serving a stream once `STREAM_GONE` reads have
//! been planned on the array without one continuing it: only a read planned on
//! a member refreshes what is known of it, so a stream flag that never aged
//! would keep a member out of every later read (a random reader that once
//! continued by chance left RAID 10 reading from one member of each pair).
//!
//! md counts a disk idle when it has no read in flight. This module knows only
//! the order reads are planned in, never completions or a clock, so every
//! decision depends on the plan order alone and a replay of the same requests in
//! the same order (the simulator against the real engine) chooses the same
//! copies. What that costs: "idle" is a guess from recency, so two readers that
//! issue at very different rates may share a member now and then.
//!
//! It must never choose a member the caller says is absent, and never hold its
//! lock while anything but the decision runs.

use raidlab_layout::{Geometry, Location};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Reads planned on the array after a member's last one, after which a stream
/// there counts as ended. A live stream's next read comes within about as many
/// reads as there are requests in flight; 128 is four queues of 32, deeper than
/// any load the benchmarks put on one array.
const STREAM_GONE: u64 = 128;

/// What the balancer remembers of a member's reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Head {
    /// Where the last read planned here ended (member byte offset).
    end: u64,
    /// A read was planned here since the array started: only then can a read
    /// continue a stream on it.
    used: bool,
    /// The last read planned here continued a stream.
    streaming: bool,
    /// When the last read was planned here (the array's read count then; 0:
    /// never).
    stamp: u64,
}

#[derive(Debug, Default)]
struct State {
    heads: Vec<Head>,
    /// Reads planned so far.
    count: u64,
    /// Rotates exact ties.
    turn: usize,
}

/// The read balancer of one array.
#[derive(Debug, Default)]
pub struct ReadBalance {
    state: Mutex<State>,
    /// The copies may differ (an unclean start that was not resynced): every
    /// read goes to the first usable copy, as md's raid1 reads the first
    /// in-sync disk above `recovery_cp`, so two reads of the same block
    /// never return different data.
    first_only: AtomicBool,
}

impl ReadBalance {
    pub fn new(members: usize) -> ReadBalance {
        ReadBalance {
            state: Mutex::new(State {
                heads: vec![Head::default(); members],
                ..State::default()
            }),
            first_only: AtomicBool::new(false),
        }
    }

    /// Send every read to the first usable copy while `yes` (the mirrors may
    /// hold different data after an unclean stop, until a resync).
    pub fn first_copy_only(&self, yes: bool) {
        self.first_only.store(yes, Ordering::Release);
    }

    /// The planner's `hint` for a read of `len` bytes at array offset `offset`:
    /// the index, among the copies of its first run on members `present` says
    /// are usable, of the copy to read. Records the read as planned there.
    /// Levels with one copy, and requests the planner will refuse, get 0 and
    /// change nothing.
    pub fn hint(&self, geo: &Geometry, present: &[bool], offset: u64, len: u64) -> usize {
        if !crate::level::of(geo).balanced_reads
            || self.first_only.load(Ordering::Acquire)
            || len == 0
            || offset
                .checked_add(len)
                .filter(|&e| e <= geo.array_bytes())
                .is_none()
        {
            return 0;
        }
        let runs: Vec<(u64, Vec<Location>)> = geo
            .mirror_runs(offset, len)
            .map(|(_, n, locs)| {
                let live = locs
                    .into_iter()
                    .filter(|l| present.get(l.member).copied().unwrap_or(false))
                    .collect();
                (n, live)
            })
            .collect();
        let Some((_, first)) = runs.first() else {
            return 0;
        };
        if first.len() < 2 {
            return 0;
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (pick, continued) = st.decide(first);
        st.count += 1;
        for (n, live) in &runs {
            if let Some(loc) = (!live.is_empty()).then(|| live[pick % live.len()]) {
                st.planned(loc.member, loc.offset + n, continued);
            }
        }
        pick
    }
}

impl State {
    fn head(&self, member: usize) -> Head {
        self.heads.get(member).copied().unwrap_or_default()
    }

    /// Whether `member`'s last read continued a stream that may still be
    /// going on.
    fn serving_stream(&self, member: usize) -> bool {
        let h = self.head(member);
        h.streaming && self.count.saturating_sub(h.stamp) < STREAM_GONE
    }

    /// The index in `copies` (two or more) to read, and whether the read
    /// continues a stream there.
    fn decide(&mut self, copies: &[Location]) -> (usize, bool) {
        let turn = self.turn;
        self.turn = self.turn.wrapping_add(1);
        if let Some(i) = copies.iter().position(|l| {
            let h = self.head(l.member);
            h.used && h.end == l.offset
        }) {
            return (i, true);
        }
        let free: Vec<usize> = (0..copies.len())
            .filter(|&i| !self.serving_stream(copies[i].member))
            .collect();
        let pool: Vec<usize> = if free.is_empty() {
            (0..copies.len()).collect()
        } else {
            free
        };
        let key = |i: usize| {
            let h = self.head(copies[i].member);
            (h.stamp, h.end.abs_diff(copies[i].offset))
        };
        let best = pool.iter().map(|&i| key(i)).min().unwrap_or_default();
        // Exact ties: the first tied copy at or after `turn` in rotation.
        let k = copies.len();
        let pick = (0..k)
            .map(|j| (turn + j) % k)
            .find(|i| pool.contains(i) && key(*i) == best)
            .unwrap_or(0);
        (pick, false)
    }

    /// A read planned on `member` ending at member offset `end`.
    fn planned(&mut self, member: usize, end: u64, continued: bool) {
        if member >= self.heads.len() {
            self.heads.resize(member + 1, Head::default());
        }
        self.heads[member] = Head {
            end,
            used: true,
            streaming: continued,
            stamp: self.count,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raidlab_layout::{Layout, Level};

    const MIB: u64 = 1 << 20;

    fn raid1(n: usize) -> Geometry {
        Geometry::new(
            Level::Raid1,
            Layout::parse(Level::Raid1, None).unwrap(),
            0,
            n,
            1 << 30,
        )
        .unwrap()
    }

    #[test]
    fn a_sequential_stream_keeps_its_member() {
        let g = raid1(2);
        let b = ReadBalance::new(2);
        let all = [true, true];
        let first = b.hint(&g, &all, 0, MIB);
        for i in 1..20 {
            assert_eq!(b.hint(&g, &all, i * MIB, MIB), first, "read {i}");
        }
    }

    #[test]
    fn two_streams_take_one_member_each() {
        let g = raid1(2);
        let b = ReadBalance::new(2);
        let all = [true, true];
        let a0 = b.hint(&g, &all, 0, MIB);
        let b0 = b.hint(&g, &all, 512 * MIB, MIB);
        assert_ne!(a0, b0, "the second stream finds the other member idle");
        for i in 1..10 {
            assert_eq!(b.hint(&g, &all, i * MIB, MIB), a0);
            assert_eq!(b.hint(&g, &all, (512 + i) * MIB, MIB), b0);
        }
    }

    #[test]
    fn a_random_reader_beside_a_scanner_keeps_off_the_scanners_member() {
        let g = raid1(2);
        let b = ReadBalance::new(2);
        let all = [true, true];
        // The scanner keeps two reads planned for each foreground read; the
        // foreground reads a region far from where the scan runs.
        let scan = b.hint(&g, &all, 0, MIB);
        let mut pos = MIB;
        let mut x: u64 = 12345;
        for _ in 0..200 {
            for _ in 0..2 {
                assert_eq!(b.hint(&g, &all, pos, MIB), scan);
                pos += MIB;
            }
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let at = 768 * MIB + (x >> 40) % (128 * MIB) / 4096 * 4096;
            assert_ne!(b.hint(&g, &all, at, 64 << 10), scan, "at {at}");
        }
    }

    #[test]
    fn a_stream_that_ended_frees_its_member_for_random_reads() {
        let g = raid1(2);
        let b = ReadBalance::new(2);
        let all = [true, true];
        // A random reader whose read once began where its previous one on that
        // member ended: a stream of two reads, and then nothing continues it.
        let m = b.hint(&g, &all, 0, 4096);
        assert_eq!(b.hint(&g, &all, 4096, 4096), m);
        let mut x: u64 = 99;
        let mut picks = [0u64; 2];
        for _ in 0..1000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let at = 64 * MIB + (x >> 40) % (512 * MIB) / 4096 * 4096;
            picks[b.hint(&g, &all, at, 4096)] += 1;
        }
        // While the stream may still be going on its member is left alone, and
        // once it has had its chance both members share the reads again.
        assert!(picks[m] >= 1000 / 2 - STREAM_GONE, "{picks:?}");
        assert!(picks[1 - m] <= 1000 / 2 + STREAM_GONE, "{picks:?}");
    }

    #[test]
    fn two_random_readers_take_turns_and_the_nearest_head_breaks_ties() {
        let g = raid1(2);
        let b = ReadBalance::new(2);
        let all = [true, true];
        // Reads far apart, none continuing another: the least recently used
        // member each time, so they alternate as two idle-seeking readers would.
        let picks: Vec<usize> = (0..8)
            .map(|i| b.hint(&g, &all, (i * 97 % 13) * 64 * MIB, 4096))
            .collect();
        for w in picks.windows(2) {
            assert_ne!(w[0], w[1], "{picks:?}");
        }
        // Equally recent (never used): the nearest head wins.
        let mut st = State::default();
        st.planned(0, 100 * MIB, false);
        st.planned(1, 900 * MIB, false);
        let copies = |at| [0, 1].map(|member| Location { member, offset: at });
        assert_eq!(st.decide(&copies(800 * MIB)), (1, false));
        assert_eq!(st.decide(&copies(150 * MIB)), (0, false));
        assert_eq!(st.decide(&copies(100 * MIB)), (0, true));
    }

    #[test]
    fn absent_members_are_never_chosen_and_bad_requests_change_nothing() {
        let g = raid1(3);
        let b = ReadBalance::new(3);
        let present = [true, false, true];
        for i in 0..30 {
            let h = b.hint(&g, &present, (i * 7919 % 1000) * MIB, 4096);
            // The planner reads live[h % live.len()] of the live copies 0 and 2.
            assert!(h < 2, "hint {h}");
        }
        let before = b.state.lock().unwrap().heads.clone();
        assert_eq!(b.hint(&g, &present, g.array_bytes(), 4096), 0);
        assert_eq!(b.hint(&g, &present, u64::MAX - 1, 4096), 0);
        assert_eq!(b.hint(&g, &present, 0, 0), 0);
        assert_eq!(b.state.lock().unwrap().heads, before);
    }
}
