//! A reshape while the array serves (md's reshape of a running array):
//! where the clients' requests go before, during and after it, and the walk
//! run in service; and the running array swapped for another after a change
//! of the superblocks that moves no data (`LiveArray::change_running`).
//!
//! What it decides: the order of the switches. Before the walk, requests in
//! flight on the running array finish and its stripe cache is written out;
//! then every request goes through the reshape's gate to the geometry that
//! holds its bytes (`grow::ReshapingVolume`). At the end the superblocks say
//! the new geometry, the array of the new geometry is started as a start
//! would start it (stripe cache, failure recording) and takes the requests.
//! A walk that stops (the server stops, a member fails) leaves the requests
//! on the gate: the array serves mid-reshape, and the next start resumes the
//! walk.
//!
//! It must never move data or decide the reshape's rules itself (the walk
//! and the checks are `grow`'s) and never let a request reach two running
//! arrays of one geometry at once.

use super::array_size::Exposed;
use super::{lock, LiveArray, TaskStatus};
use crate::array::Array;
use crate::assemble::Assembly;
use crate::grow::{BackupFile, ReshapeReport, ReshapingVolume, ServedWalk};
use crate::recovery::{Progress, RunOptions};
use raidlab_core::{Error, Op, Result, Volume};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

/// What the clients' requests reach. A request holds the route for its
/// whole length, so a switch waits for the requests under way.
pub(super) struct Serving {
    route: RwLock<Route>,
    /// The reshape's sides, apart from the route: asked (failure recording)
    /// from inside a request and while a switch holds the route.
    sides: Mutex<Option<(Arc<Array>, Arc<Array>)>>,
    /// What the clients may address of it (`--array-size`,
    /// `array_size.rs`): kept across every switch of the route.
    exposed: Exposed,
}

enum Route {
    Array(Arc<Array>),
    Reshaping(Arc<ReshapingVolume>),
}

impl Serving {
    pub(super) fn new(array: Arc<Array>) -> Serving {
        Serving {
            route: RwLock::new(Route::Array(array)),
            sides: Mutex::new(None),
            exposed: Exposed::new(),
        }
    }

    pub(super) fn exposed(&self) -> &Exposed {
        &self.exposed
    }

    /// What takes the requests holds (before any `--array-size` cut).
    pub(super) fn holds(&self) -> u64 {
        self.with(|v| v.size())
    }

    /// Run `f` with the requests held (those under way finished, the next
    /// ones waiting), given what takes them holds and the cut.
    pub(super) fn holding<T>(&self, f: impl FnOnce(u64, &Exposed) -> T) -> T {
        let route = self.route.write().unwrap_or_else(|p| p.into_inner());
        f(route.volume().size(), &self.exposed)
    }

    fn read(&self) -> RwLockReadGuard<'_, Route> {
        self.route.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The two geometries' running arrays while a reshape serves.
    pub(super) fn sides(&self) -> Option<(Arc<Array>, Arc<Array>)> {
        lock(&self.sides).clone()
    }

    /// Run `f` on what takes requests now.
    fn with<T>(&self, f: impl FnOnce(&dyn Volume) -> T) -> T {
        f(self.read().volume())
    }
}

impl Route {
    /// What takes the requests on this route.
    fn volume(&self) -> &dyn Volume {
        match self {
            Route::Array(a) => a.as_ref(),
            Route::Reshaping(v) => v.as_ref(),
        }
    }
}

impl Volume for Serving {
    fn name(&self) -> String {
        self.with(|v| v.name())
    }
    fn size(&self) -> u64 {
        self.exposed.size(self.with(|v| v.size()))
    }
    fn block_size(&self) -> u32 {
        self.with(|v| v.block_size())
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.exposed
            .check(|| self.name(), Op::Read, offset, buf.len() as u64)?;
        self.with(|v| v.read_at(buf, offset))
    }
    fn read_stored(
        &self,
        offset: u64,
        len: u64,
        sink: &mut raidlab_core::StoredSink<'_>,
    ) -> Result<bool> {
        self.exposed.check(|| self.name(), Op::Read, offset, len)?;
        self.with(|v| v.read_stored(offset, len, sink))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.exposed
            .check(|| self.name(), Op::Write, offset, buf.len() as u64)?;
        self.with(|v| v.write_at(buf, offset))
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.exposed
            .check(|| self.name(), Op::Write, offset, buf.len() as u64)?;
        self.with(|v| v.write_at_fua(buf, offset))
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.exposed.check(|| self.name(), Op::Write, offset, len)?;
        self.with(|v| v.write_zeroes(offset, len))
    }
    fn flush(&self) -> Result<()> {
        self.with(|v| v.flush())
    }
    fn preferred_io_size(&self) -> Option<u64> {
        self.with(|v| v.preferred_io_size())
    }
    fn optimal_io_size(&self) -> Option<u64> {
        self.with(|v| v.optimal_io_size())
    }
    fn is_writable(&self) -> bool {
        self.with(|v| v.is_writable())
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.exposed
            .check(|| self.name(), Op::Discard, offset, len)?;
        self.with(|v| v.discard(offset, len))
    }
    fn discard_zeroes(&self) -> bool {
        self.with(|v| v.discard_zeroes())
    }
}

impl LiveArray {
    /// What the clients' requests reach (the safe-mode gate's volume sits
    /// over it).
    pub(super) fn serving(&self) -> &dyn Volume {
        &self.serving
    }

    /// The running arrays requests reach: the array, or a reshape's two
    /// sides.
    pub(super) fn in_service(&self) -> Vec<Arc<Array>> {
        match self.serving.sides() {
            Some((old, new)) => vec![old, new],
            None => vec![self.array()],
        }
    }

    /// The roles the running arrays have taken out (either side's, during
    /// a reshape).
    pub(super) fn taken_out(&self) -> Vec<usize> {
        let mut roles: Vec<usize> = self
            .in_service()
            .iter()
            .flat_map(|a| a.failed_members())
            .collect();
        roles.sort_unstable();
        roles.dedup();
        roles
    }

    /// At a stop: wait for a reshape walking in service to see the stop
    /// (it checkpoints where it is), then make what either geometry took
    /// durable.
    pub(super) fn stop_reshape(&self) {
        while self.reshaping() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if self.serving.sides().is_some() {
            if let Err(e) = self.serving.flush() {
                lock(&self.said).push(format!(
                    "the final flush of the array mid-reshape failed: {e}"
                ));
            }
        }
    }

    /// Whether a reshape is walking in service.
    pub fn reshaping(&self) -> bool {
        lock(&self.reshape).as_ref().is_some_and(|t| t.running)
    }

    /// Refuse a change of membership or a scrub while a reshape is under
    /// way in service (md refuses them with EBUSY).
    pub(super) fn check_not_reshaping(&self, what: &str) -> Result<()> {
        if self.serving.sides().is_some() {
            return Err(Error::invalid(format!(
                "the array is being reshaped: {what} waits until the reshape is done (`raidlab detail` shows its progress); a reshape stopped before its end resumes when the server starts again"
            )));
        }
        Ok(())
    }

    /// Refuse `what` (the verb the refusal names) while a rebuild or a check
    /// or repair runs: md changes an array's shape only when no long run
    /// would have to start over.
    pub(super) fn check_quiet(&self, what: &str) -> Result<()> {
        if self.array().recovery().is_some() {
            return Err(Error::invalid(format!(
                "a rebuild is running: {what} after it finishes (`raidlab rebuild` waits for it)"
            )));
        }
        if lock(&self.scrub).as_ref().is_some_and(|s| s.running) {
            return Err(Error::invalid(format!(
                "a check or repair is running: {what} after it finishes"
            )));
        }
        Ok(())
    }

    /// Reshape the array while it serves: `start` records the reshape in the
    /// superblocks (the same checks and commit as offline: `grow`'s; or
    /// nothing, to resume the one they record), then the walk runs here to
    /// its end (`opts`: rate, stop) while clients read and write through
    /// its gate, and the new geometry takes the requests.
    pub fn reshape(
        self: &Arc<Self>,
        start: impl FnOnce(&mut Assembly) -> Result<()>,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ReshapeReport> {
        self.reshape_with_backup(start, None, opts, progress)
    }

    /// [`LiveArray::reshape`] of a metadata 0.90 restripe over the same
    /// members or onto fewer members through mdadm's backup file (`file`,
    /// made by `start` when it records the reshape, or the one a stopped
    /// reshape was started with): each window closed to the clients while
    /// it is saved and moved (`grow::ServedWalk`).
    pub fn reshape_with_backup(
        self: &Arc<Self>,
        start: impl FnOnce(&mut Assembly) -> Result<()>,
        file: Option<&BackupFile>,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ReshapeReport> {
        let walk = self.reshape_begin(start, file)?;
        self.reshape_walked(walk, opts, progress)
    }

    /// Resume, in the background, the reshape the superblocks record (an
    /// array started mid-reshape, as md resumes it at its start): the
    /// requests go through its gate when this returns. `file`: a 0.90
    /// restripe's backup file, already put back
    /// ([`Assembly::reshape_put_back`]), through which the walk carries on.
    pub fn resume_reshape(
        self: &Arc<Self>,
        opts: RunOptions,
        file: Option<&BackupFile>,
    ) -> Result<()> {
        let walk = self.reshape_begin(|_| Ok(()), file)?;
        let live = self.clone();
        std::thread::Builder::new()
            .name("reshape".into())
            .spawn(move || {
                let said = match live.reshape_walked(walk, opts, &mut |_| {}) {
                    Ok(r) => format!(
                        "reshape done: the array is {} bytes (was {})",
                        r.new_array_bytes, r.old_array_bytes
                    ),
                    Err(e) => format!("reshape stopped: {e}"),
                };
                lock(&live.said).push(said);
            })
            .map_err(|e| Error::invalid(format!("cannot start the reshape's thread: {e}")))?;
        Ok(())
    }

    /// Check, record (`start`) and prepare the walk, and send the requests
    /// through its gate.
    fn reshape_begin(
        self: &Arc<Self>,
        start: impl FnOnce(&mut Assembly) -> Result<()>,
        file: Option<&BackupFile>,
    ) -> Result<ServedWalk> {
        self.check_quiet("reshape")?;
        let mut st = lock(&self.reshape);
        if st.as_ref().is_some_and(|t| t.running) {
            return Err(Error::invalid("a reshape is running already"));
        }
        // A reshape started here: the requests under way on the running
        // array finish first and its held stripes reach the members, so
        // the start sees the array consistent (its dirty mark only the one
        // it carries while writes are recent); from the switch on, the
        // sides (two other arrays over the same members) take every request.
        let fresh = self.serving.sides().is_none();
        let mut route = fresh.then(|| {
            self.serving
                .route
                .write()
                .unwrap_or_else(|p| p.into_inner())
        });
        let walk = {
            let running = self.array();
            if fresh {
                crate::lifecycle::stop_writes(&running)?;
            }
            let mut asm = lock(&self.asm);
            // Whether the copies agree: a dirty mark of safe mode's says
            // they do; one a crash left (a resumed reshape started
            // unclean) says they may not, and the sides then read first
            // copies only.
            let ours = self.dirty_mark_is_ours();
            if fresh {
                asm.in_service(ours, |asm| asm.change_running(&running, start))?;
            }
            let walk = match file {
                Some(f) => asm.reshape_served_with_backup(ours, f)?,
                None => asm.reshape_served(ours)?,
            };
            // The running array stays this one's (safe mode, failure
            // recording and md's bitmap daemon reach the members through
            // it): it keeps the sides' bitmap from here on.
            walk.share_bitmap_with(&running);
            walk
        };
        let (old, new) = walk.sides();
        if let Some(route) = route.as_deref_mut() {
            *route = Route::Reshaping(Arc::new(walk.volume(self.array().name())));
            *lock(&self.serving.sides) = Some((old, new));
        }
        drop(route);
        // Counted as the walk counts: from the new geometry's end going
        // backwards.
        let (done, total) = walk.progress_now();
        *st = Some(TaskStatus::new(
            "reshape",
            "array".into(),
            None,
            done,
            total,
            lock(&self.clock).now(),
        ));
        Ok(walk)
    }

    /// Walk to the end, then serve the new geometry.
    fn reshape_walked(
        self: &Arc<Self>,
        mut walk: ServedWalk,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ReshapeReport> {
        let walked = walk.run_lending(
            &opts,
            &|| self.stop.load(std::sync::atomic::Ordering::Acquire),
            &mut |p: Progress| {
                if let Some(s) = lock(&self.reshape).as_mut() {
                    s.advance(p.done, lock(&self.clock).now());
                }
                progress(p)
            },
            &mut |sides, sectors| ServedWalk::record(&mut lock(&self.asm), sides, sectors),
        );
        // Done: the new geometry in the superblocks, then its array started
        // as a start starts it, taking the requests.
        let result = walked.and_then(|()| {
            let report = walk.end(&mut lock(&self.asm))?;
            self.serve_new_geometry()?;
            Ok(report)
        });
        if let Some(s) = lock(&self.reshape).as_mut() {
            s.running = false;
            if let Err(e) = &result {
                s.error = Some(e.to_string());
            }
        }
        result
    }

    /// After a reshape's end: the array of the geometry the superblocks now
    /// record, started as `lifecycle` starts one for writing, takes the
    /// requests and becomes the running array.
    fn serve_new_geometry(self: &Arc<Self>) -> Result<()> {
        let mut route = self
            .serving
            .route
            .write()
            .unwrap_or_else(|p| p.into_inner());
        if let Route::Reshaping(v) = &*route {
            v.flush()?;
        }
        if let Some((old, _)) = self.serving.sides() {
            // The bits the clients' writes set after the end's commit: the
            // new array starts from the sides' bitmap, not the assembly's
            // older copy, which its first bitmap write would put on the
            // members over them.
            lock(&self.asm).absorb_bitmap(&old);
        }
        let array = self.started_array()?;
        *route = Route::Array(array.clone());
        *lock(&self.serving.sides) = None;
        *self.array.write().unwrap_or_else(|p| p.into_inner()) = array;
        Ok(())
    }

    /// The running array of what the superblocks record now, started for
    /// writing as `lifecycle` starts one (the stripe cache as the running
    /// array had it, failure recording), its bitmap daemon scheduled anew.
    fn started_array(self: &Arc<Self>) -> Result<Arc<Array>> {
        let config = self.array().stripe_cache_stats().0.map(|(c, _)| c);
        let ours = self.dirty_mark_is_ours();
        let array = {
            let mut asm = lock(&self.asm);
            let array = Arc::new(asm.array()?);
            // A reshape resumed after an unclean stop ends with the copies
            // it did not move (those below its last checkpoint then) maybe
            // apart: read first copies, as the sides did, until a resync.
            asm.in_service(ours, |asm| asm.first_copy_unless_consistent(&array));
            array
        };
        if let Some(config) = config {
            array.start_stripe_cache(config, lock(&self.clock).clone())?;
        }
        self.install_recorder(&array);
        *lock(&self.bitmap_daemon) = None;
        Ok(array)
    }

    /// Change what the superblocks record of a served array without moving
    /// data (md's `--grow --bitmap`, a takeover to a level with the same
    /// placement): the requests under way finish and the running array's
    /// held stripes reach the members, `change` commits on the assembly,
    /// and the running array of the result takes the requests. Refused
    /// while a reshape, a rebuild or a check runs.
    pub fn change_running<T>(
        self: &Arc<Self>,
        change: impl FnOnce(&mut Assembly) -> Result<T>,
    ) -> Result<T> {
        self.check_not_reshaping("this change")?;
        self.check_quiet("change the array")?;
        let mut route = self
            .serving
            .route
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let running = self.array();
        crate::lifecycle::stop_writes(&running)?;
        let out = {
            let mut asm = lock(&self.asm);
            let ours = self.dirty_mark_is_ours();
            asm.in_service(ours, |asm| asm.change_running(&running, change))?
        };
        let array = self.started_array()?;
        *route = Route::Array(array.clone());
        *self.array.write().unwrap_or_else(|p| p.into_inner()) = array;
        Ok(out)
    }
}
