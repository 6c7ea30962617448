//! A raidlab array over simulated members: the real engine decides, device
//! models take the time.
//!
//! Every request runs raidlab's own `raidlab_raid::Array` live, as a task
//! in virtual time ([`TaskArray`]): its planner, stripe cache, stripe locks,
//! logs, bitmap, failure handling, rebuild and scrub loops, created,
//! assembled and started by raidlab's own stack on sparse in-memory members
//! (`stack.rs`), whose executor hands each plan step to the member device
//! models.
//!
//! Decides: what a simulated array is made of (its spec, where md puts the
//! data on a member) and nothing of what the engine does. It never reads
//! the wall clock.

use crate::device::{Device, Ns};
use crate::host::HostCost;
use raidlab_layout::Geometry;
use raidlab_raid::stripe_cache::StripeCacheConfig;
use raidlab_raid::Array;

mod common;
mod faults;
mod stack;
mod tasks;
pub use faults::FaultSpec;
pub(crate) use tasks::sleep_in_task;
pub use tasks::TaskArray;

/// Where md 1.2 starts the data on a member (its default data offset for members
/// under a few GiB is 1 MiB; larger ones get more, which moves nothing here but the
/// first megabytes of each member).
pub const DATA_OFFSET: u64 = 1 << 20;

/// A member's next event when it has none: later than any virtual time a
/// run reaches (584 years).
const IDLE: Ns = Ns::MAX;

/// A simulated raidlab array as the configuration builds it.
pub trait ArrayModel: Device {
    /// The real engine's array.
    fn engine(&self) -> &Array;
    /// This array as the device it is (no trait upcasting before Rust 1.86).
    fn into_device(self: Box<Self>) -> Box<dyn Device>;
}

impl ArrayModel for TaskArray {
    fn engine(&self) -> &Array {
        TaskArray::engine(self)
    }
    fn into_device(self: Box<Self>) -> Box<dyn Device> {
        self
    }
}

/// How to build a simulated raidlab array.
#[derive(Debug)]
pub struct ArraySpec {
    pub name: String,
    pub geometry: Geometry,
    /// Member devices by role; `None` for a failed (missing) member.
    pub members: Vec<Option<Box<dyn Device>>>,
    /// The stripe cache's size and hold time; `None` to run without it.
    pub stripe_cache: Option<StripeCacheConfig>,
    pub host: HostCost,
    /// A rebuild running from the start of the run.
    pub rebuild: Option<RebuildSpec>,
}

/// A failed role being rebuilt onto a new device while the array serves: the
/// engine's own live rebuild (`Array::begin_recovery`, then one
/// `recovery_step` of `raidlab_raid::live::REBUILD_STEP` bytes at a time, each
/// under its stripe locks), paced as `raidlab serve`'s rebuild is.
#[derive(Debug)]
pub struct RebuildSpec {
    /// The role: a failed member of the spec.
    pub role: usize,
    /// The new member.
    pub device: Box<dyn Device>,
    /// Upper bound on member bytes rebuilt per second (`None`: as fast as the
    /// members allow, raidlab's default).
    pub max_rate: Option<u64>,
    /// Bytes of the member's data area already rebuilt (a resumed rebuild;
    /// rounded down to a chunk, as the engine resumes).
    pub from: u64,
}

/// How far a simulated rebuild got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RebuildProgress {
    pub role: usize,
    /// Bytes of the member's data area rebuilt.
    pub done: u64,
    pub total: u64,
    /// Virtual time it completed, if it has.
    pub finished: Option<Ns>,
}

/// Values in reusable numbered slots: the simulator looks requests and member
/// operations up by number several times per I/O, and a vector index is what a
/// million of those a second can afford. Slots are reused lowest-freed-last, the
/// same way on every run.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    pub(crate) fn insert(&mut self, t: T) -> u64 {
        match self.free.pop() {
            Some(i) => {
                self.items[i] = Some(t);
                i as u64
            }
            None => {
                self.items.push(Some(t));
                (self.items.len() - 1) as u64
            }
        }
    }
    pub(crate) fn get(&self, i: u64) -> Option<&T> {
        self.items.get(i as usize).and_then(Option::as_ref)
    }
    pub(crate) fn get_mut(&mut self, i: u64) -> Option<&mut T> {
        self.items.get_mut(i as usize).and_then(Option::as_mut)
    }
    pub(crate) fn remove(&mut self, i: u64) -> Option<T> {
        let t = self.items.get_mut(i as usize)?.take();
        if t.is_some() {
            self.free.push(i as usize);
        }
        t
    }
    /// How many slots hold a value.
    pub(crate) fn len(&self) -> usize {
        self.items.len() - self.free.len()
    }
}
