//! What a log replay (write journal, partial parity log) writes through after a
//! crash: the array's member volumes by role, and the array itself for stripes
//! whose parity must be computed again. A trait, so that the logs' code never
//! imports the array that writes through them (the array uses the logs; a log
//! replays through any `ReplayTarget`, which `Array` is).
//!
//! It decides nothing; it only names the few operations a replay needs.

use raidlab_core::Volume;
use raidlab_layout::Geometry;
use std::sync::Arc;

/// An array as a replay sees it.
pub trait ReplayTarget: Volume {
    fn geometry(&self) -> &Geometry;
    /// The volume serving `role`, if present.
    fn member(&self, role: usize) -> Option<Arc<dyn Volume>>;
    /// What carries out the replay's own plans (written to the members
    /// directly): the array's executor, so that they are seen where its
    /// other plans are.
    fn executor(&self) -> Arc<dyn crate::exec::Executor>;
}
