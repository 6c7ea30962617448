//! A member that turns slow at a virtual time (`slow=R*FACTOR@TIME`): its
//! device model runs on a clock that goes FACTOR times slower from TIME on,
//! so every duration inside it (seeks, rotation, transfer, its cache's
//! write-back) is FACTOR times longer, while its queue, its reordering and its
//! cache behave as the model says.
//!
//! Decides only the clock the wrapped model sees: before TIME the model's own,
//! after it `TIME + (t - TIME) / FACTOR`. An integer FACTOR makes the two
//! clocks map onto each other exactly (an event the model has at its time `e`
//! happens at `TIME + (e - TIME) * FACTOR`, which maps back to `e`). It must
//! never change what the model decides, only when.

use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request};

/// The device, slowed by `factor` from `from` on.
#[derive(Debug)]
pub struct Slowed {
    inner: Box<dyn Device>,
    factor: u64,
    from: Ns,
    done: Vec<Completion>,
}

impl Slowed {
    /// `factor` at least 1 (1 changes nothing).
    pub fn new(inner: Box<dyn Device>, factor: u64, from: Ns) -> Slowed {
        Slowed {
            inner,
            factor: factor.max(1),
            from,
            done: Vec::new(),
        }
    }

    /// The model's time at outer time `t`.
    fn inner_time(&self, t: Ns) -> Ns {
        if t <= self.from {
            t
        } else {
            self.from + (t - self.from) / self.factor
        }
    }

    /// The outer time of the model's time `e`.
    fn outer_time(&self, e: Ns) -> Ns {
        if e <= self.from {
            e
        } else {
            self.from
                .saturating_add((e - self.from).saturating_mul(self.factor))
        }
    }
}

impl Device for Slowed {
    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }

    fn max_request_bytes(&self) -> u64 {
        self.inner.max_request_bytes()
    }

    fn submit(&mut self, now: Ns, req: Request) {
        self.inner.submit(self.inner_time(now), req);
    }

    fn next_event(&self) -> Option<Ns> {
        self.inner.next_event().map(|e| self.outer_time(e))
    }

    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        self.inner.advance(self.inner_time(now), &mut self.done);
        // The model's completion times are on its clock; they happen now on
        // the outer one (never before a submission: a request submitted up to
        // FACTOR-1 ns before `now` maps to the same model time).
        done.extend(
            self.done
                .drain(..)
                .map(|c| Completion { id: c.id, at: now }),
        );
    }

    fn info(&self) -> ModelInfo {
        let mut m = self.inner.info();
        m.params
            .push(Param::new("slow_factor", self.factor as f64, "x"));
        m.params
            .push(Param::new("slow_from", self.from as f64 / 1e9, "s"));
        m.sources.push(
            "slow_factor, slow_from: the configuration's `slow=` fault (what-if, no source)".into(),
        );
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MS;
    use crate::ideal::Ideal;
    use raidlab_core::IoKind;

    fn read(id: u64) -> Request {
        Request {
            id,
            kind: IoKind::Read,
            offset: 0,
            len: 4096,
            process: 0,
        }
    }

    #[test]
    fn from_its_time_every_service_takes_factor_times_as_long() {
        // 1 ms per request and 4 KiB at 4 GB/s (1.024 us): 1.001024 ms.
        let mut d = Slowed::new(Box::new(Ideal::new(1 << 30, 1000.0, 4000.0)), 3, 10 * MS);
        let mut done = Vec::new();
        let mut finish = |d: &mut Slowed, at: Ns, id: u64| {
            d.submit(at, read(id));
            let t = d.next_event().unwrap();
            d.advance(t, &mut done);
            assert_eq!(done.pop().map(|c| c.id), Some(id));
            t - at
        };
        assert_eq!(finish(&mut d, 0, 1), 1_001_024);
        // A request in service across the time is slowed for its rest.
        assert_eq!(finish(&mut d, 9_500_000, 2), 500_000 + 3 * 501_024);
        assert_eq!(finish(&mut d, 19 * MS, 3), 3 * 1_001_024);
    }
}
