//! The server's recent events: every line `raidlab serve` logs (membership
//! changes the monitor thread reports, what the control socket carried out,
//! connection errors) goes to stderr as before and into a ring of the last
//! [`KEEP`] with the time it happened, for the status page.
//!
//! It decides nothing and must never hold its lock across anything but a
//! push or a copy: loggers are called from the I/O monitor and control threads.

use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Events kept: enough for the last minutes of a rebuild, small enough to
/// send every second.
pub const KEEP: usize = 50;

#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// Milliseconds since the Unix epoch (the page shows local time).
    pub unix_ms: u64,
    pub text: String,
}

/// The ring, shared by every logger of one server.
#[derive(Debug, Default)]
pub struct Events {
    ring: Mutex<VecDeque<Event>>,
}

impl Events {
    /// Log `m` as `raidlab serve` always has (stderr) and keep it.
    pub fn say(&self, m: &str) {
        eprintln!("raidlab serve: {m}");
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        if ring.len() == KEEP {
            ring.pop_front();
        }
        ring.push_back(Event {
            unix_ms,
            text: m.to_string(),
        });
    }

    /// The events kept, oldest first.
    pub fn recent(&self) -> Vec<Event> {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        ring.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_ones_in_order() {
        let e = Events::default();
        for i in 0..KEEP + 5 {
            e.say(&format!("event {i}"));
        }
        let r = e.recent();
        assert_eq!(r.len(), KEEP);
        assert_eq!(r[0].text, "event 5");
        assert_eq!(r[KEEP - 1].text, format!("event {}", KEEP + 4));
    }
}
