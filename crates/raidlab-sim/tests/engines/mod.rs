//! Either engine's array for the tests that run each known answer both ways:
//! the engine run live (`TaskArray`, the default) and replayed (`SimArray`).

// Each test file uses the part it needs.
#![allow(dead_code)]

use raidlab_layout::Geometry;
use raidlab_sim::array::{ArraySpec, SimArray, TaskArray};
use raidlab_sim::contents::MismatchRange;
use raidlab_sim::device::Device;
use raidlab_sim::host::HostCost;
use raidlab_sim::scrub::ScrubSpec;

/// What these tests ask of either engine's array.
pub trait Either: Device {
    fn keep_ops(&mut self);
    fn set_mismatches(&mut self, r: &[MismatchRange]) -> Result<(), String>;
    fn start_scrub(&mut self, spec: ScrubSpec) -> Result<(), String>;
    fn errors(&self) -> &[String];
}

macro_rules! either {
    ($t:ty) => {
        impl Either for $t {
            fn keep_ops(&mut self) {
                <$t>::keep_ops(self)
            }
            fn set_mismatches(&mut self, r: &[MismatchRange]) -> Result<(), String> {
                <$t>::set_mismatches(self, r)
            }
            fn start_scrub(&mut self, spec: ScrubSpec) -> Result<(), String> {
                <$t>::start_scrub(self, spec)
            }
            fn errors(&self) -> &[String] {
                <$t>::errors(self)
            }
        }
    };
}
either!(SimArray);
either!(TaskArray);

/// An array of `geometry` over `members` (by role; `None` missing), no
/// stripe cache, the default host, its engine run live or replayed.
pub fn array(
    name: &str,
    geometry: Geometry,
    members: Vec<Option<Box<dyn Device>>>,
    live: bool,
) -> Box<dyn Either> {
    let spec = ArraySpec {
        name: name.into(),
        geometry,
        members,
        stripe_cache: None,
        host: HostCost::default(),
        rebuild: None,
    };
    if live {
        Box::new(TaskArray::new(spec).unwrap())
    } else {
        Box::new(SimArray::new(spec).unwrap())
    }
}
