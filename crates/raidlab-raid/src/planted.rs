//! Planted bugs: a switch, for tests only, that makes one of the engine's
//! decisions wrong on purpose, so the torture harness (`raidlab-sim`) can
//! prove it finds that kind of bug. Built only with the `planted-bugs`
//! feature, which nothing enables outside tests (`raidlab-sim` turns it on
//! as a dev-dependency); without it every plant point is the literal `false`
//! (the `planted!` macro in `lib.rs`) and this module does not exist.
//!
//! It decides which of the engine's decisions can be made wrong; the switch
//! (which one is on, for which thread: thread-local, because `cargo test`
//! runs a binary's tests on many threads at once and a planted bug must not
//! fail a neighbouring test) is `raidlab_core::planted`. The torture
//! harness runs the engine on its calling thread (plans `exec::Interleaved`, the
//! stripe cache with no thread, offline recovery on the caller), so every
//! plant point it can reach runs where the switch was set. A plant point on
//! another thread (the engine's own pools) sees it off.

/// One decision of the engine made wrong. Each names the plant point it
/// switches on (search for `planted!(Name)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    /// A FLUSH is acknowledged after the held stripes go down but before
    /// the members are flushed (`Array::flush`).
    AckFlushEarly,
    /// A FUA write returns without flushing the members it reached
    /// (`Array::write_at_fua`).
    FuaWithoutFlush,
    /// A write runs without marking its bitmap chunks dirty first
    /// (`Array::note_intent`).
    SkipBitmapMark,
    /// Writes to the array's first stripe get no partial parity log entry
    /// (`WriteLog::plan`).
    SkipPplFirstStripe,
    /// A read through the stripe cache ignores what it holds and reads the
    /// members (`StripeCache::read`).
    ReadMissesHeldStripes,
    /// A clean stop drops the stripes the cache holds instead of writing
    /// them out (`lifecycle::stop_writes`).
    StopForgetsHeldStripes,
    /// A start for writing leaves the superblocks clean: a crash then looks
    /// like a clean stop (`Started::start_with`).
    NoDirtyMark,
    /// A bitmap resync skips the first bitmap chunk, dirty or not
    /// (`Assembly::needs_resync`).
    BitmapResyncSkipsFirstChunk,
    /// A journal replay drops the last stripe it gathered
    /// (`journal::recovery::replay`).
    JournalReplayDropsLastStripe,
    /// A trim of RAID 0, 1 or 10 leaves the last member it covers untrimmed
    /// (`planner::plan_trim`).
    TrimSkipsLastMember,
    /// Assembly trusts a member's own superblock over the newest one: a
    /// member whose event count is behind (it missed writes while away)
    /// serves the slot it claims (`assemble::member_state`).
    StaleMemberTrusted,
    /// A rebuild of a RAID 4/5/6 member copies its first chunk from another
    /// member instead of computing it from the survivors
    /// (`Assembly::rebuild`; decided on the calling thread, applied by the
    /// combiner thread).
    RebuildFirstChunkFromWrongMember,
    /// A request that waited for its stripe locks while another took a
    /// member out runs the plan it made before, still reading that member
    /// (`Array::is_current`). Only requests in flight together reach it
    /// (the harness's queue depths).
    PlanNotRecheckedAfterTakeOut,
    /// A RAID 4/5/6 check or repair step of a running array compares its
    /// stripes without holding their stripe locks (`recovery::scrub_run`): a write
    /// between a stripe's data and its parity looks like a mismatch. Only
    /// a check beside requests in flight reaches it.
    ScrubWithoutStripeLocks,
    /// A write that changes pages of a kept row without keeping them
    /// leaves them kept (`Array::kept_after`): a later write of the row
    /// computes its parity from blocks the members no longer hold.
    KeptRowNotForgotten,
}

impl Bug {
    pub const ALL: [Bug; 15] = [
        Bug::AckFlushEarly,
        Bug::FuaWithoutFlush,
        Bug::SkipBitmapMark,
        Bug::SkipPplFirstStripe,
        Bug::ReadMissesHeldStripes,
        Bug::StopForgetsHeldStripes,
        Bug::NoDirtyMark,
        Bug::BitmapResyncSkipsFirstChunk,
        Bug::JournalReplayDropsLastStripe,
        Bug::TrimSkipsLastMember,
        Bug::StaleMemberTrusted,
        Bug::RebuildFirstChunkFromWrongMember,
        Bug::PlanNotRecheckedAfterTakeOut,
        Bug::ScrubWithoutStripeLocks,
        Bug::KeptRowNotForgotten,
    ];
}

impl raidlab_core::planted::Bug for Bug {
    fn index(self) -> u8 {
        self as u8
    }
}

/// Whether `bug` is planted on this thread.
pub fn on(bug: Bug) -> bool {
    raidlab_core::planted::on(bug)
}

/// `bug` planted on this thread until the guard is dropped (the previous
/// setting comes back then, also when a test panics). Planting one takes off
/// any other, the cache tier's included (one switch, `raidlab_core::planted`).
pub fn plant(bug: Option<Bug>) -> raidlab_core::planted::Planted {
    raidlab_core::planted::plant(bug)
}
