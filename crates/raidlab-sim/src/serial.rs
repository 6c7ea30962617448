//! One request at a time, in arrival order: the queue of the simple device
//! models (`ideal`, `fixed`), which differ only in how long a request takes.
//!
//! Decides only the order (first come, first served, nothing overlaps); a
//! request's service time is the model's, passed in as a function.

use crate::device::{Completion, Ns, Request};
use std::collections::VecDeque;

/// Requests waiting and the one being served (with when it completes).
#[derive(Debug, Clone, Default)]
pub(crate) struct Serial {
    queue: VecDeque<Request>,
    busy: Option<(Request, Ns)>,
}

impl Serial {
    /// Queue `req` at `now`; it starts at once if nothing is being served.
    /// `finish(start, request)` is when a request started at `start` ends.
    pub(crate) fn submit(&mut self, now: Ns, req: Request, finish: impl FnMut(Ns, &Request) -> Ns) {
        self.queue.push_back(req);
        self.start_next(now, finish);
    }

    pub(crate) fn next_event(&self) -> Option<Ns> {
        self.busy.as_ref().map(|(_, t)| *t)
    }

    /// Complete what ends by `now`, each next request starting when the one
    /// before ended.
    pub(crate) fn advance(
        &mut self,
        now: Ns,
        done: &mut Vec<Completion>,
        mut finish: impl FnMut(Ns, &Request) -> Ns,
    ) {
        while let Some((r, t)) = self.busy.take() {
            if t > now {
                self.busy = Some((r, t));
                break;
            }
            done.push(Completion { id: r.id, at: t });
            self.start_next(t, &mut finish);
        }
    }

    fn start_next(&mut self, now: Ns, mut finish: impl FnMut(Ns, &Request) -> Ns) {
        if self.busy.is_none() {
            if let Some(r) = self.queue.pop_front() {
                let end = finish(now, &r);
                self.busy = Some((r, end));
            }
        }
    }
}
