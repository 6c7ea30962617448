//! One schedule for every long run: rebuild (offline, live and simulated),
//! resync, check and repair. It decides where the next step starts and how
//! long it is (whole steps over the ranges the run must cover, in order), when
//! that step is due under the run's rate limit, and when the position is worth
//! a checkpoint in the superblocks.
//!
//! It never reads a clock and never sleeps: callers pass `now` and wait the way
//! their world waits (a thread in real time sleeps until [`Next::Wait`]'s time,
//! [`LongRun::wait`]; the simulator schedules an event for it). What a step
//! reads, computes and writes is the recovery planner's, never decided here.
//!
//! The rate is md's rule: a run limited to R bytes a second (of each member,
//! as md's speed limits are per device) starts a step only once the bytes it
//! already did, at R, would have taken until now. Nothing waits after the last
//! step: a run is done when its last step is.

use raidlab_devices::Clock;
use std::ops::Range;
use std::time::Duration;

/// What a long run does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Run the step over these positions now.
    Step(Range<u64>),
    /// The next step is due at this time on the run's clock.
    Wait(Duration),
    /// Every range is covered.
    Done,
}

/// A long run's position, pacing and checkpoint cadence.
#[derive(Debug, Clone)]
pub struct LongRun {
    /// What is left to cover, in order, none empty.
    ranges: Vec<Range<u64>>,
    /// Index into `ranges` of the range under way.
    range: usize,
    /// Where the next step starts.
    pos: u64,
    step: u64,
    /// Bytes a second (`None`: as fast as the steps go).
    rate: Option<u64>,
    /// When the run started, on its clock: the rate counts from there.
    started: Duration,
    /// Bytes worked since the start: what the rate counts.
    paced: u64,
    checkpoint_every: u64,
    /// Bytes worked since the last checkpoint.
    since_checkpoint: u64,
}

/// Pause slices of [`LongRun::wait`]: a stop asked for while a run waits out
/// its rate is seen within this long.
const WAIT_SLICE: Duration = Duration::from_millis(100);

impl LongRun {
    /// A run over `ranges` (positions in the run's own walk: member bytes for a
    /// rebuild or a parity scrub), in steps of `step`, started at `now`.
    /// Empty ranges are dropped; `step` 0 counts as 1.
    pub fn new(ranges: impl IntoIterator<Item = Range<u64>>, step: u64, now: Duration) -> Self {
        let ranges: Vec<Range<u64>> = ranges.into_iter().filter(|r| r.start < r.end).collect();
        let pos = ranges.first().map_or(0, |r| r.start);
        LongRun {
            ranges,
            range: 0,
            pos,
            step: step.max(1),
            rate: None,
            started: now,
            paced: 0,
            checkpoint_every: u64::MAX,
            since_checkpoint: 0,
        }
    }

    /// A run over one range.
    pub fn over(range: Range<u64>, step: u64, now: Duration) -> Self {
        Self::new(std::iter::once(range), step, now)
    }

    /// Limit the run to `rate` bytes a second (`None` or 0: no limit).
    pub fn with_rate(mut self, rate: Option<u64>) -> Self {
        self.rate = rate.filter(|&r| r > 0);
        self
    }

    /// Ask for a checkpoint every `bytes` worked.
    pub fn with_checkpoints(mut self, bytes: u64) -> Self {
        self.checkpoint_every = bytes.max(1);
        self
    }

    /// The steps that cover `range` with steps of `step`, in order: what
    /// [`LongRun::next`] hands out over that range, for a reader that runs
    /// ahead of the run (an offline rebuild streams its reads).
    pub fn steps(range: Range<u64>, step: u64) -> impl Iterator<Item = Range<u64>> {
        let step = step.max(1);
        let end = range.end;
        (range.start..end)
            .step_by(step as usize)
            .map(move |a| a..(a + step).min(end))
    }

    /// The ranges the run covers (what is left of them when it started).
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.ranges
    }

    /// Where the next step starts; once done, the end of the last range.
    pub fn position(&self) -> u64 {
        self.pos
    }

    pub fn is_done(&self) -> bool {
        self.range >= self.ranges.len()
    }

    /// When the next step is due: at once without a rate, else once the bytes
    /// done would have taken this long at the rate.
    pub fn due(&self) -> Duration {
        match self.rate {
            None => self.started,
            Some(rate) => {
                let ns = self.paced as u128 * 1_000_000_000 / rate as u128;
                self.started + Duration::from_nanos(ns.min(u64::MAX as u128) as u64)
            }
        }
    }

    /// The step after the last one done, whatever the time.
    pub fn peek(&self) -> Option<Range<u64>> {
        let r = self.ranges.get(self.range)?;
        Some(self.pos..(self.pos + self.step).min(r.end))
    }

    /// What to do at `now`.
    pub fn next(&self, now: Duration) -> Next {
        match self.peek() {
            None => Next::Done,
            Some(_) if self.due() > now => Next::Wait(self.due()),
            Some(step) => Next::Step(step),
        }
    }

    /// The step from the position up to `end` is done, and `work` bytes of it
    /// were worked (member bytes read or written: a mirror scrub walks array
    /// bytes, and a step a bitmap says is clean is skipped without work).
    /// The rate and the checkpoint cadence count work. Returns whether a
    /// checkpoint is due now: the caller
    /// makes what it wrote durable and records [`LongRun::position`]. None is
    /// due once the run is done (its end is recorded its own way).
    pub fn advance(&mut self, end: u64, work: u64) -> bool {
        let Some(r) = self.ranges.get(self.range) else {
            return false;
        };
        let end = end.clamp(self.pos, r.end);
        self.since_checkpoint += work;
        self.paced += work;
        self.pos = end;
        if end >= r.end {
            self.range += 1;
            if let Some(next) = self.ranges.get(self.range) {
                self.pos = next.start;
            }
        }
        if self.since_checkpoint >= self.checkpoint_every && !self.is_done() {
            self.since_checkpoint = 0;
            return true;
        }
        false
    }

    /// Wait on `clock` until the next step is due, in slices so that `stop`
    /// (asked between slices) ends the wait early. For runs on a thread of
    /// their own in real time, and the live simulator's tasks (whose sleeps
    /// suspend them on the virtual clock); the replay schedules [`Next::Wait`]
    /// instead.
    pub fn wait(&self, clock: &dyn Clock, stop: &dyn Fn() -> bool) {
        loop {
            let due = self.due();
            let now = clock.now();
            if self.is_done() || due <= now || stop() {
                return;
            }
            clock.sleep((due - now).min(WAIT_SLICE));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn steps_cover_every_range_in_order_and_skip_the_gaps() {
        let mut run = LongRun::new([0..10, 10..10, 20..25], 4, Duration::ZERO);
        let mut seen = Vec::new();
        while let Next::Step(s) = run.next(Duration::ZERO) {
            run.advance(s.end, s.end - s.start);
            seen.push(s);
        }
        assert_eq!(seen, [0..4, 4..8, 8..10, 20..24, 24..25]);
        assert!(run.is_done());
        assert_eq!(run.position(), 25);
        assert_eq!(run.next(S), Next::Done);
        let streamed: Vec<_> = LongRun::steps(20..25, 4).collect();
        assert_eq!(streamed, [20..24, 24..25]);
    }

    #[test]
    fn a_rate_spaces_the_steps_and_adds_no_wait_after_the_last() {
        // 100 bytes a second, steps of 50: due at 0, 0.5 s, 1 s.
        let mut run = LongRun::over(0..150, 50, S).with_rate(Some(100));
        assert_eq!(run.next(S), Next::Step(0..50));
        run.advance(50, 50);
        assert_eq!(run.next(S), Next::Wait(S + S / 2));
        assert_eq!(run.next(S + S / 2), Next::Step(50..100));
        run.advance(100, 50);
        assert_eq!(run.next(S + S), Next::Step(100..150));
        run.advance(150, 50);
        assert_eq!(run.next(S + S), Next::Done);
        // A rate of 0 is no limit.
        let run = LongRun::over(0..150, 50, S).with_rate(Some(0));
        assert_eq!(run.due(), S);
    }

    #[test]
    fn checkpoints_come_every_so_many_bytes_but_not_at_the_end() {
        let mut run = LongRun::over(0..100, 10, Duration::ZERO).with_checkpoints(25);
        let mut at = Vec::new();
        while let Some(s) = run.peek() {
            if run.advance(s.end, s.end - s.start) {
                at.push(run.position());
            }
        }
        assert_eq!(at, [30, 60, 90]);
    }

    #[test]
    fn a_wait_sleeps_until_due_or_stop() {
        #[derive(Debug, Default)]
        struct Virtual(std::sync::Mutex<Duration>);
        impl Clock for Virtual {
            fn now(&self) -> Duration {
                *self.0.lock().unwrap()
            }
            fn sleep(&self, d: Duration) {
                *self.0.lock().unwrap() += d;
            }
        }
        let clock = Virtual::default();
        let mut run = LongRun::over(0..300, 100, Duration::ZERO).with_rate(Some(100));
        run.advance(100, 100);
        run.wait(&clock, &|| false);
        assert_eq!(clock.now(), S);
        run.advance(200, 100);
        let stopped = std::sync::atomic::AtomicBool::new(false);
        run.wait(&clock, &|| {
            // Stop asked after the first slice.
            stopped.swap(true, std::sync::atomic::Ordering::Relaxed)
        });
        assert_eq!(clock.now(), S + WAIT_SLICE);
    }
}
