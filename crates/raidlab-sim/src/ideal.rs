//! The simplest honest device: a fixed service time per request plus its bytes at a
//! fixed rate, one request at a time in arrival order.
//!
//! Decides: only its own service time. Used where the device should not be the
//! subject (the engine-equivalence tests, "what does the engine cost on a
//! perfect disk"), never as a stand-in for a real disk's or SSD's behaviour.

use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request};
use raidlab_core::IoKind;
use std::collections::VecDeque;

/// A FIFO device with `latency_us` per request and `mb_per_s` of transfer.
#[derive(Debug, Clone)]
pub struct Ideal {
    capacity: u64,
    latency_ns: Ns,
    mb_per_s: f64,
    queue: VecDeque<Request>,
    /// The request being served and when it completes.
    busy: Option<(Request, Ns)>,
}

impl Ideal {
    pub fn new(capacity: u64, latency_us: f64, mb_per_s: f64) -> Ideal {
        Ideal {
            capacity,
            latency_ns: (latency_us * 1e3).round() as Ns,
            mb_per_s,
            queue: VecDeque::new(),
            busy: None,
        }
    }

    fn service(&self, r: &Request) -> Ns {
        let bytes = if matches!(r.kind, IoKind::Read | IoKind::Write | IoKind::Zero) {
            r.len
        } else {
            0
        };
        self.latency_ns + (bytes as f64 / (self.mb_per_s * 1e6) * 1e9).round() as Ns
    }

    fn start_next(&mut self, now: Ns) {
        if self.busy.is_none() {
            if let Some(r) = self.queue.pop_front() {
                let end = now + self.service(&r);
                self.busy = Some((r, end));
            }
        }
    }
}

impl Device for Ideal {
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn submit(&mut self, now: Ns, req: Request) {
        self.queue.push_back(req);
        self.start_next(now);
    }
    fn next_event(&self) -> Option<Ns> {
        self.busy.map(|(_, t)| t)
    }
    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        while let Some((r, t)) = self.busy {
            if t > now {
                break;
            }
            done.push(Completion { id: r.id, at: t });
            self.busy = None;
            self.start_next(t);
        }
    }
    fn info(&self) -> ModelInfo {
        ModelInfo {
            model: "ideal".into(),
            name: "ideal".into(),
            params: vec![
                Param {
                    name: "latency_us".into(),
                    value: self.latency_ns as f64 / 1e3,
                    unit: "µs".into(),
                },
                Param {
                    name: "mb_per_s".into(),
                    value: self.mb_per_s,
                    unit: "MB/s".into(),
                },
            ],
            sources: vec!["none: a reference device, not a model of any product".into()],
            parts: Vec::new(),
        }
    }
}
