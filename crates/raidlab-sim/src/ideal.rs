//! The simplest honest device: a fixed service time per request plus its bytes at a
//! fixed rate, one request at a time in arrival order.
//!
//! Decides: only its own service time. Used where the device should not be the
//! subject (the engine-equivalence tests, "what does the engine cost on a
//! perfect disk"), never as a stand-in for a real disk's or SSD's behaviour.

use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request};
use crate::serial::Serial;
use raidlab_core::IoKind;

/// A FIFO device with `latency_us` per request and `mb_per_s` of transfer.
#[derive(Debug, Clone)]
pub struct Ideal {
    capacity: u64,
    latency_ns: Ns,
    mb_per_s: f64,
    serial: Serial,
}

impl Ideal {
    pub fn new(capacity: u64, latency_us: f64, mb_per_s: f64) -> Ideal {
        Ideal {
            capacity,
            latency_ns: (latency_us * 1e3).round() as Ns,
            mb_per_s,
            serial: Serial::default(),
        }
    }

    /// When a request started at `start` ends: its latency and its bytes.
    fn finish(latency_ns: Ns, mb_per_s: f64) -> impl FnMut(Ns, &Request) -> Ns {
        move |start, r| {
            let bytes = if matches!(r.kind, IoKind::Read | IoKind::Write | IoKind::Zero) {
                r.len
            } else {
                0
            };
            start + latency_ns + (bytes as f64 / (mb_per_s * 1e6) * 1e9).round() as Ns
        }
    }
}

impl Device for Ideal {
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn submit(&mut self, now: Ns, req: Request) {
        let finish = Self::finish(self.latency_ns, self.mb_per_s);
        self.serial.submit(now, req, finish);
    }
    fn next_event(&self) -> Option<Ns> {
        self.serial.next_event()
    }
    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        let finish = Self::finish(self.latency_ns, self.mb_per_s);
        self.serial.advance(now, done, finish);
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
