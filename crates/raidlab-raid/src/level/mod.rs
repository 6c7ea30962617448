//! Level families: what each RAID level allows and which plan builders its
//! requests go through, as data. Four families, one file each: striped
//! (`striped.rs`: RAID 0, linear and multi-zone RAID 0), mirror
//! (`mirror.rs`: RAID 1 and 10), parity (`parity.rs`: RAID 4, 5 and 6) and
//! reshape (`reshape.rs`: an array between two geometries). Each is one
//! `&'static` [`Rules`] entry; [`of`] (for a geometry) and [`rules`] (for a
//! level alone, before a geometry exists) hand out the six levels', and
//! [`LINEAR`], [`MULTI_ZONE_RAID0`] and [`RESHAPE`] the three arrays that
//! have no geometry of their own. The engine asks the entry questions (may
//! this level keep a PPL? does it resync? which builder plans its rebuild?)
//! instead of matching on the level.
//!
//! Decides: the constraints md gives each level (members minimum, failures
//! tolerated, PPL, journal, trim, resync and check, stripe cache, read
//! balancing, bitmap units, spares, per-member data sizes), the reasons a
//! user is told when one refuses something, and which builder plans a
//! level's reads, writes, rebuilds, repairs and scrubs ([`Plans`]).
//!
//! Must never: hold a plan algorithm or place a byte (each family's builders
//! are its implementation of the planner's one trait, `planner::Builders`:
//! `planner/parity.rs` with `parity_recovery.rs`, `planner/mirror.rs` with
//! `mirror_recovery.rs`; placement is `raidlab-layout`'s), do I/O, allocate,
//! or import another engine module (every module asks this one, so it sits
//! at the bottom of the engine's import chain). A family's entry here and
//! its builders there are joined by [`Rules::plans`], read in one place
//! (`planner::family_of`).
//!
//! Linear and multi-zone RAID 0 (`zoned.rs`) and an array stopped in the
//! middle of a reshape (`assemble/reshape.rs`) run as a pass-through
//! `Array` over a volume that places each request itself
//! (`Array::pass_through`): its geometry is a one-member placeholder that
//! only carries requests, and it answers with its own family's entry, set
//! at construction, never with the placeholder's (a one-member RAID 1's).
//! The assembly asks the same entry (`Assembly::rules`).
//!
//! Level branches outside this module, each not a question one entry
//! answers:
//! - md's level number for linear (-1), which has no `Level`, so no entry
//!   to ask before it is told: `zoned::is_zoned` (linear is always zones),
//!   `assemble::geometry_of` (its placeholder geometry),
//!   `Assembly::is_linear` (asked for its name and its entry),
//!   `assemble/create_zoned.rs` (the number it writes): on-disk encoding.
//! - `assemble/zones.rs` (`zone_map_of`): whether a RAID 0's recorded
//!   layout word is trusted (md's `RAID0_LAYOUT` bit): one level's on-disk
//!   encoding.
//! - `assemble/reshape.rs` (`raid0_restripe`, `adopt_raid0_restripe_member`,
//!   `adopt_roles_missed_at_start`) and `assemble/member_state.rs` (a RAID 4
//!   taken back as RAID 0): grow's RAID 0 restripe, which md runs as a RAID 4
//!   reshape, told apart at assembly: a change between two levels.
//! - `journal/mod.rs`: a journaled stripe's Q page, written when its
//!   geometry has two parity chunks: the layout's stripe, not a constraint.
//!
//! `grow/` holds md's rules for changes between two levels (which reshape
//! or takeover goes from which level to which): decisions on a pair.

mod mirror;
mod parity;
mod reshape;
mod striped;

pub use reshape::{failures_tolerated_mid_reshape, RESHAPE};
pub use striped::{LINEAR, MULTI_ZONE_RAID0};

use raidlab_layout::{Geometry, Layout, Level};

/// The ways md keeps (or does not keep) data it can lose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Data striped or concatenated, no redundancy.
    Striped,
    /// Whole copies of every chunk on different members.
    Mirror,
    /// Data chunks plus one or two parity chunks per stripe.
    Parity,
    /// Part in one geometry, part in another, split at the reshape's
    /// position, each part kept as its own geometry keeps it.
    Reshape,
}

/// Which implementation of the planner's one builder trait
/// (`planner::Builders`) a level's requests, rebuilds, repairs and scrubs go
/// through. Read in one place (`planner::family_of`); every caller asks the
/// family it hands out, never this value, so a new family is a new
/// implementation there and a new value here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plans {
    /// Per stripe row and column segment, with parity computed and checked
    /// (`planner/parity.rs`, `planner/parity_recovery.rs`).
    ParityRows,
    /// Per run of copies, `Geometry::mirror_map` (`planner/mirror.rs`,
    /// `planner/mirror_recovery.rs`); RAID 0 is the one-copy case.
    Copies,
}

/// How many members a level can lose and still serve every byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redundancy {
    /// Nothing: every member holds data no other one has.
    None,
    /// Every member is a whole copy (RAID 1): all but one can go.
    AllButOne,
    /// At least one copy of every chunk must be left (RAID 10): how many
    /// members that allows depends on the layout and on which ones go.
    CopyOfEachChunk,
    /// As many members as parity chunks per stripe (RAID 4/5: 1, RAID 6: 2).
    Parity(usize),
    /// Mid-reshape: the fewer of the two geometries' (every member holds
    /// bytes of both), which one geometry cannot tell:
    /// [`failures_tolerated_mid_reshape`] answers from both.
    FewerOfTwoGeometries,
}

/// What md's write-intent bitmap counts for a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitmapUnit {
    /// No bitmap: nothing to resync (RAID 0).
    None,
    /// Member sectors: a dirty bit names the same range of every member
    /// (RAID 1, 4, 5, 6), which a re-add can rebuild alone.
    MemberSectors,
    /// Array sectors (RAID 10's bitmap, as md keeps it).
    ArraySectors,
}

/// One level's constraints and builders. Every field is a fact about md's
/// level, read by the engine in place of a branch on the level.
#[derive(Debug, PartialEq, Eq)]
pub struct Rules {
    /// The level of the geometry it places by; `None` for an array that has
    /// no one level (linear, placed by its zones; mid-reshape, two).
    pub level: Option<Level>,
    /// md's level name, as `detail` says it and refusals name it.
    pub name: &'static str,
    pub family: Family,
    /// The builder its plans go through.
    pub plans: Plans,
    pub redundancy: Redundancy,
    /// Why a range with members missing is lost, for the planner's error
    /// ("...; {lost}. Supply the missing member(s)...").
    pub lost: &'static str,
    /// Whether the level has a chunk (RAID 1 has none: its chunk is 0).
    pub chunked: bool,
    /// md's partial parity log (`--consistency-policy ppl`): RAID 5 only.
    pub ppl: bool,
    /// md's write journal (`--write-journal`): RAID 4, 5 and 6.
    pub journal: bool,
    /// Whether a trim is passed to the members, each copy trimmed, so reads
    /// return zeros where every member does after a trim. Parity levels
    /// ignore trims, as md does unless told members can be trusted: parity
    /// over trimmed blocks could not be.
    pub trims: bool,
    /// Why a trim is refused, when [`Rules::trims`] is false (empty
    /// otherwise).
    pub no_trim: &'static str,
    /// Whether there is redundancy to make consistent after an unclean stop:
    /// md marks the array dirty while writing, resyncs it after a crash, and
    /// can check and repair it. RAID 0 is never dirty and never checked.
    pub resyncs: bool,
    /// Why a check, repair or resync is refused, when [`Rules::resyncs`]
    /// is false (empty otherwise): in the words a user of that array knows.
    pub no_scrub: &'static str,
    /// Whether an unclean stop can leave a stripe whose parity disagrees
    /// with its data (the write hole): a degraded start after one is refused
    /// unforced, and a member whose loss breaks the array is still recorded
    /// faulty (md's raid5_error) rather than refused.
    pub write_hole: bool,
    /// Whether writes go through the stripe cache (partial stripes held and
    /// merged before parity is computed).
    pub stripe_cache: bool,
    /// Whether reads are spread over copies by the read balancer.
    pub balanced_reads: bool,
    /// Whether a block md's bad-block log lists, once served from
    /// redundancy, is written back and forgotten (md's RAID 5 does; its
    /// RAID 1 and 10 only read around a listed copy).
    pub heals_listed: bool,
    pub bitmap: BitmapUnit,
    /// Whether a member can be replaced or rebuilt from the others (a spare
    /// takes a role). md's raid0 takes no spare.
    pub spares: bool,
    /// Whether md sizes the level from each member's own data size (RAID 0:
    /// members of different sizes make zones), so raidlab records one equal
    /// data size in every superblock it writes, and an assembly reads the
    /// members' sizes (`geometry_of`) and finds zones (`zoned::is_zoned`) by it.
    pub sized_per_member: bool,
}

/// The rules of `level`.
pub fn rules(level: Level) -> &'static Rules {
    // Equal-size RAID 0 is striped; members of different sizes make the
    // multi-zone entry, which the assembly picks (`Assembly::rules`).
    match level {
        Level::Raid0 => &striped::RAID0,
        Level::Raid1 => &mirror::RAID1,
        Level::Raid10 => &mirror::RAID10,
        Level::Raid4 => &parity::RAID4,
        Level::Raid5 => &parity::RAID5,
        Level::Raid6 => &parity::RAID6,
    }
}

/// The rules of the geometry's level.
pub fn of(geo: &Geometry) -> &'static Rules {
    rules(geo.level)
}

impl Rules {
    /// The fewest members mdadm creates the level with, unforced (layout's
    /// rule, where the geometry is checked); 1 where there is no one level:
    /// md runs a linear array over one member, and a reshape's members are
    /// its two geometries' to count.
    pub fn min_members(&self) -> usize {
        self.level.map_or(1, |l| l.min_members())
    }

    /// Whether the level keeps any redundancy at all (a member can go
    /// without losing data).
    pub fn redundant(&self) -> bool {
        self.redundancy != Redundancy::None
    }

    /// Members `geo` can lose, whichever they are, and still serve every
    /// byte (RAID 10: one fewer than its copies, as a near or far layout
    /// can lose no more when the wrong ones go).
    pub fn failures_tolerated(&self, geo: &Geometry) -> usize {
        match self.redundancy {
            Redundancy::None => 0,
            Redundancy::AllButOne => geo.raid_disks.saturating_sub(1),
            Redundancy::CopyOfEachChunk => match geo.layout {
                Layout::Raid10(r) => r.copies().saturating_sub(1),
                _ => 0,
            },
            Redundancy::Parity(n) => n,
            // One geometry cannot tell; never promise more than none.
            Redundancy::FewerOfTwoGeometries => 0,
        }
    }
}

#[cfg(test)]
mod tests;
