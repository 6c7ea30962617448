//! md's bitmap daemon, as a decision: which write-intent bits a write holds
//! while it runs, and which bits a pass of the daemon may clear. md marks a
//! chunk dirty before a write reaches the members and clears it only after
//! the chunk has been idle for two of the daemon's passes (its per-chunk
//! counter falls 2, 1, 0 at `daemon_sleep` intervals, 5 s by default from
//! the bitmap header), so that after a crash a resync covers only the chunks
//! written in the last few seconds, not everything written since the array
//! started.
//!
//! Decides: the bitmap chunks a write plan covers, the writes under way on
//! each chunk, and the two-pass clearing rule (never on a degraded array,
//! where the bits say what a returning member missed). It never reads a
//! clock or writes a device: the owner calls [`Daemon::pass`] every
//! [`Daemon::sleep`] and writes the bitmap afterwards, after the members'
//! writes are durable. When a pass is due is the long run
//! `Array::bitmap_daemon_schedule` gives (`crate::long_run`), driven by a
//! served array's poll and by the daemon's thread (the simulator's task)
//! alike.

use crate::plan::{Plan, Space};
use raidlab_core::IoKind;
use raidlab_md::bitmap::Bitmap;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::time::Duration;

/// The member (or, on RAID 10, array) sector ranges `[start, start+len)`
/// whose bitmap bits a write must hold: md counts RAID 10's bitmap in array
/// sectors (`host`, the request's byte range, when the plans change any
/// data) and every other level's in member sectors (the member operations
/// of `plans` that change data: writes, trims and write-zeroes, as md's
/// bitmap counts a discard as a write). Plans that only read hold no bit.
pub fn write_sectors<'a>(
    by_array_sector: bool,
    plans: impl IntoIterator<Item = &'a Plan>,
    host: (u64, u64),
) -> Vec<(u64, u64)> {
    let sectors =
        |offset: u64, len: u64| (offset / 512, (offset + len).div_ceil(512) - offset / 512);
    let changes = |kind: IoKind| kind != IoKind::Read && kind != IoKind::Flush;
    let changing = |p: &'a Plan| {
        p.steps
            .iter()
            .filter_map(|s| match s {
                crate::plan::Step::Io(ops) => Some(ops.iter()),
                _ => None,
            })
            .flatten()
            .filter(move |op| changes(op.kind))
    };
    let mut plans = plans.into_iter().filter(|p| p.space == Space::Data);
    if by_array_sector {
        if plans.any(|p| changing(p).next().is_some()) && host.1 > 0 {
            return vec![sectors(host.0, host.1)];
        }
        return Vec::new();
    }
    plans
        .flat_map(changing)
        .filter(|op| op.length > 0)
        .map(|op| sectors(op.offset, op.length))
        .collect()
}

/// The bitmap chunks the sector ranges cover (sorted, each once), within a
/// bitmap of `chunks` chunks of `chunk_sectors` sectors.
pub fn chunks_of(ranges: &[(u64, u64)], chunk_sectors: u64, chunks: u64) -> Vec<u64> {
    let last = chunks.saturating_sub(1);
    let mut out: Vec<u64> = ranges
        .iter()
        .filter(|r| r.1 > 0)
        .flat_map(|&(start, len)| {
            (start / chunk_sectors).min(last)..=((start + len - 1) / chunk_sectors).min(last)
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// md's bitmap daemon for one array: the writes under way per chunk and the
/// chunks one pass has already found idle.
#[derive(Debug, Default, Clone)]
pub struct Daemon {
    /// Writes under way on each chunk (md's counter above 2).
    busy: FxHashMap<u64, u32>,
    /// Dirty chunks the last pass found idle (md's counter at 1).
    idle_once: BTreeSet<u64>,
}

impl Daemon {
    /// The interval between passes the bitmap's header asks for (md's
    /// `daemon_sleep`, whole seconds; at least one).
    pub fn sleep(bitmap: &Bitmap) -> Duration {
        Duration::from_secs(u64::from(bitmap.sb.daemon_sleep.max(1)))
    }

    /// A write covering `chunks` begins (its bits are set, or being set).
    pub fn start(&mut self, chunks: &[u64]) {
        for &c in chunks {
            *self.busy.entry(c).or_default() += 1;
            self.idle_once.remove(&c);
        }
    }

    /// A write counted by [`Daemon::start`] ended, however it ended.
    pub fn done(&mut self, chunks: &[u64]) {
        for c in chunks {
            if let Some(n) = self.busy.get_mut(c) {
                *n -= 1;
                if *n == 0 {
                    self.busy.remove(c);
                }
            }
        }
    }

    /// Whether any write is under way.
    pub fn writing(&self) -> bool {
        !self.busy.is_empty()
    }

    /// One pass over `bitmap`: clear the bits of chunks idle since the last
    /// pass, note the others idle now. Returns the chunks it cleared; the
    /// owner writes the bitmap out when there are any, after making
    /// the members' earlier writes durable (md's bitmap write carries a
    /// cache flush before it). On a degraded array nothing changes: the bits
    /// are what a member that comes back needs resynced.
    pub fn pass(&mut self, bitmap: &mut Bitmap, degraded: bool) -> raidlab_core::Result<Vec<u64>> {
        if degraded {
            self.idle_once.clear();
            return Ok(Vec::new());
        }
        let cs = bitmap.sb.chunk_sectors();
        let dirty: Vec<u64> = bitmap
            .dirty_ranges()
            .flat_map(|(start, len)| start / cs..(start + len).div_ceil(cs))
            .collect();
        let mut cleared = Vec::new();
        let mut seen = BTreeSet::new();
        for c in dirty {
            if self.busy.contains_key(&c) {
                continue;
            }
            if self.idle_once.contains(&c) {
                bitmap.clear(c)?;
                cleared.push(c);
            } else {
                seen.insert(c);
            }
        }
        self.idle_once = seen;
        Ok(cleared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raidlab_md::bitmap::new_internal;
    use raidlab_md::superblock::{new_member, NewArray};

    fn bitmap() -> Bitmap {
        let array = NewArray {
            uuid: [1; 16],
            name: "t".into(),
            level: 1,
            layout: 0,
            chunk_sectors: 0,
            raid_disks: 2,
            member_sectors: 1 << 21,
            data_offset_sectors: 2048,
            total_devices: 2,
            clean: true,
        };
        let mut sb = new_member(&array, 0, 0, [0; 16], (1 << 21) + 2048, 0);
        let mut bm = new_internal(&mut sb, Some(64 << 10)).unwrap();
        bm.clear_all();
        bm
    }

    /// A trim or write-zeroes changes what a member holds as a write does:
    /// a member that misses it must find its bit set when it is re-added
    /// (found by the torture sweep with stale members: a trim on a degraded
    /// RAID 1 marked nothing, so the re-added copy kept the old data).
    #[test]
    fn trims_and_write_zeroes_hold_bits_as_writes_do_and_reads_hold_none() {
        use crate::plan::{MemberOp, Step};
        let plan = |kind: IoKind| Plan {
            space: Space::Data,
            steps: vec![Step::Io(vec![MemberOp {
                kind,
                member: 0,
                offset: 4096,
                length: 8192,
                buf: crate::plan::Slice::user(0, 0),
            }])],
            scratch: Vec::new(),
            locks: Vec::new(),
        };
        for kind in [IoKind::Write, IoKind::Trim, IoKind::Zero] {
            assert_eq!(
                write_sectors(false, [&plan(kind)], (0, 8192)),
                vec![(8, 16)],
                "{kind:?}"
            );
        }
        for kind in [IoKind::Read, IoKind::Flush] {
            assert!(write_sectors(false, [&plan(kind)], (0, 8192)).is_empty());
            assert!(write_sectors(true, [&plan(kind)], (0, 8192)).is_empty());
        }
        assert_eq!(
            write_sectors(true, [&plan(IoKind::Trim)], (1024, 512)),
            vec![(2, 1)]
        );
    }

    #[test]
    fn a_bit_is_cleared_on_the_second_idle_pass_and_not_while_written() {
        let mut bm = bitmap();
        let cs = bm.sb.chunk_sectors();
        let mut d = Daemon::default();
        bm.set(3).unwrap();
        bm.set(5).unwrap();
        d.start(&[5]);
        assert_eq!(
            d.pass(&mut bm, false).unwrap().len(),
            0,
            "first pass only notes"
        );
        assert!(bm.is_dirty(3) && bm.is_dirty(5));
        assert_eq!(d.pass(&mut bm, false).unwrap().len(), 1);
        assert!(!bm.is_dirty(3), "idle for two passes: cleared");
        assert!(bm.is_dirty(5), "a write under way holds its bit");
        d.done(&[5]);
        // A new write between passes starts the count again.
        assert_eq!(d.pass(&mut bm, false).unwrap().len(), 0);
        d.start(&[5]);
        d.done(&[5]);
        assert_eq!(d.pass(&mut bm, false).unwrap().len(), 0);
        assert_eq!(d.pass(&mut bm, false).unwrap().len(), 1);
        assert_eq!(bm.dirty_count(), 0);
        assert_eq!(chunks_of(&[(cs * 2 - 1, 2)], cs, bm.chunks()), vec![1, 2]);
    }

    #[test]
    fn a_degraded_array_keeps_its_bits() {
        let mut bm = bitmap();
        let mut d = Daemon::default();
        bm.set(7).unwrap();
        for _ in 0..4 {
            assert_eq!(d.pass(&mut bm, true).unwrap().len(), 0);
        }
        assert!(bm.is_dirty(7));
        // Back in service, it takes two passes again.
        assert_eq!(d.pass(&mut bm, false).unwrap().len(), 0);
        assert_eq!(d.pass(&mut bm, false).unwrap().len(), 1);
    }
}
