//! The background cleaner: the loop that calls [`CachedVolume::clean_tick`]
//! every interval ([`clean_loop`]), and a thread that runs it in real time
//! ([`BackgroundCleaner`]), for a cache served or benchmarked on real devices.
//!
//! The loop is the one every owner runs: the thread here waits on a condition
//! variable so that a stop is prompt; a simulator runs the same loop as a task
//! whose waits are sleeps of its virtual clock ([`run_on_clock`]). This is the
//! only place in the crate with a thread or a wait. The driver decides only
//! when to tick (one tick, then one interval after it ends); how much to clean
//! stays `clean_tick`'s decision, paced by the volume's clock. It must never
//! hold the volume's lock across its wait.

use crate::volume::CachedVolume;
use raidlab_core::{Clock, Error, Result, Volume};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the driver ticks by default: often enough that a rate of a few
/// MB/s is spread in small batches between foreground requests.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(10);

#[derive(Debug, Default)]
struct Shared {
    stop: bool,
    ticks: u64,
    cleaned: u64,
    error: Option<Error>,
}

/// The cleaner's loop: a tick, then `wait(interval, cleaned by that tick)`,
/// again until `wait` returns false (asked to stop). A failed tick ends it
/// with the tick's error.
pub fn clean_loop<C: Volume, O: Volume>(
    volume: &CachedVolume<C, O>,
    interval: Duration,
    mut wait: impl FnMut(Duration, u64) -> bool,
) -> Result<()> {
    loop {
        let cleaned = volume.clean_tick()?;
        if !wait(interval, cleaned) {
            return Ok(());
        }
    }
}

/// [`clean_loop`] with `clock`'s sleep as its wait, until a tick fails: for an
/// owner whose sleeps give control back (a simulator's task on its virtual
/// clock), which ends the cleaner by dropping the task. On a real clock
/// nothing would stop it; use [`BackgroundCleaner`] there.
pub fn run_on_clock<C: Volume, O: Volume>(
    volume: &CachedVolume<C, O>,
    interval: Duration,
    clock: &dyn Clock,
) -> Result<()> {
    clean_loop(volume, interval, |d, _| {
        clock.sleep(d);
        true
    })
}

/// What a stopped driver did.
#[derive(Debug)]
pub struct DriverReport {
    pub ticks: u64,
    pub cleaned_blocks: u64,
    /// The first error a tick returned; the driver stops ticking at it.
    pub error: Option<Error>,
}

/// A running background cleaner; [`BackgroundCleaner::stop`] ends it (and so
/// does dropping it).
#[derive(Debug)]
pub struct BackgroundCleaner {
    shared: Arc<(Mutex<Shared>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl BackgroundCleaner {
    /// Start ticking `volume` every `interval`.
    pub fn start<C, O>(volume: Arc<CachedVolume<C, O>>, interval: Duration) -> BackgroundCleaner
    where
        C: Volume + 'static,
        O: Volume + 'static,
    {
        let shared = Arc::new((Mutex::new(Shared::default()), Condvar::new()));
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("raidlab-cache-cleaner".into())
            .spawn(move || {
                let (m, cv) = &*theirs;
                let r = clean_loop(&volume, interval, |interval, cleaned| {
                    let mut s = m.lock().unwrap_or_else(|p| p.into_inner());
                    s.ticks += 1;
                    s.cleaned += cleaned;
                    cv.notify_all();
                    if s.stop {
                        return false;
                    }
                    let (s, _) = cv
                        .wait_timeout_while(s, interval, |s| !s.stop)
                        .unwrap_or_else(|p| p.into_inner());
                    !s.stop
                });
                if let Err(e) = r {
                    let mut s = m.lock().unwrap_or_else(|p| p.into_inner());
                    s.ticks += 1;
                    s.error = Some(e);
                    cv.notify_all();
                }
            })
            .ok();
        BackgroundCleaner { shared, thread }
    }

    /// How many times the driver has ticked so far: with
    /// [`BackgroundCleaner::wait_ticks`], a wait for ticks that start after
    /// a given moment.
    pub fn ticks(&self) -> u64 {
        let (m, _) = &*self.shared;
        m.lock().unwrap_or_else(|p| p.into_inner()).ticks
    }

    /// Block until the driver has ticked at least `n` times in all (or has
    /// stopped on an error): for owners and tests that need a tick to have
    /// happened, without sleeping.
    pub fn wait_ticks(&self, n: u64) {
        let (m, cv) = &*self.shared;
        let s = m.lock().unwrap_or_else(|p| p.into_inner());
        let _s = cv
            .wait_while(s, |s| {
                s.ticks < n && s.error.is_none() && self.thread.is_some()
            })
            .unwrap_or_else(|p| p.into_inner());
    }

    /// Stop the driver and say what it did.
    pub fn stop(mut self) -> DriverReport {
        self.halt();
        let mut s = self.shared.0.lock().unwrap_or_else(|p| p.into_inner());
        DriverReport {
            ticks: s.ticks,
            cleaned_blocks: s.cleaned,
            error: s.error.take(),
        }
    }

    fn halt(&mut self) {
        {
            let mut s = self.shared.0.lock().unwrap_or_else(|p| p.into_inner());
            s.stop = true;
        }
        self.shared.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for BackgroundCleaner {
    fn drop(&mut self) {
        self.halt();
    }
}
