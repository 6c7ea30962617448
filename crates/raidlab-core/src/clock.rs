//! Where raidlab reads the time and how it waits: the one clock type every
//! layer paces against (long runs, the stripe cache's hold time, the cache
//! tier's cleaner, throttled members), passed as [`SharedClock`] everywhere.
//!
//! It decides nothing about what is paced. Real time is [`SystemClock`]
//! ([`system`] is the process's one instance); tests and the simulator give a
//! clock of their own, so pacing is checked exactly in virtual time rather
//! than against a wall clock on a busy machine.

use std::fmt::Debug;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

/// A source of time and a way to wait.
pub trait Clock: Send + Sync + Debug {
    /// Time since a fixed epoch of the clock's choosing; never goes backwards.
    fn now(&self) -> Duration;
    /// Wait `d`: may return late, never early.
    fn sleep(&self, d: Duration);
}

/// How a clock is held: shared, as many users pace against one clock.
pub type SharedClock = Arc<dyn Clock>;

/// The system's monotonic clock and a real sleep.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    epoch: Instant,
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock {
            epoch: Instant::now(),
        }
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

static SYSTEM: LazyLock<SharedClock> = LazyLock::new(|| Arc::new(SystemClock::default()));

/// The process's system clock (one epoch for every user).
pub fn system() -> SharedClock {
    SYSTEM.clone()
}

/// A clock that moves only when told: by [`ManualClock::advance`], or by a
/// sleep, which returns at once with the time moved on. For tests of pacing
/// and of anything timed.
#[derive(Debug, Default)]
pub struct ManualClock(Mutex<Duration>);

impl ManualClock {
    pub fn new() -> Arc<ManualClock> {
        Arc::default()
    }
    /// Move the time on by `d`.
    pub fn advance(&self, d: Duration) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) += d;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn sleep(&self, d: Duration) {
        self.advance(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = ManualClock::new();
        assert_eq!(c.now(), Duration::ZERO);
        c.sleep(Duration::from_millis(5));
        c.advance(Duration::from_millis(7));
        assert_eq!(c.now(), Duration::from_millis(12));
        let shared: SharedClock = c.clone();
        assert_eq!(shared.now(), Duration::from_millis(12));
    }

    #[test]
    fn the_system_clock_is_one_instance() {
        let (a, b) = (system(), system());
        assert!(Arc::ptr_eq(&a, &b));
        let t = a.now();
        a.sleep(Duration::from_millis(2));
        assert!(b.now() >= t + Duration::from_millis(2));
    }
}
