//! The clients of a served reshape: what each asks, as a task through the
//! array's `ReshapingVolume`, and what its answers promise the model.
//!
//! It decides the requests (each client writes only its own blocks, so two
//! requests in flight never share a sector and the order of one client's
//! answers is the order of its bytes) and how the answers enter the model:
//! in the order they came, a flush at the point it was issued (it promises
//! what was answered before that, nothing answered while it ran), answers
//! given after the power went as never seen. It never decides anything of
//! the reshape: the gate and the walk are the engine's.

use crate::torture::model::{Model, SECTOR};
use raidlab_core::task::{Stacks, Task};
use raidlab_core::Volume;
use raidlab_devices::Tripwire;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// Bytes of one block: block `i` belongs to client `i % clients` (but
/// for the two [`draw`] gives client 0 at the array's end).
pub(super) const BLOCK: usize = 16 << 10;

/// One request of a client.
#[derive(Debug, Clone)]
pub(super) enum Ask {
    Write { off: usize, data: Vec<u8> },
    Fua { off: usize, data: Vec<u8> },
    Read { off: usize, len: usize },
    Flush,
}

impl Ask {
    /// A write (plain or FUA) reaching the array's last tenth.
    pub(super) fn writes_near_end(&self, size: usize) -> bool {
        match self {
            Ask::Write { off, data } | Ask::Fua { off, data } => near_end(*off, data.len(), size),
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match self {
            Ask::Write { off, data } => format!("write {off}+{}", data.len()),
            Ask::Fua { off, data } => format!("fua write {off}+{}", data.len()),
            Ask::Read { off, len } => format!("read {off}+{len}"),
            Ask::Flush => "flush".into(),
        }
    }
}

/// An answer, or a request the power cut short.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) client: usize,
    pub(super) ask: Ask,
    /// Answers given before this one was issued (a flush promises them).
    pub(super) issued_after: usize,
    /// `None`: never answered (the power went while it ran).
    pub(super) result: Option<raidlab_core::Result<()>>,
    /// Answered before the power went: a client saw it.
    pub(super) seen: bool,
    /// A read's bytes.
    pub(super) got: Vec<u8>,
}

/// What the clients of one round answered, in order.
#[derive(Debug, Default)]
pub(super) struct Answers {
    pub(super) done: Vec<Answer>,
    /// Each client's request under way, if any.
    pub(super) under_way: Vec<Option<(Ask, usize)>>,
}

/// The array's tail the clients aim at often: its last tenth (issue 36's
/// suspected zero read lay in a restriped array's last stripes).
pub(super) fn near_end(off: usize, len: usize, size: usize) -> bool {
    off + len > size - size / 10
}

/// `clients` clients' requests over an array of `size` bytes, `per` each.
/// A third of them land in the array's last tenth, and client 0 alone owns
/// the two blocks around the start of the array's last 64 KiB (a chunk
/// boundary at every chunk drawn), so that its requests may straddle it.
pub(super) fn draw(rng: &mut ChaCha8Rng, size: usize, clients: usize, per: usize) -> Vec<Vec<Ask>> {
    let blocks = size / BLOCK;
    let edge = (size - (64 << 10)) / BLOCK;
    let owner = |b: usize| {
        if b + 1 == edge || b == edge {
            0
        } else {
            b % clients
        }
    };
    (0..clients)
        .map(|c| {
            let mine: Vec<usize> = (0..blocks).filter(|&b| owner(b) == c).collect();
            let tail: Vec<usize> = mine
                .iter()
                .copied()
                .filter(|&b| near_end(b * BLOCK, BLOCK, size))
                .collect();
            (0..per)
                .map(|_| {
                    let pick = rng.gen_range(0..10u32);
                    let (off, len) = if c == 0 && pick == 0 {
                        // Over the boundary: sectors before it and after.
                        let before = rng.gen_range(1..=8);
                        let after = rng.gen_range(1..=8);
                        (edge * BLOCK - before * SECTOR, (before + after) * SECTOR)
                    } else {
                        let from = if pick < 4 && !tail.is_empty() {
                            &tail
                        } else {
                            &mine
                        };
                        let b = from[rng.gen_range(0..from.len())] * BLOCK;
                        // Sector-aligned mostly, as a file system writes;
                        // now and then a few bytes anywhere.
                        if rng.gen_ratio(3, 4) {
                            let first = rng.gen_range(0..BLOCK / SECTOR);
                            let n = rng.gen_range(1..=(BLOCK / SECTOR - first).min(16));
                            (b + first * SECTOR, n * SECTOR)
                        } else {
                            let at = rng.gen_range(0..BLOCK - 1);
                            (b + at, rng.gen_range(1..=(BLOCK - at).min(3000)))
                        }
                    };
                    let data = |rng: &mut ChaCha8Rng| {
                        let mut d = vec![0u8; len];
                        rng.fill(&mut d[..]);
                        d
                    };
                    match rng.gen_range(0..20u32) {
                        0..=11 => Ask::Write {
                            off,
                            data: data(rng),
                        },
                        12..=13 => Ask::Fua {
                            off,
                            data: data(rng),
                        },
                        14..=17 => Ask::Read { off, len },
                        _ => Ask::Flush,
                    }
                })
                .collect()
        })
        .collect()
}

/// Client `c`'s requests as a task, in turn, through `volume`; its answers
/// into `answers`, each marked seen if the power had not gone (`wire`).
pub(super) fn spawn(
    stacks: &mut Stacks,
    c: usize,
    asks: Vec<Ask>,
    volume: Arc<dyn Volume>,
    answers: Rc<RefCell<Answers>>,
    wire: Option<Arc<Tripwire>>,
) -> std::io::Result<Task<()>> {
    Task::new(stacks, move || {
        for ask in asks {
            let issued_after = answers.borrow().done.len();
            answers.borrow_mut().under_way[c] = Some((ask.clone(), issued_after));
            let mut got = Vec::new();
            let result = match &ask {
                Ask::Write { off, data } => volume.write_at(data, *off as u64),
                Ask::Fua { off, data } => volume.write_at_fua(data, *off as u64),
                Ask::Read { off, len } => {
                    got = vec![0u8; *len];
                    volume.read_at(&mut got, *off as u64)
                }
                Ask::Flush => volume.flush(),
            };
            let seen = !wire.as_ref().is_some_and(|w| w.tripped());
            let mut a = answers.borrow_mut();
            a.under_way[c] = None;
            a.done.push(Answer {
                client: c,
                ask,
                issued_after,
                result: Some(result),
                seen,
                got,
            });
        }
    })
}

/// Into `model`, the answers of a round in the order they came: a seen
/// write's bytes, a seen flush at the point it was issued, a seen read
/// judged against what was answered before it; then the requests no client
/// saw answered (their bytes may or may not have landed). Errors name the
/// first request whose answer breaks a promise; `strict`: every request
/// must have succeeded (no power cut, no member lost before it). `hole`:
/// the number of answers given when a member failed and the sectors md's
/// write hole then opens (an earlier cut's suspect stripes): from that
/// answer on they may read anything until written.
pub(super) fn apply(
    model: &mut Model,
    answers: &Answers,
    strict: bool,
    hole: Option<(usize, &[usize])>,
) -> Result<(), String> {
    let seen: Vec<&Answer> = answers.done.iter().filter(|a| a.seen).collect();
    // Flushes that succeeded, by the number of answers before their issue.
    let mut flush_at: Vec<usize> = seen
        .iter()
        .filter(|a| matches!(a.ask, Ask::Flush) && matches!(a.result, Some(Ok(()))))
        .map(|a| a.issued_after)
        .collect();
    flush_at.sort_unstable();
    let mut flushes = flush_at.into_iter().peekable();
    let mut unseen: Vec<&Ask> = Vec::new();
    for (i, a) in answers.done.iter().enumerate() {
        if let Some((_, sectors)) = hole.filter(|h| h.0 == i) {
            for &s in sectors {
                model.allow_any(s);
            }
        }
        while flushes.peek().is_some_and(|&n| n <= i) {
            flushes.next();
            model.flush();
        }
        let what = format!("client {}'s {}", a.client, a.ask.describe());
        let ok = match &a.result {
            Some(Ok(())) => true,
            Some(Err(e)) if a.seen && strict => return Err(format!("{what} failed: {e}")),
            _ => false,
        };
        if !a.seen {
            unseen.push(&a.ask);
            continue;
        }
        match &a.ask {
            Ask::Write { off, data } if ok => model.write(data, *off),
            Ask::Fua { off, data } if ok => {
                model.write(data, *off);
                model.fua(*off, data.len());
            }
            // A write that failed with the power on: its bytes are not
            // known (only ever outside `strict`).
            Ask::Write { off, data } | Ask::Fua { off, data } => model.forget(*off, data.len()),
            Ask::Read { off, .. } if ok => {
                if let Some(d) = model.first_difference(&a.got, *off) {
                    return Err(format!(
                        "{what} read byte {} as {:#04x}, the answers before it wrote {:#04x}",
                        off + d,
                        a.got[d],
                        model.current[off + d]
                    ));
                }
            }
            Ask::Read { .. } | Ask::Flush => {}
        }
    }
    for _ in flushes {
        model.flush();
    }
    unseen.extend(answers.under_way.iter().flatten().map(|(ask, _)| ask));
    for ask in unseen {
        if let Ask::Write { off, data } | Ask::Fua { off, data } = ask {
            model.write(data, *off);
        }
    }
    Ok(())
}
