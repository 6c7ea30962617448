//! The switch behind the test-only planted bugs of the crates above it (the
//! engine's `raidlab_raid::planted`, the cache tier's
//! `raidlab_cache::planted`): which one bug is on, and for which thread.
//! Built only with the `planted-bugs` feature, which those crates' own
//! `planted-bugs` features turn on and only `raidlab-sim`'s tests enable.
//!
//! It decides nothing about any bug; it holds which one is planted. It must
//! never be on unless a test asked for it, and never reach another thread:
//! the switch is thread-local, because `cargo test` runs a binary's tests on
//! several threads at once and a planted bug must not fail a neighbouring
//! test. One switch for every crate, so planting one bug takes any other
//! off.

use std::any::TypeId;
use std::cell::Cell;

/// A crate's list of planted bugs (an enum without data).
pub trait Bug: Copy + 'static {
    /// The bug's place in its list.
    fn index(self) -> u8;
}

thread_local! {
    static ON: Cell<Option<(TypeId, u8)>> = const { Cell::new(None) };
}

fn key<B: Bug>(bug: B) -> (TypeId, u8) {
    (TypeId::of::<B>(), bug.index())
}

/// Whether `bug` is planted on this thread.
pub fn on<B: Bug>(bug: B) -> bool {
    ON.with(|c| c.get() == Some(key(bug)))
}

/// `bug` planted on this thread (none with `None`) until the guard is
/// dropped; the previous setting comes back then, also when a test panics.
#[must_use = "the bug is planted only while the guard lives"]
pub fn plant<B: Bug>(bug: Option<B>) -> Planted {
    Planted(ON.with(|c| c.replace(bug.map(key))))
}

/// Keeps a bug planted (see [`plant`]).
#[derive(Debug)]
pub struct Planted(Option<(TypeId, u8)>);

impl Drop for Planted {
    fn drop(&mut self) {
        ON.with(|c| c.set(self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy)]
    enum A {
        One,
        Two,
    }
    impl Bug for A {
        fn index(self) -> u8 {
            self as u8
        }
    }
    #[derive(Debug, Clone, Copy)]
    enum B {
        One,
    }
    impl Bug for B {
        fn index(self) -> u8 {
            self as u8
        }
    }

    #[test]
    fn one_bug_at_a_time_on_its_own_thread_until_the_guard_goes() {
        assert!(!on(A::One) && !on(B::One));
        {
            let _a = plant(Some(A::One));
            assert!(on(A::One) && !on(A::Two));
            // Same place in another list: a different bug.
            assert!(!on(B::One));
            assert!(!std::thread::spawn(|| on(A::One)).join().unwrap());
            {
                let _b = plant(Some(B::One));
                assert!(on(B::One) && !on(A::One));
            }
            assert!(on(A::One));
        }
        assert!(!on(A::One));
    }
}
