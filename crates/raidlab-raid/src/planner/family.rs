//! The one trait every level family's plan builders stand behind: a request's
//! read and write, what a write reads (counted without planning), the unit a
//! write-zeroes and a served piece must be whole of, and the plans that
//! restore redundancy (a rebuilt member range, a repair, a scrub step and the
//! stripe-lock keys of a member range). Two implementations, one file pair
//! each: the parity rows of RAID 4, 5 and 6 (`parity.rs`,
//! `parity_recovery.rs`) and the runs of copies of RAID 1 and 10, which RAID
//! 0 is the one-copy case of (`mirror.rs`, `mirror_recovery.rs`). Linear,
//! multi-zone RAID 0 and an array mid-reshape place each request through their
//! own volume, over a one-member placeholder that plans as copies
//! (`level/mod.rs` says why).
//!
//! Decides: nothing itself; it names the questions, so a caller asks the
//! family ([`super::family`]) instead of branching on the level, and a new
//! family is one implementation, not a branch at each caller.
//!
//! Must never: hold a plan algorithm (each implementation holds its own), do
//! I/O, or take a lock (the keys it returns are the caller's to hold).

use super::Builder;
use crate::plan::Plan;
use raidlab_core::Result;
use raidlab_layout::Geometry;

/// One level family's plan builders. Every method is pure: the same
/// arguments give the same plan.
pub(crate) trait Builders: Sync {
    /// Add the reads (and any reconstruction) of `[offset, offset+len)` to
    /// `b`, with the members `present` says can be read; `hint` picks among
    /// copies. The range is checked by the caller.
    fn read(
        &self,
        b: &mut Builder,
        geo: &Geometry,
        present: &[bool],
        offset: u64,
        len: u64,
        hint: usize,
    ) -> Result<()>;

    /// Add the reads, parity arithmetic, log entries, writes and stripe locks
    /// of a write of `[offset, offset+len)` to `b` (whose options say which
    /// log, and from where a resync is owed).
    fn write(
        &self,
        b: &mut Builder,
        geo: &Geometry,
        present: &[bool],
        offset: u64,
        len: u64,
    ) -> Result<()>;

    /// The member reads [`Builders::write`] would plan, without planning it,
    /// where the family can count them (`None`: plan and count).
    fn count_write_reads(
        &self,
        _geo: &Geometry,
        _present: &[bool],
        _offset: u64,
        _len: u64,
    ) -> Option<u64> {
        None
    }

    /// The bytes a write-zeroes must be whole multiples of, where zeroing a
    /// part would leave parity to compute (`None`: any range).
    fn zero_unit(&self, geo: &Geometry) -> Option<u64>;

    /// The bytes one served piece is a whole number of: a stripe of data
    /// (parity), or a chunk of every member (copies), so a large request is
    /// cut where the layout repeats.
    fn piece_unit(&self, geo: &Geometry) -> u64;

    /// The stripe-lock keys covering what `role` holds at `[at, at+n)` of
    /// its data area, as writes to it lock them.
    fn member_range_keys(&self, geo: &Geometry, role: usize, at: u64, n: u64) -> Result<Vec<u64>>;

    /// Add to `plan` the steps that leave `[at, at+n)` of role `role`'s data
    /// area in the caller's buffer, read and recomputed from the members
    /// `live` says can be read (`role` itself never).
    fn rebuild_sources(
        &self,
        plan: &mut Plan,
        geo: &Geometry,
        live: &[bool],
        role: usize,
        at: u64,
        n: u64,
    ) -> Result<()>;

    /// Repair what `role` holds for the array range `[pos, pos+n)`: the plan
    /// and the caller's buffer length it needs.
    fn repair(
        &self,
        geo: &Geometry,
        live: &[bool],
        role: usize,
        pos: u64,
        n: u64,
    ) -> Result<(Plan, usize)>;

    /// What a scrub or resync walks: member bytes (parity: the same range of
    /// every member at once) or array bytes (copies compared by address).
    fn scrub_total(&self, geo: &Geometry) -> u64;

    /// The reads of one scrub step at walk position `pos`, `n` bytes: the
    /// plan and the length of the caller's buffer it reads into.
    fn scrub_step(
        &self,
        geo: &Geometry,
        present: &[bool],
        pos: u64,
        n: u64,
    ) -> Result<(Plan, usize)>;

    /// Whether redundancy is kept in rows across the same range of every
    /// member (parity): a rebuild reads that range of every other member and
    /// recomputes it, a scrub recomputes each row from it, so a driver can
    /// stream each member ahead and combine. Copies lie wherever the layout
    /// puts them: a rebuild reads each piece from another copy, a scrub
    /// compares copies by array address. And a write inside a running
    /// rebuild's window reads its row, the rebuilt member's part included,
    /// so it must know the rebuild's checkpoint; a copy is written whole
    /// wherever the rebuild is.
    fn keeps_rows(&self) -> bool;
}
