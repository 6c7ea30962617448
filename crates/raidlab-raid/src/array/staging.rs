//! Where the stripe cache (`crate::stripe_cache`) stands in an array's request
//! path: started for a parity array that writes, between the array's volume
//! interface and its write path (`write_direct`), with a thread that writes
//! out what waited past the hold time; the read and write paths below it;
//! and the counts of how writes reached the members. It decides when the cache runs and how it is reached; what is
//! held and when it leaves is the cache's to decide.

use super::*;
use crate::stripe_cache::{Below, StripeCacheConfig, StripeCacheStats};
use std::time::Duration;

impl Array {
    /// A read straight from the members (below the stripe cache).
    pub(super) fn read_direct(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        for (pos, n) in self.pieces(offset, buf.len() as u64) {
            let start = (pos - offset) as usize;
            let piece = &mut buf[start..start + n as usize];
            // A member read error is repaired and the read retried; each retry has
            // one member fewer or a rewritten block, so this ends.
            for attempt in 0.. {
                let take_outs = self.take_outs();
                let view = self.view();
                let plan = self
                    .with_live(&view, |live| self.read_plan(live, pos, n))
                    .map_err(|e| e.on_device(&self.name))?;
                let held = self.locks.lock(&plan.locks);
                // A member taken out while this read waited for its locks
                // may hold blocks a failed write left stale: plan without it.
                if !self.is_current(&view, take_outs) {
                    drop(held);
                    continue;
                }
                // Nothing below needs the plan once it ran: a recording
                // executor keeps it instead of a copy.
                match self.executor.run_owned(
                    plan,
                    &view.members,
                    self.engine,
                    UserBuf::Read(&mut *piece),
                    crate::exec::Hooks::NONE,
                ) {
                    Ok(()) => {
                        drop(held);
                        break;
                    }
                    Err(f) if attempt < self.failed.len() + 3 => {
                        drop(held);
                        self.handle_failure(f, &view, pos, n)?;
                    }
                    Err(f) => return Err(*f.error),
                }
            }
            self.heal_listed(pos, n);
        }
        Ok(())
    }

    /// `f` of the live roles ([`Array::live_in`]), in a vector on the stack
    /// for arrays of up to 64 roles: a read's path allocated one per read.
    fn with_live<T>(&self, view: &Membership, f: impl FnOnce(&[bool]) -> T) -> T {
        let n = view.present.len();
        if n > MASK_ROLES {
            return f(&self.live_in(view));
        }
        let mut live = [false; MASK_ROLES];
        for (r, l) in live[..n].iter_mut().enumerate() {
            *l = self.member_live(view, r);
        }
        f(&live[..n])
    }

    /// A write straight down the write path (below the stripe cache): plan,
    /// lock, log, execute, piece by piece.
    pub(super) fn write_direct(&self, buf: &[u8], offset: u64) -> Result<()> {
        // A held write going down after the array failed is refused too.
        self.refuse_when_failed(Op::Write, offset, buf.len() as u64)?;
        match self.write_log() {
            WriteLog::Ppl(log) => self.write_logged(log, buf, offset),
            WriteLog::Journal(journal) => {
                // Journaled writes go one at a time (they already wait for each
                // other's journal flush): the page merge below reads, then writes.
                let _one = journal.serial();
                self.write_journaled(journal, buf, offset)
            }
            log => {
                for (pos, n) in self.pieces(offset, buf.len() as u64) {
                    let start = (pos - offset) as usize;
                    self.write_piece(&buf[start..start + n as usize], pos, log)?;
                }
                Ok(())
            }
        }
    }

    /// Flush every member in service (a member that cannot is taken out).
    pub(super) fn flush_members_now(&self) -> Result<()> {
        self.flush_members_in(None)
    }

    /// The roles a plain write of `[offset, offset+len)` writes, as the
    /// write path plans it now: the members a FUA write must flush
    /// afterwards. With a partial parity log, the log writes were made
    /// durable by their own plan, so only the data plan's roles remain; with
    /// a write journal, none (the write is durable once in the journal,
    /// which its plan flushed; a replay after a crash puts it on the
    /// members). During a rebuild the role being rebuilt counts as written
    /// (its target is flushed beside the members). `None` where a plan
    /// cannot be made, and every member is flushed.
    pub(super) fn members_written_by(&self, offset: u64, len: u64) -> Option<Vec<usize>> {
        let view = self.view();
        let log = self.write_log();
        if matches!(log, WriteLog::Journal(_)) {
            return Some(Vec::new());
        }
        let mut live = self.live_in(&view);
        // Bytes whose member is missing live only in their stripe's parity,
        // computed with the other data chunks as the members hold them now,
        // perhaps still in a member's volatile cache (a held write the stripe
        // cache wrote out with this one). Made durable alone, parity would
        // rebuild those bytes from chunks that may go back to their old
        // contents at a power cut, and a partial parity log cannot mend a
        // row whose modified chunk is missing: every member is flushed. (A role
        // being rebuilt counts as missing here.)
        if self.rules.write_hole && self.lands_on_missing(&live, offset, len) {
            return None;
        }
        if let Some(r) = view.recovery.as_ref() {
            if let Some(l) = live.get_mut(r.role) {
                *l = true;
            }
        }
        let mut roles = Vec::new();
        for (pos, n) in self.pieces(offset, len) {
            let plan = log
                .plan(&self.geometry, &live, pos, n, self.unsynced_from(), None)
                .ok()?;
            roles.extend(plan.writes().map(|op| op.member));
        }
        roles.sort_unstable();
        roles.dedup();
        Some(roles)
    }

    /// Whether any byte of `[offset, offset+len)` of a parity array lies on a
    /// data member not in `live`.
    fn lands_on_missing(&self, live: &[bool], offset: u64, len: u64) -> bool {
        let chunk = self.geometry.chunk_bytes;
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let (member, _, _) = self.geometry.parity_location(at);
            if !live.get(member).copied().unwrap_or(false) {
                return true;
            }
            at = (at / chunk + 1) * chunk;
        }
        false
    }

    /// Flush the members in service among `roles` (every member in service
    /// when `None`); a member that cannot is taken out.
    pub(super) fn flush_members_in(&self, roles: Option<&[usize]>) -> Result<()> {
        let view = self.view();
        let live = self.live_in(&view);
        let wanted: Vec<usize> = (0..view.members.len())
            .filter(|&r| {
                let wanted = roles.map_or(true, |roles| roles.contains(&r));
                wanted && (live[r] || super::durability::rebuilding(&view) == Some(r))
            })
            .collect();
        // One plan: the flushes overlap. Every flush of the step is tried
        // even when one fails.
        if let Err(failed) = self.run_flush_plan(&view, &wanted) {
            if failed.members.is_empty() {
                return Err(*failed.error);
            }
            for &r in &failed.members {
                // A member that cannot make its writes durable is out.
                self.take_out(r, &view);
            }
        }
        let missing = self.missing_now();
        if self.geometry.survives(&missing) {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::Io,
                Op::Flush,
                format!("flush failed on too many members (roles {missing:?})"),
            )
            .on_device(&self.name))
        }
    }

    /// Count a write plan that read members as read-modify-write (it read
    /// parity) or reconstruct-write (it read only data).
    pub(super) fn count_method(&self, plan: &Plan) {
        let g = &self.geometry;
        if self.rules.family != crate::level::Family::Parity {
            return;
        }
        let mut reads = plan.reads().peekable();
        if reads.peek().is_none() {
            return;
        }
        // One spare map for every read (a new one per read was 2 % of a
        // simulated write).
        let parity = crate::planner::with_stripe_map(|map| {
            reads.any(|op| {
                g.stripe_into(op.offset / g.chunk_bytes, map);
                op.member == map.p || map.q == Some(op.member)
            })
        });
        let c = if parity {
            &self.plans_rmw
        } else {
            &self.plans_rcw
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Start holding partial-stripe writes (parity arrays that write; others
    /// gain nothing): `config`'s size and hold time, the hold measured on
    /// `clock`, whose sleeps also pace a thread that writes out what waited
    /// too long. Once per array; later calls only change the tunables.
    pub fn start_stripe_cache(
        self: &Arc<Self>,
        config: StripeCacheConfig,
        clock: raidlab_core::SharedClock,
    ) -> Result<()> {
        if !self.install_stripe_cache(config, clock.clone())? {
            return Ok(());
        }
        let weak = Arc::downgrade(self);
        std::thread::Builder::new()
            .name(format!("stripe cache {}", self.name))
            .spawn(move || Array::stripe_cache_thread(weak, clock, config.hold))
            .map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    Op::Open,
                    format!("cannot start the stripe cache's thread: {e}"),
                )
                .on_device(&self.name)
            })?;
        Ok(())
    }

    /// The stripe cache's thread: every tick (half the hold time, within 1 to
    /// 100 ms) of `clock`, write out what has waited longer than the hold
    /// time, oldest first. A periodic long run on the one driver
    /// (`long_run`), its period following the hold time as it is tuned.
    /// Returns when the array is gone. The simulator runs this same loop as
    /// a task on its virtual clock.
    pub fn stripe_cache_thread(
        weak: std::sync::Weak<Array>,
        clock: raidlab_core::SharedClock,
        hold: Duration,
    ) {
        let tick = ExpiryTicks::tick_of(hold);
        let mut run = crate::long_run::LongRun::every(tick, clock.now()).unsliced();
        let mut ticks = ExpiryTicks { array: &weak, tick };
        // The array dropped is the only stop; a tick's failure is kept by
        // the cache for the next flush to report, so nothing ends the run.
        let _ = run.drive(clock.as_ref(), &|| weak.strong_count() == 0, &mut ticks);
    }

    /// Start the stripe cache with no thread of its own: whoever drives the
    /// array calls [`Array::write_out_expired`] as `clock` moves (the simulator,
    /// whose clock is virtual and whose runs must not depend on a thread's
    /// timing). Same rules as [`Array::start_stripe_cache`] otherwise.
    pub fn start_stripe_cache_driven(
        &self,
        config: StripeCacheConfig,
        clock: raidlab_core::SharedClock,
    ) -> Result<()> {
        self.install_stripe_cache(config, clock).map(|_| ())
    }

    /// Whether a new cache was installed (false: none needed, or one runs and
    /// only its tunables changed).
    fn install_stripe_cache(
        &self,
        config: StripeCacheConfig,
        clock: raidlab_core::SharedClock,
    ) -> Result<bool> {
        if !self.rules.stripe_cache || self.read_only {
            return Ok(false);
        }
        if let Some(cache) = self.stripe_cache.get() {
            cache.set_config(config, self)?;
            return Ok(false);
        }
        if config.kept_rows > crate::kept_rows::MOST_ROWS {
            return Err(Error::invalid(format!(
                "{} kept rows asked; at most {} (md's largest stripe_cache_size), each a 4 KiB page of every member: give --kept-rows (or kept_rows) {} or less",
                config.kept_rows,
                crate::kept_rows::MOST_ROWS,
                crate::kept_rows::MOST_ROWS
            ))
            .on_device(&self.name));
        }
        if config.kept_rows > 0 && !self.members_buffered_files() {
            let _ = self.kept.set(crate::kept_rows::KeptRows::new(
                self.geometry.raid_disks,
                config.kept_rows,
            ));
        }
        let stripe = self.geometry.chunk_bytes * self.geometry.data_disks() as u64;
        Ok(self
            .stripe_cache
            .set(StripeCache::new(stripe, config, clock))
            .is_ok())
    }

    /// Write out the held stripes whose hold time has passed on the cache's
    /// clock (what the cache's own thread does on every tick).
    pub fn write_out_expired(&self) -> Result<()> {
        match self.stripe_cache.get() {
            Some(cache) => cache.write_out_expired(self),
            None => Ok(()),
        }
    }

    /// Write out the stripe held longest if its hold time has passed; says
    /// whether there may be another ([`crate::stripe_cache::StripeCache::write_out_one_expired`]):
    /// for a driver that must let each write-out take its time before the
    /// next (the simulator).
    pub fn write_out_one_expired(&self) -> Result<bool> {
        match self.stripe_cache.get() {
            Some(cache) => cache.write_out_one_expired(self),
            None => Ok(false),
        }
    }

    /// Drop what the stripe cache holds, unwritten: only the planted bug
    /// `StopForgetsHeldStripes` calls this (`planted.rs`).
    pub(crate) fn planted_forget_held_stripes(&self) {
        if let Some(cache) = self.stripe_cache.get() {
            cache.planted_forget_all();
        }
    }

    /// The stripe cache's tunables and counters, when it runs; and the write
    /// plans that read members, as (read-modify-write, reconstruct-write).
    pub fn stripe_cache_stats(&self) -> (Option<(StripeCacheConfig, StripeCacheStats)>, u64, u64) {
        (
            self.stripe_cache.get().map(|c| (c.config(), c.stats())),
            self.plans_rmw.load(Ordering::Relaxed),
            self.plans_rcw.load(Ordering::Relaxed),
        )
    }
}

impl Below for Array {
    fn write_direct(&self, buf: &[u8], offset: u64) -> Result<()> {
        Array::write_direct(self, buf, offset)
    }
    fn read_direct(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        Array::read_direct(self, buf, offset)
    }
    fn write_together(&self, pieces: &[(u64, &[u8])]) -> Vec<Result<()>> {
        Array::write_together(self, pieces)
    }
    fn reads_for(&self, offset: u64, len: u64) -> u64 {
        crate::planner::write_reads(
            &self.geometry,
            &self.live(),
            offset,
            len,
            self.unsynced_from(),
        )
    }
    /// The live roles as bits (role r: bit r), for arrays of up to 64 roles.
    fn members_now(&self) -> Option<u64> {
        let view = self.membership.read().unwrap_or_else(|p| p.into_inner());
        let n = view.present.len();
        (n <= MASK_ROLES).then(|| {
            (0..n)
                .filter(|&r| self.member_live(&view, r))
                .fold(0, |m, r| m | 1 << r)
        })
    }
    fn reads_for_then(&self, offset: u64, len: u64, members: u64) -> u64 {
        let n = self.geometry.raid_disks.min(MASK_ROLES);
        let mut live = [false; MASK_ROLES];
        for (r, l) in live[..n].iter_mut().enumerate() {
            *l = members >> r & 1 == 1;
        }
        crate::planner::write_reads(
            &self.geometry,
            &live[..n],
            offset,
            len,
            self.unsynced_from(),
        )
    }
    fn log_held(&self, stripe: u64, offset: u64, bytes: &[u8]) -> Result<bool> {
        Array::log_held(self, stripe, offset, bytes)
    }
    fn written_out(&self, stripe: u64) {
        Array::written_out(self, stripe)
    }
}

/// Roles `members_now` can give as bits of a `u64`, and `with_live` keeps on
/// the stack.
const MASK_ROLES: usize = 64;

/// The stripe cache's write-out ticks, as the long-run driver steps them.
struct ExpiryTicks<'a> {
    array: &'a std::sync::Weak<Array>,
    tick: Duration,
}

impl ExpiryTicks<'_> {
    /// Half the hold time, within 1 to 100 ms: a stripe waits at most half
    /// a hold past its time, and an idle array wakes at most 1,000 times a
    /// second.
    fn tick_of(hold: Duration) -> Duration {
        (hold / 2).clamp(Duration::from_millis(1), Duration::from_millis(100))
    }
}

impl crate::long_run::Steps for ExpiryTicks<'_> {
    fn step(&mut self, range: std::ops::Range<u64>) -> Result<crate::long_run::Stepped> {
        // One upgrade a tick: the array is only borrowed while it is worked
        // on, so dropping it ends the run.
        if let Some(array) = self.array.upgrade() {
            if let Some(cache) = array.stripe_cache.get() {
                // A failure is kept for the next flush to report.
                let _ = cache.write_out_expired(array.as_ref());
                self.tick = Self::tick_of(cache.config().hold);
            }
        }
        Ok(crate::long_run::Stepped {
            end: range.end,
            work: 0,
        })
    }

    fn period(&self) -> Option<Duration> {
        Some(self.tick)
    }
}
