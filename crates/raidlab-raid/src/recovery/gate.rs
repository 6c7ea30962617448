//! How far a rebuild's readers may run ahead of its writer. Reading ahead
//! overlaps the next step's reads with this step's write (the speed of a real
//! rebuild); a run that must be a pure function of its inputs (the torture
//! harness, which counts and faults every member request) reads each step only
//! once the writer asks for it, so an interrupted rebuild has read exactly the
//! steps it wrote. It decides only when a reader may start a step; it never
//! decides what a step reads or writes.

use std::sync::{Condvar, Mutex};

pub(super) struct Gate {
    /// Readers may start any step that begins below this member offset.
    open_below: Mutex<u64>,
    moved: Condvar,
}

impl Gate {
    /// A gate open to every step (`read_ahead`), or closed until the writer
    /// opens each step in turn.
    pub(super) fn new(read_ahead: bool) -> Gate {
        Gate {
            open_below: Mutex::new(if read_ahead { u64::MAX } else { 0 }),
            moved: Condvar::new(),
        }
    }

    /// The writer wants the step that begins at `at` next.
    pub(super) fn open_step(&self, at: u64) {
        self.open_to(at.saturating_add(1));
    }

    /// Let every reader go (the run is ending: readers must see its stop
    /// flag rather than wait here).
    pub(super) fn open_all(&self) {
        self.open_to(u64::MAX);
    }

    fn open_to(&self, below: u64) {
        let mut open = self.open_below.lock().unwrap_or_else(|p| p.into_inner());
        if below > *open {
            *open = below;
            self.moved.notify_all();
        }
    }

    /// Wait until the step that begins at `at` may be read.
    pub(super) fn wait(&self, at: u64) {
        let mut open = self.open_below.lock().unwrap_or_else(|p| p.into_inner());
        while *open <= at {
            open = self.moved.wait(open).unwrap_or_else(|p| p.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn a_closed_gate_lets_a_reader_start_only_the_steps_opened() {
        let gate = Gate::new(false);
        let started = AtomicU64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                for at in [0u64, 10, 20] {
                    gate.wait(at);
                    started.fetch_add(1, Ordering::SeqCst);
                }
            });
            // Nothing is opened yet: the reader has started nothing.
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert_eq!(started.load(Ordering::SeqCst), 0);
            gate.open_step(0);
            while started.load(Ordering::SeqCst) < 1 {
                std::thread::yield_now();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert_eq!(started.load(Ordering::SeqCst), 1, "step 10 was not opened");
            gate.open_all();
        });
        assert_eq!(started.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn an_open_gate_never_waits() {
        let gate = Gate::new(true);
        gate.wait(0);
        gate.wait(u64::MAX - 1);
    }
}
