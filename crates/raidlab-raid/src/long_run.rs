//! One schedule and one driver for every long run: rebuild (offline, live
//! and simulated), resync, check and repair, and md's bitmap daemon. It
//! decides where the next step starts and how long it is (whole steps over
//! the ranges the run must cover, in order), when that step is due (under
//! the run's rate limit, or a period after the last one for a daemon), when
//! the position is worth a checkpoint in the superblocks, and, in
//! [`LongRun::run_due`] and [`LongRun::drive`], the order of those: stop
//! asked?, step, advance, checkpoint, progress, wait. The stripe cache's
//! write-out of stripes held past their time is such a daemon too, its
//! period following its hold time ([`Steps::period`]), and so are a serving
//! process's polls of its arrays (safe mode's clean mark, failures recorded:
//! `live::drive_polls`).
//!
//! The schedule never reads a clock and never sleeps: [`LongRun::next`]
//! takes `now`. The driver reads the clock it is given and waits the way
//! that clock's world waits: [`LongRun::drive`] sleeps on it until the next
//! step is due (a thread in real time; a task of the simulator, whose sleeps
//! suspend it in virtual time), [`LongRun::run_due`] runs only what is due
//! and says when the next step is (a poll: `LiveArray::poll` runs the
//! bitmap daemon's passes that way). What a step reads, computes and writes
//! is the caller's [`Steps`] (the recovery planner's, the daemon's), never
//! decided here.
//!
//! The rate is md's rule: a run limited to R bytes a second (of each member,
//! as md's speed limits are per device) starts a step only once the bytes it
//! already did, at R, would have taken until now. Nothing waits after the last
//! step: a run is done when its last step is. A periodic run
//! ([`LongRun::every`]: md's bitmap daemon, a pass every `daemon_sleep`) has
//! no end; its next step is due one period after the last one ended, never
//! sooner, however late the last one came (two passes back to back would
//! clear bits md keeps for two periods).

use raidlab_core::Result;
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

/// What one step did, for the driver to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stepped {
    /// Where the step ended (the position from here on).
    pub end: u64,
    /// Bytes worked: what the rate and the checkpoint cadence count (a step
    /// a bitmap says is clean is skipped with no work).
    pub work: u64,
}

/// The work of one long run, as the driver steps it.
pub trait Steps {
    /// Do the step over `range`, the driver's next.
    fn step(&mut self, range: Range<u64>) -> Result<Stepped>;
    /// Make what the steps did durable and record that everything below
    /// `pos` is done (md's recovery_offset or resync_offset). Called when
    /// the cadence asks, never after the last step (a run's end is recorded
    /// its own way).
    fn checkpoint(&mut self, _pos: u64) -> Result<()> {
        Ok(())
    }
    /// After each step (and its checkpoint, if one was due): the position
    /// is `end`.
    fn progress(&mut self, _end: u64) {}
    /// A periodic run's period from here on, asked after each step: for a
    /// daemon whose period follows a tunable that may change while it runs
    /// (the stripe cache's tick follows its hold time). `None` keeps it.
    fn period(&self) -> Option<Duration> {
        None
    }
}

/// A closure as [`Steps`] with no checkpoints and no progress (a daemon's
/// passes).
pub struct EachStep<F>(pub F);

impl<F> std::fmt::Debug for EachStep<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EachStep")
    }
}

impl<F: FnMut(Range<u64>) -> Result<Stepped>> Steps for EachStep<F> {
    fn step(&mut self, range: Range<u64>) -> Result<Stepped> {
        (self.0)(range)
    }
}

/// Where a driver left a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driven {
    /// Every range is covered.
    Done,
    /// A stop was asked for before the step at this position (nothing of it
    /// done; what the steps before it wrote is not flushed by the driver).
    Stopped(u64),
    /// ([`LongRun::run_due`] only) the next step is due at this time.
    Due(Duration),
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
    /// A periodic run's period: each step is due this long after the last
    /// one ended (`last`).
    every: Option<Duration>,
    /// When the last step ended (the start, before the first).
    last: Duration,
    /// Whether a wait is cut in slices to look at the stop (off: a run
    /// nothing stops from outside sleeps each wait whole).
    sliced: bool,
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
            every: None,
            last: now,
            sliced: true,
            paced: 0,
            checkpoint_every: u64::MAX,
            since_checkpoint: 0,
        }
    }

    /// A run over one range.
    pub fn over(range: Range<u64>, step: u64, now: Duration) -> Self {
        Self::new(std::iter::once(range), step, now)
    }

    /// A run with no end, one step of 1 at a time (the position counts the
    /// steps), each due `period` after the last one ended; the first at
    /// `now + period`. md's bitmap daemon's passes.
    pub fn every(period: Duration, now: Duration) -> Self {
        let mut run = Self::over(0..u64::MAX, 1, now);
        run.every = Some(period);
        run
    }

    /// Sleep each wait whole instead of in slices that look at the stop: for
    /// a run whose stop is seen only between steps anyway (a daemon that
    /// ends with its array; in the simulator each slice would be a wake-up
    /// of its own).
    pub fn unsliced(mut self) -> Self {
        self.sliced = false;
        self
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
    pub fn steps(
        range: Range<u64>,
        step: u64,
    ) -> impl Iterator<Item = Range<u64>> + Clone + Send + 'static {
        let step = step.max(1);
        let end = range.end;
        (range.start..end)
            .step_by(step as usize)
            .map(move |a| a..(a + step).min(end))
    }

    /// Every step the run has still to hand out, in order, over all its
    /// ranges: what [`LongRun::next`] gives from here on, for readers that
    /// run ahead of the driver (an offline rebuild streams its reads).
    pub fn steps_left(&self) -> impl Iterator<Item = Range<u64>> + Clone + Send + 'static {
        let (pos, step) = (self.pos, self.step);
        let ranges = self.ranges.get(self.range..).unwrap_or_default().to_vec();
        ranges
            .into_iter()
            .flat_map(move |r| Self::steps(r.start.max(pos)..r.end, step))
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

    /// When the next step is due: a period after the last one for a
    /// periodic run; at once without a rate, else once the bytes done would
    /// have taken this long at the rate.
    pub fn due(&self) -> Duration {
        if let Some(period) = self.every {
            return self.last + period;
        }
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

    /// Run every step due now on `clock`, in order, through `steps`: before
    /// each, `quit` is asked; after each, the position advances, a
    /// checkpoint is taken when the cadence asks for one, and progress is
    /// said. Returns when the next step is not due yet ([`Driven::Due`]),
    /// the run is done, or `quit` said stop. Never sleeps. A step that fails
    /// ends the run there (its position stays where the step began).
    pub fn run_due(
        &mut self,
        clock: &dyn Clock,
        quit: &dyn Fn() -> bool,
        steps: &mut dyn Steps,
    ) -> Result<Driven> {
        loop {
            if self.is_done() {
                return Ok(Driven::Done);
            }
            if quit() {
                return Ok(Driven::Stopped(self.pos));
            }
            let step = match self.next(clock.now()) {
                Next::Done => return Ok(Driven::Done),
                Next::Wait(at) => return Ok(Driven::Due(at)),
                Next::Step(step) => step,
            };
            let did = steps.step(step)?;
            if self.every.is_some() {
                self.last = clock.now();
                if let Some(period) = steps.period() {
                    self.every = Some(period);
                }
            }
            if self.advance(did.end, did.work) {
                steps.checkpoint(self.pos)?;
            }
            steps.progress(did.end);
        }
    }

    /// Run the run to its end, or until `quit` says stop (asked before each
    /// step and while waiting), waiting on `clock` between steps as the
    /// schedule says: [`LongRun::run_due`] then [`LongRun::wait`], again.
    /// Returns [`Driven::Done`] or [`Driven::Stopped`]; the caller makes
    /// a stopped run's work durable and records its position its own way.
    pub fn drive(
        &mut self,
        clock: &dyn Clock,
        quit: &dyn Fn() -> bool,
        steps: &mut dyn Steps,
    ) -> Result<Driven> {
        loop {
            match self.run_due(clock, quit, steps)? {
                Driven::Due(_) => self.wait(clock, quit),
                ended => return Ok(ended),
            }
        }
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
            let left = due - now;
            clock.sleep(if self.sliced {
                left.min(WAIT_SLICE)
            } else {
                left
            });
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

    /// What the driver did, in order, for [`Log`]'s steps.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Did {
        Step(Range<u64>, Duration),
        Checkpoint(u64),
        Progress(u64),
    }

    struct Log<'a> {
        clock: &'a Virtual,
        did: Vec<Did>,
        /// How long each step takes on the clock.
        takes: Duration,
    }

    impl Log<'_> {
        /// When each step began.
        fn step_times(&self) -> Vec<Duration> {
            self.did
                .iter()
                .filter_map(|d| match d {
                    Did::Step(_, at) => Some(*at),
                    _ => None,
                })
                .collect()
        }
    }

    impl Steps for Log<'_> {
        fn step(&mut self, range: Range<u64>) -> Result<Stepped> {
            self.did.push(Did::Step(range.clone(), self.clock.now()));
            self.clock.sleep(self.takes);
            Ok(Stepped {
                end: range.end,
                work: range.end - range.start,
            })
        }
        fn checkpoint(&mut self, pos: u64) -> Result<()> {
            self.did.push(Did::Checkpoint(pos));
            Ok(())
        }
        fn progress(&mut self, end: u64) {
            self.did.push(Did::Progress(end));
        }
    }

    #[test]
    fn the_driver_steps_paces_checkpoints_says_progress_and_stops() {
        use Did::*;
        let clock = Virtual::default();
        let mut log = Log {
            clock: &clock,
            did: Vec::new(),
            takes: Duration::ZERO,
        };
        // 100 bytes a second, steps of 50, a checkpoint every 100 bytes.
        let mut run = LongRun::over(0..200, 50, Duration::ZERO)
            .with_rate(Some(100))
            .with_checkpoints(100);
        assert_eq!(
            run.drive(&clock, &|| false, &mut log).unwrap(),
            Driven::Done
        );
        assert_eq!(
            log.did,
            [
                Step(0..50, Duration::ZERO),
                Progress(50),
                Step(50..100, S / 2),
                Checkpoint(100),
                Progress(100),
                Step(100..150, S),
                Progress(150),
                Step(150..200, S + S / 2),
                Progress(200),
            ]
        );
        assert_eq!(clock.now(), S + S / 2, "no wait after the last step");
        // A stop asked after two steps: the third is not begun, and the
        // driver says where the run stands.
        let mut run = LongRun::over(0..200, 50, clock.now());
        log.did.clear();
        let steps = std::cell::Cell::new(0);
        let quit = || {
            steps.set(steps.get() + 1);
            steps.get() > 2
        };
        assert_eq!(
            run.drive(&clock, &quit, &mut log).unwrap(),
            Driven::Stopped(100)
        );
        assert_eq!(log.did.len(), 4);
    }

    #[test]
    fn a_periodic_run_is_due_a_period_after_its_last_step_ended() {
        let clock = Virtual::default();
        let mut log = Log {
            clock: &clock,
            did: Vec::new(),
            takes: S,
        };
        let five = 5 * S;
        let mut run = LongRun::every(five, clock.now());
        let never = || false;
        assert_eq!(
            run.run_due(&clock, &never, &mut log).unwrap(),
            Driven::Due(five),
            "the first step a period from the start"
        );
        clock.sleep(five);
        // The step takes 1 s: the next is due 5 s after it ended.
        assert_eq!(
            run.run_due(&clock, &never, &mut log).unwrap(),
            Driven::Due(11 * S)
        );
        // Looked at late, it runs once, not once per period missed.
        clock.sleep(20 * S);
        assert_eq!(
            run.run_due(&clock, &never, &mut log).unwrap(),
            Driven::Due(32 * S)
        );
        let steps: Vec<_> = log
            .did
            .iter()
            .filter_map(|d| match d {
                Did::Step(r, at) => Some((r.start, *at)),
                _ => None,
            })
            .collect();
        assert_eq!(steps, [(0, five), (1, 26 * S)]);
        // Driven on a thread, it sleeps each wait whole when unsliced.
        let clock = Virtual::default();
        let mut log = Log {
            clock: &clock,
            did: Vec::new(),
            takes: Duration::ZERO,
        };
        let mut run = LongRun::every(five, Duration::ZERO).unsliced();
        let wakes = std::cell::Cell::new(0);
        let quit = || {
            wakes.set(wakes.get() + 1);
            wakes.get() > 9
        };
        assert!(matches!(
            run.drive(&clock, &quit, &mut log).unwrap(),
            Driven::Stopped(_)
        ));
        // The stop is asked three times a step (before the wait, in it,
        // before the step): three steps, at 5, 10 and 15 s, the tenth ask
        // stops it.
        assert_eq!(log.step_times(), [five, 2 * five, 3 * five]);
    }

    /// Steps whose period halves after each (a tunable turned down while
    /// the daemon runs).
    struct Halving<'a>(Log<'a>, Duration);

    impl Steps for Halving<'_> {
        fn step(&mut self, range: Range<u64>) -> Result<Stepped> {
            self.1 /= 2;
            self.0.step(range)
        }
        fn period(&self) -> Option<Duration> {
            Some(self.1)
        }
    }

    #[test]
    fn a_periodic_run_takes_the_period_its_steps_give_from_the_next_wait() {
        let clock = Virtual::default();
        let log = Log {
            clock: &clock,
            did: Vec::new(),
            takes: Duration::ZERO,
        };
        let mut halving = Halving(log, 8 * S);
        let mut run = LongRun::every(8 * S, Duration::ZERO).unsliced();
        let steps = std::cell::Cell::new(0);
        let quit = || {
            steps.set(steps.get() + 1);
            steps.get() > 9
        };
        run.drive(&clock, &quit, &mut halving).unwrap();
        // 8 s to the first; then 4, then 2 after each.
        assert_eq!(halving.0.step_times(), [8 * S, 12 * S, 14 * S]);
    }

    #[test]
    fn steps_left_are_the_steps_the_driver_hands_out() {
        let mut run = LongRun::new([0..10, 20..25], 4, Duration::ZERO);
        run.advance(4, 4);
        let left: Vec<_> = run.steps_left().collect();
        assert_eq!(left, [4..8, 8..10, 20..24, 24..25]);
        let mut handed = Vec::new();
        while let Next::Step(s) = run.next(Duration::ZERO) {
            run.advance(s.end, 0);
            handed.push(s);
        }
        assert_eq!(handed, left);
    }

    #[test]
    fn a_wait_sleeps_until_due_or_stop() {
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
