//! md's safe mode for an array in service: its superblocks say "active"
//! (dirty) only while writes are pending, and "clean" again once no write has
//! arrived for [`SAFE_MODE_DELAY`] and everything written has been flushed.
//! A crash while the array sits idle then costs no resync, and `detail` says
//! what md's would: `clean` for an idle array, `active` while it writes.
//!
//! It decides when the dirty and clean marks are written and holds new
//! writes while one is; what the marks write is [`Assembly::mark_dirty`] and
//! [`Assembly::mark_idle`]. Every write of a served array goes through
//! [`Gated`] (clients and a cache in front alike), and a repair counts as a
//! write while it runs: nothing may change the members' data while the
//! superblocks say clean. It never plans member I/O itself.

use super::{lock, LiveArray};
use crate::assemble::Assembly;
use raidlab_core::{Result, Volume};
use serde::Serialize;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How long an array must go without writes before it is marked clean again
/// (md's `safe_mode_delay` default, 200 ms). The server looks every
/// [`SAFE_MODE_POLL`], so the mark lands between the two sums after the last
/// write.
pub const SAFE_MODE_DELAY: Duration = Duration::from_millis(200);
/// How often a serving process should call [`LiveArray::poll`].
pub const SAFE_MODE_POLL: Duration = Duration::from_millis(100);

/// What the superblocks of a running array say about writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteMark {
    /// No write pending; everything written is flushed and the superblocks
    /// say clean.
    Clean,
    /// Writes pending or recent: the superblocks say dirty (md's "active").
    Active,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Clean,
    Active,
    /// A mark is being written; writes wait for it.
    Changing,
}

#[derive(Debug)]
struct State {
    mark: Mark,
    /// Writes (and repairs) under way.
    in_flight: usize,
    /// When the last one ended, on the array's clock.
    last_write: Duration,
    /// Off for an array that stays marked dirty until it stops: read-only, or
    /// not in sync when it started (its resync is still owed).
    enabled: bool,
}

/// The safe-mode state of one running array.
#[derive(Debug)]
pub(super) struct SafeMode {
    state: Mutex<State>,
    changed: Condvar,
}

impl SafeMode {
    /// Off until [`LiveArray::start_safe_mode`]: the array stays as the start
    /// left it (marked dirty when started for writing).
    pub(super) fn new() -> SafeMode {
        SafeMode {
            state: Mutex::new(State {
                mark: Mark::Active,
                in_flight: 0,
                last_write: Duration::ZERO,
                enabled: false,
            }),
            changed: Condvar::new(),
        }
    }

    fn wait<'a>(&self, g: std::sync::MutexGuard<'a, State>) -> std::sync::MutexGuard<'a, State> {
        self.changed.wait(g).unwrap_or_else(|p| p.into_inner())
    }
}

impl LiveArray {
    /// Start safe mode on an array started for writing: `was_clean` says
    /// whether it was in sync (then an idle spell marks it clean; otherwise it
    /// stays dirty until its resync, as the start left it).
    pub fn start_safe_mode(&self, was_clean: bool) {
        let now = lock(&self.clock).now();
        let mut g = lock(&self.safe.state);
        g.enabled = was_clean;
        g.last_write = now;
    }

    /// Whether the superblocks' dirty mark, when they carry one, is safe
    /// mode's (the array was in sync when it started serving), not a resync
    /// owed: neither the start's nor the new space's of a served `--size`
    /// (`resize.rs`), which a change made meanwhile would lose.
    pub(super) fn dirty_mark_is_ours(&self) -> bool {
        lock(&self.safe.state).enabled && self.resync_owed().is_none()
    }

    /// Whether safe mode has the superblocks marked idle now (no write
    /// pending, none marking them dirty).
    pub(super) fn marked_clean(&self) -> bool {
        let g = lock(&self.safe.state);
        g.enabled && g.mark == Mark::Clean
    }

    /// What the superblocks say about writes now; `None` when safe mode is off
    /// (read-only, or owed a resync: the start's mark stands).
    pub fn write_mark(&self) -> Option<WriteMark> {
        let g = lock(&self.safe.state);
        g.enabled.then_some(match g.mark {
            Mark::Clean => WriteMark::Clean,
            // Being marked clean still counts as active: it is not, yet.
            Mark::Active | Mark::Changing => WriteMark::Active,
        })
    }

    /// The volume clients write through: the running array, with every write
    /// marking the superblocks dirty first when they say clean.
    pub fn volume(self: &Arc<Self>) -> Arc<dyn Volume> {
        Arc::new(Gated(self.clone()))
    }

    /// A write (or a repair) is about to change the members' data: mark the
    /// superblocks dirty first if they say clean, waiting for a mark being
    /// written. Each `Ok` must be matched by [`LiveArray::end_write`].
    pub(super) fn begin_write(&self) -> Result<()> {
        let safe = &self.safe;
        let mut g = lock(&safe.state);
        loop {
            match g.mark {
                Mark::Active => {
                    g.in_flight += 1;
                    return Ok(());
                }
                Mark::Changing => g = safe.wait(g),
                Mark::Clean => {
                    g.mark = Mark::Changing;
                    drop(g);
                    let r = self.mark_dirty_now();
                    g = lock(&safe.state);
                    g.mark = if r.is_ok() { Mark::Active } else { Mark::Clean };
                    safe.changed.notify_all();
                    r?;
                }
            }
        }
    }

    /// A write begun with [`LiveArray::begin_write`] is done.
    pub(super) fn end_write(&self) {
        let now = lock(&self.clock).now();
        let mut g = lock(&self.safe.state);
        g.in_flight = g.in_flight.saturating_sub(1);
        g.last_write = now;
    }

    /// Write the dirty mark. A member the running array took out since the
    /// last poll is recorded faulty first, as the poll would, so that the
    /// mark is not refused for a superblock that can no longer be written.
    fn mark_dirty_now(&self) -> Result<()> {
        let mut asm = lock(&self.asm);
        let said = self.record_failures(&mut asm);
        lock(&self.said).extend(said);
        asm.change_running(&self.array(), |a| a.mark_dirty().map(|_| ()))
    }

    /// From [`LiveArray::poll`]: after [`SAFE_MODE_DELAY`] without writes,
    /// flush the array (held stripes included) and mark it clean, with new
    /// writes held until the mark is written. Returns what went wrong.
    pub(super) fn settle(&self, asm: &mut Assembly) -> Option<String> {
        let now = lock(&self.clock).now();
        let safe = &self.safe;
        let mut g = lock(&safe.state);
        if !g.enabled
            || g.mark != Mark::Active
            || g.in_flight > 0
            || now.saturating_sub(g.last_write) < SAFE_MODE_DELAY
        {
            return None;
        }
        g.mark = Mark::Changing;
        drop(g);
        // Idle with a resync of new space owed: the superblocks say where
        // it is, as md's do (`resize.rs`).
        let owed = self.resync_owed();
        let r = self.array().flush().and_then(|()| {
            asm.change_running(&self.array(), |a| match owed {
                Some(at) => a.commit(|sb| sb.resync_offset = at),
                None => a.mark_idle(),
            })
        });
        let mut g = lock(&safe.state);
        g.mark = if r.is_ok() { Mark::Clean } else { Mark::Active };
        if r.is_err() {
            // Not again at every poll: after another quiet spell.
            g.last_write = now;
        }
        safe.changed.notify_all();
        r.err().map(|e| {
            format!("cannot mark the array clean after its writes stopped ({e}); it stays active")
        })
    }
}

/// A running array as its clients see it: every call goes to the array, and
/// those that change data pass the safe-mode gate first.
struct Gated(Arc<LiveArray>);

impl Gated {
    /// A write that changes data, `len` bytes at `offset`: one past an
    /// `--array-size` cut is refused before it could mark the superblocks
    /// dirty (a client connected before the cut still addresses the old
    /// size); the route checks again, under its lock, for one racing a cut.
    fn write<T>(
        &self,
        offset: u64,
        len: u64,
        f: impl FnOnce(&dyn Volume) -> Result<T>,
    ) -> Result<T> {
        let serving = &self.0.serving;
        serving
            .exposed()
            .check(|| serving.name(), raidlab_core::Op::Write, offset, len)?;
        self.0.begin_write()?;
        let r = f(self.0.serving());
        self.0.end_write();
        r
    }
}

// Reads, sizes and views go straight to the array (Layer's defaults); the
// four calls that change data pass the gate; every call that changes data,
// and a flush, is acknowledged only once the members the array took out
// meanwhile are recorded faulty: md holds a write that failed a member, and
// the writes after it, until its superblocks say so. Acknowledged earlier, a
// power cut before the next flush could assemble that member as active
// beside copies that took the write, disagreeing where no bit or log says.
// (Cheap when nothing failed: a look at the array's failed roles.)
impl raidlab_core::Layer for Gated {
    fn below(&self) -> &dyn Volume {
        self.0.serving()
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.write(offset, buf.len() as u64, |v| v.write_at(buf, offset))?;
        self.0.record_failures_now();
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        self.0.serving().flush()?;
        self.0.record_failures_now();
        Ok(())
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.write(offset, buf.len() as u64, |v| v.write_at_fua(buf, offset))?;
        self.0.record_failures_now();
        Ok(())
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.write(offset, len, |v| v.write_zeroes(offset, len))?;
        self.0.record_failures_now();
        Ok(())
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.write(offset, len, |v| v.discard(offset, len))?;
        self.0.record_failures_now();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assemble::{create, CreateSpec, Device, NewMember};
    use raidlab_devices::{Clock, MemVolume};
    use raidlab_layout::{Layout, Level, ParityLayout};
    use raidlab_md::Superblock;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::Instant;

    /// A member that checks, at every write to its data area, that its own
    /// superblock says dirty: the member-level form of "no data reaches a
    /// member while the array is marked clean", seen where a crash would see
    /// it rather than through the gate's own state.
    #[derive(Debug)]
    struct Watched {
        inner: MemVolume,
        data_writes: AtomicU64,
        on_clean: AtomicU64,
    }

    impl Watched {
        fn check(&self, offset: u64) {
            let Ok(Some(sb)) = Superblock::read_from(&self.inner) else {
                return; // Before `create` wrote one.
            };
            if offset >= sb.data_offset * 512 {
                self.data_writes.fetch_add(1, Ordering::Relaxed);
                if sb.resync_offset == u64::MAX {
                    self.on_clean.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    impl Volume for Watched {
        fn name(&self) -> String {
            self.inner.name()
        }
        fn size(&self) -> u64 {
            self.inner.size()
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
            self.inner.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
            self.check(offset);
            self.inner.write_at(buf, offset)
        }
        fn flush(&self) -> Result<()> {
            self.inner.flush()
        }
        fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
            self.check(offset);
            self.inner.write_zeroes(offset, len)
        }
    }

    /// Real time run a thousand times faster: the 200 ms quiet spell is
    /// 200 us, so a few seconds see thousands of clean and dirty marks.
    #[derive(Debug)]
    struct Fast(Instant);

    impl Clock for Fast {
        fn now(&self) -> Duration {
            self.0.elapsed() * 1000
        }
        fn sleep(&self, d: Duration) {
            std::thread::sleep(d / 1000);
        }
    }

    /// Writers (through the gate, and by hand as a repair does) in bursts with
    /// quiet spells between them, while another thread polls as fast as it
    /// can, so that settle's decision to mark clean races writers entering.
    /// A write must never reach a member whose superblock says clean, and the
    /// gate must say active while one is under way. Had settle marked clean
    /// with a write in flight, or had a writer passed the gate while a mark
    /// was being written, a data write would land on a clean superblock.
    #[test]
    fn no_write_reaches_a_member_between_a_clean_mark_and_the_next_dirty_mark() {
        let members: Vec<Arc<Watched>> = (0..4)
            .map(|_| {
                Arc::new(Watched {
                    inner: MemVolume::new(4 << 20),
                    data_writes: AtomicU64::new(0),
                    on_clean: AtomicU64::new(0),
                })
            })
            .collect();
        let spec = CreateSpec {
            level: Level::Raid5,
            layout: Layout::Parity(ParityLayout::LeftSymmetric),
            chunk_bytes: 64 << 10,
            spares: 0,
            name: "race".into(),
            force: false,
            bitmap: false,
            bitmap_chunk: None,
            ppl: false,
        };
        let new = members
            .iter()
            .enumerate()
            .map(|(i, m)| NewMember {
                device: Device {
                    path: format!("mem{i}"),
                    volume: m.clone(),
                },
                zeroed: true,
            })
            .collect();
        let mut asm = create(&spec, new).unwrap();
        assert!(asm.mark_dirty().unwrap(), "a new array is in sync");
        let array = Arc::new(asm.array().unwrap());
        let live = LiveArray::new(asm, array);
        live.set_clock(Arc::new(Fast(Instant::now())));
        live.start_safe_mode(true);
        let gated = live.volume();
        let blocks = live.array().size() / 4096;
        let stop = AtomicBool::new(false);
        let (cleans, dirties) = std::thread::scope(|s| {
            for t in 0..3u64 {
                let (live, gated, stop) = (&live, &gated, &stop);
                s.spawn(move || {
                    let mut x = 0x9e37_79b9_7f4a_7c15 ^ t;
                    let mut next = move || {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x
                    };
                    let buf = vec![t as u8 + 1; 4096];
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..1 + next() % 4 {
                            let at = next() % blocks * 4096;
                            if t == 0 {
                                // As a repair does: the gate by hand.
                                live.begin_write().unwrap();
                                assert_eq!(live.write_mark(), Some(WriteMark::Active));
                                live.array().write_at(&buf, at).unwrap();
                                assert_eq!(live.write_mark(), Some(WriteMark::Active));
                                live.end_write();
                            } else {
                                gated.write_at(&buf, at).unwrap();
                            }
                        }
                        // Quiet spells around the delay (200 us here), so
                        // that settle sometimes fires just as a burst starts.
                        std::thread::sleep(Duration::from_micros(next() % 400));
                    }
                });
            }
            let (live, stop) = (&live, &stop);
            s.spawn(move || {
                let (mut cleans, mut dirties) = (0u32, 0u32);
                let mut was = live.write_mark();
                let end = Instant::now() + Duration::from_secs(2);
                while Instant::now() < end {
                    assert!(live.poll().is_empty());
                    let now = live.write_mark();
                    match (was, now) {
                        (Some(WriteMark::Active), Some(WriteMark::Clean)) => cleans += 1,
                        (Some(WriteMark::Clean), Some(WriteMark::Active)) => dirties += 1,
                        _ => {}
                    }
                    was = now;
                }
                stop.store(true, Ordering::Relaxed);
                (cleans, dirties)
            })
            .join()
            .unwrap()
        });
        let data_writes: u64 = members
            .iter()
            .map(|m| m.data_writes.load(Ordering::Relaxed))
            .sum();
        let on_clean: u64 = members
            .iter()
            .map(|m| m.on_clean.load(Ordering::Relaxed))
            .sum();
        assert_eq!(on_clean, 0, "of {data_writes} data writes to members");
        // The race was run, not just the writes: the array went clean and
        // dirty again many times while they came.
        assert!(
            cleans >= 10 && dirties >= 10,
            "{cleans} clean marks, {dirties} dirty"
        );
        assert!(data_writes > 1000, "{data_writes}");
    }
}
