//! The runner of a served reshape's round: which task goes on next (drawn
//! from the round's seed among those ready), which wake-ups make a waiting
//! task ready, and when a round is stuck. It decides nothing of what the
//! tasks do; a task waiting on a lock or the gate is the engine's.

use raidlab_core::task::{Runner, Stacks, Step, Task, Wait};
use raidlab_devices::Tripwire;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ready,
    Waits(Wait),
    Done,
}

/// Resume a ready task drawn from `rng` until all are done or the power
/// goes. Nothing ready and some not done: a deadlock (the walk and the
/// clients wait for each other), a violation. Counts into `waits` the
/// clients' and the walk's (task 0's) suspensions on a key. `before` is
/// called before each resumption, told whether the walk still runs (where
/// the caller fails a member mid-walk).
pub(super) fn drive(
    tasks: &mut [Option<Task<()>>],
    rng: &mut ChaCha8Rng,
    wire: Option<&Arc<Tripwire>>,
    waits: &mut (u64, u64),
    before: &mut dyn FnMut(bool),
) -> Result<(), String> {
    let runner = Runner::enter();
    let mut stacks = Stacks::default();
    let mut state = vec![State::Ready; tasks.len()];
    let mut ready = Vec::with_capacity(tasks.len());
    let mut woken = Vec::new();
    loop {
        if wire.is_some_and(|w| w.tripped()) {
            return Ok(());
        }
        ready.clear();
        ready.extend(
            (0..state.len())
                .filter(|&i| matches!(state[i], State::Ready | State::Waits(Wait::Runner(_)))),
        );
        if ready.is_empty() {
            if state.iter().all(|s| *s == State::Done) {
                return Ok(());
            }
            let stuck: Vec<String> = state
                .iter()
                .enumerate()
                .filter(|(_, s)| **s != State::Done)
                .map(|(i, s)| {
                    let who = if i == 0 {
                        "the walk".to_string()
                    } else {
                        format!("client {}", i - 1)
                    };
                    format!("{who} ({s:?})")
                })
                .collect();
            return Err(format!(
                "deadlock: the walk and the clients wait for each other: {}",
                stuck.join(", ")
            ));
        }
        before(state[0] != State::Done);
        let i = ready[rng.gen_range(0..ready.len())];
        let task = tasks[i]
            .as_mut()
            .ok_or("internal: a finished task was ready")?;
        match task.resume() {
            Step::Waits(w) => {
                if matches!(w, Wait::Key(_)) {
                    if i == 0 {
                        waits.1 += 1;
                    } else {
                        waits.0 += 1;
                    }
                }
                state[i] = State::Waits(w);
            }
            Step::Done(()) => {
                state[i] = State::Done;
                if let Some(t) = tasks[i].take() {
                    t.finish(&mut stacks);
                }
            }
        }
        runner.woken(&mut woken);
        for key in woken.drain(..) {
            for s in state.iter_mut() {
                if *s == State::Waits(Wait::Key(key)) {
                    *s = State::Ready;
                }
            }
        }
    }
}
