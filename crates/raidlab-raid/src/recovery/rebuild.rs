//! An offline rebuild: a lost member's contents written onto its new
//! member (or a re-added member's dirty chunks), step by step.
//!
//! The order of a rebuild's steps, their pacing, checkpoints, stop and
//! progress are `crate::long_run`'s driver's, the same one a served or
//! simulated rebuild runs (`Array::drive_recovery`): the offline rebuild
//! gives it a step that writes what its readers produced (`Writer`), and
//! decides only how those contents are produced (`rebuild_step`). Where a member's range is
//! listed in md's bad-block log, a step is planned around it
//! (`BadBlocks::rebuild_around`), offline and live alike. Must never loop
//! over a run's steps itself.
//!
//! An offline rebuild of a parity array does not wait for each step's reads:
//! one reader per source member streams its range ahead (each read a
//! `Plan::read_one` run by the executor), and each step's own plan, built and
//! checked as usual, computes from those buffers; the calling thread runs
//! its write (a mirror's steps overlap the same way). Where every source member is mapped in memory (`Volume::mapped`:
//! files in tmpfs), a speed decision kept on purpose: the step's plan takes
//! its reads from the mappings, several workers taking turns at the steps,
//! and only the write goes through the executor; the streamed reads are the
//! reference it is tested against. The simulator meets neither (its rebuild
//! is the live one, `Array::recovery_step`). A run that neither reads ahead
//! nor maps (`RunOptions::read_ahead` and `use_maps` off: the torture
//! harness) has nothing to overlap, and reads, combines and writes each step
//! on the calling thread.

use super::gate::Gate;
use super::rebuild_step::{
    parity_sources, parity_step, planned_step, read_sources, run_plan, streamed_step,
};
use super::{
    align_down, clock_of, interrupted, run_with, schedule, stopped, Progress, RebuildReport,
    RebuiltMember, RunOptions, StepResult, PAGE, SECTOR,
};
use crate::assemble::{Assembly, MemberState};
use crate::exec::{Executor, Members, UserBuf};
use crate::level::{self, BitmapUnit};
use crate::long_run::{Driven, Stepped, Steps};
use crate::metadata_plan::flush_devices;
use crate::plan::Plan;
use crate::planner::Builders as _;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_layout::Geometry;
use raidlab_md::superblock::feature;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

impl Assembly {
    /// Members being rebuilt or replacing another, as (index into members, slot).
    pub fn rebuilding(&self) -> Vec<(usize, usize)> {
        self.members
            .iter()
            .enumerate()
            .filter(|(_, m)| matches!(m.state, MemberState::Rebuilding | MemberState::Replacing))
            .filter_map(|(i, m)| m.role.map(|r| (i, r)))
            .collect()
    }

    /// Where a rebuild of member `index` resumes, in bytes of its data area:
    /// what its superblock records (md's recovery_offset), within the area.
    /// Offline, in service and in the simulator alike.
    pub fn recovery_resumes_at(&self, index: usize) -> u64 {
        (self.members[index].sb.recovery_offset * SECTOR).min(self.geometry.member_bytes)
    }

    /// Rebuild every member that is being recovered into its slot, resuming at its
    /// recovery offset, then mark it active.
    pub fn rebuild(
        &mut self,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<RebuildReport> {
        let targets = self.rebuilding();
        if targets.is_empty() {
            return Err(Error::invalid(
                "no member is being rebuilt: add a member into a missing slot (raidlab add) or start a replacement (raidlab replace) first",
            ));
        }
        if !self.in_sync() && !opts.force {
            return Err(Error::new(
                ErrorKind::Refused,
                Op::Write,
                if self.check_scrubbable(true).is_ok() {
                    "the array was not stopped cleanly, so parity/mirrors are not known to be consistent and a rebuild now could write wrong data: run `raidlab resync` with the same members first (it resyncs with the redundancy left), then rebuild".to_string()
                } else {
                    format!(
                        "the array was not stopped cleanly and has no redundancy left besides the member being rebuilt, so it cannot be resynced first (role(s) {:?} missing): `raidlab rebuild --force` with the same members rebuilds anyway; blocks of stripes that were being written at the crash may come out wrong (md's --force takes the same risk)",
                        self.missing()
                    )
                },
            ));
        }
        let mut report = RebuildReport {
            rebuilt: Vec::new(),
        };
        let member_total = self.geometry.member_bytes;
        for (index, slot) in targets {
            // The array without the member being rebuilt: every read the rebuild does
            // is an ordinary (possibly degraded) read through the planner.
            let array = self.array()?;
            let target = self.area(index)?;
            let resume_at = self.recovery_resumes_at(index);
            let step = step_for(&self.geometry, opts.step_bytes);
            let resume_at = align_down(&self.geometry, resume_at);
            let ranges = self.recovery_ranges(index, resume_at);
            let to_rebuild: u64 = ranges.iter().map(|(a, b)| b - a).sum();
            let mut run = schedule(&opts, &ranges, step);
            // Progress counts the bytes this run rewrites, after what an
            // earlier run did (a whole rebuild: its position in the member).
            let overall = resume_at + to_rebuild;
            progress(Progress {
                done: resume_at,
                total: overall,
            });
            // Reading (and computing) the next step overlaps writing this one: a
            // rebuild runs at the speed of the slower side, not of both added.
            let geometry = self.geometry;
            // Which builder the family rebuilds with: from parity, or a copy.
            let from_parity = crate::planner::family(&geometry).keeps_rows();
            let quit = AtomicBool::new(false);
            let sources = parity_sources(&array, &geometry, slot);
            let live: Vec<bool> = sources.iter().map(Option::is_some).collect();
            // Source ranges md's bad-block log lists are rebuilt from the others.
            let bad_blocks = self.bad_blocks()?;
            let bad = bad_blocks.as_ref();
            // The executor's members: the array's, and the target after them.
            let mut members: Vec<Option<Arc<dyn Volume>>> =
                (0..geometry.raid_disks).map(|r| array.member(r)).collect();
            let target_at = members.len();
            members.push(Some(target));
            let exec = Arc::clone(self.executor());
            let exec = exec.as_ref();
            // Read here: the switch is the calling thread's, the combiner's is off.
            let wrong_member = planted!(RebuildFirstChunkFromWrongMember);
            // Every step of the run, over all its ranges, for the readers
            // that run ahead of the writer.
            let all_steps = run.steps_left();
            let clock = clock_of(&opts);
            // The writer, stepped by the long-run driver (pacing,
            // checkpoints, stop, progress): each step's contents come from
            // `next` (which is given the step), its write runs here, and its
            // buffer goes back through `back` for a later step.
            let mut write_steps = |next: &mut dyn FnMut(Range<u64>) -> StepResult,
                                   back: &mut dyn FnMut(Vec<u8>)|
             -> Result<()> {
                let mut writer = Writer {
                    asm: &mut *self,
                    exec,
                    members: &members,
                    target_at,
                    index,
                    next,
                    back,
                    progress: &mut *progress,
                    done: resume_at,
                    total: overall,
                };
                match run.drive(&*clock, &|| stopped(&opts), &mut writer)? {
                    Driven::Stopped(pos) => {
                        flush_devices(exec, &members, [target_at])?;
                        self.checkpoint_recovery(index, pos)?;
                        Err(interrupted("rebuild", pos))
                    }
                    _ => Ok(()),
                }
            };
            if !opts.read_ahead && !opts.use_maps {
                // Nothing to overlap: no step is read before the writer
                // asks for it, so readers on threads of their own would
                // only wait for each other. Each step is read, combined
                // and written here, the member requests the same as the
                // threads' and in the same order per member (the
                // torture harness: a thread started per source member
                // and a wake-up per step were about 5% of its run).
                let kept = std::cell::Cell::new(Vec::new());
                let mut reads: Vec<Vec<u8>> = vec![Vec::new(); sources.len()];
                let members = &members;
                write_steps(
                    &mut |step| {
                        let (at, n) = (step.start, step.end - step.start);
                        let mut out = kept.take();
                        out.resize(n as usize, 0);
                        let r = if from_parity {
                            let got = read_sources(exec, members, &sources, at, n, &mut reads);
                            let r = parity_step(
                                exec,
                                members,
                                bad,
                                &geometry,
                                &live,
                                slot,
                                (at, n),
                                &got,
                                wrong_member,
                                &mut out,
                            );
                            for (b, kept) in got.into_iter().zip(reads.iter_mut()) {
                                if let Some(Ok(b)) = b {
                                    *kept = b;
                                }
                            }
                            r
                        } else {
                            planned_step(
                                exec, members, bad, &geometry, &live, slot, at, n, &mut out,
                            )
                        };
                        r.map(|write| (at, out, write))
                    },
                    &mut |data| kept.set(data),
                )?;
            } else {
                let gate = Gate::new(opts.read_ahead);
                let gate = &gate;
                let outcome: Result<()> = std::thread::scope(|s| {
                    // Each step's contents go to the writer with the write its plan ends in.
                    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<(u64, Vec<u8>, Plan)>>(1);
                    // Written buffers come back to the reader: no step allocates.
                    let (free_tx, free_rx) = std::sync::mpsc::channel::<Vec<u8>>();
                    let (quit, members, live, all_steps) = (&quit, &members, &live, &all_steps);
                    // Members mapped into memory (page-cached files): combine straight
                    // from the mappings, without copying every source byte through
                    // `read_at` first. The read path below is the reference it is
                    // tested against.
                    let maps: Option<Vec<Option<raidlab_core::Mapped>>> = sources
                        .iter()
                        .map(|src| match src {
                            None => Some(None),
                            Some(v) => v.mapped().map(Some),
                        })
                        .collect();
                    let maps = maps.filter(|_| from_parity && opts.use_maps);
                    // The writer's ends of the channels, one lane per producer taking
                    // turns at the steps (only the mapped path has more than one).
                    let mut lanes = Vec::new();
                    if let Some(maps) = maps {
                        // Computing from the mappings (page faults and the XOR) costs
                        // more than writing the result, so several workers take turns
                        // at the steps and every CPU computes while the writer writes.
                        let workers = std::thread::available_parallelism()
                            .map_or(1, |n| n.get())
                            .min(MAPPED_WORKERS_MAX);
                        let mut ends = vec![(tx, free_rx)];
                        for _ in 1..workers {
                            let (t, r) = std::sync::mpsc::sync_channel(1);
                            let (ft, fr) = std::sync::mpsc::channel();
                            lanes.push((r, ft));
                            ends.push((t, fr));
                        }
                        for (w, (tx, free_rx)) in ends.into_iter().enumerate() {
                            let maps = maps.clone();
                            s.spawn(move || {
                                let mine = all_steps.clone().skip(w).step_by(workers);
                                for s in mine {
                                    gate.wait(s.start);
                                    if quit.load(Ordering::Relaxed) {
                                        break;
                                    }
                                    let (at, n) = (s.start, s.end - s.start);
                                    let mut out = free_rx.try_recv().unwrap_or_default();
                                    out.resize(n as usize, 0);
                                    let views: Vec<Option<&[u8]>> = maps
                                        .iter()
                                        .map(|m| {
                                            m.as_ref().map(|m| {
                                                &m.as_slice()[at as usize..(at + n) as usize]
                                            })
                                        })
                                        .collect();
                                    let r = streamed_step(
                                        bad, &geometry, live, slot, at, n, &views, &mut out,
                                    )
                                    .map(|write| (at, out, write));
                                    // Done with these pages: unmapping them here, in
                                    // turn, spares one thread unmapping every member
                                    // at the end while the others wait.
                                    for m in maps.iter().flatten() {
                                        m.release(at, n);
                                    }
                                    let failed = r.is_err();
                                    if tx.send(r).is_err() || failed {
                                        break;
                                    }
                                }
                            });
                        }
                    } else if from_parity {
                        // One reader per source member streams its range ahead (no
                        // thread started per step: that cost more than the XOR), and
                        // this thread combines each step's buffers.
                        let mut feeds = Vec::new();
                        for (role, src) in sources.iter().enumerate() {
                            if src.is_none() {
                                feeds.push(None);
                                continue;
                            }
                            let (ftx, frx) = std::sync::mpsc::sync_channel::<Result<Vec<u8>>>(2);
                            let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u8>>();
                            s.spawn(move || {
                                for s in all_steps.clone() {
                                    gate.wait(s.start);
                                    if quit.load(Ordering::Relaxed) {
                                        break;
                                    }
                                    let (at, n) = (s.start, s.end - s.start);
                                    let mut buf = back_rx.try_recv().unwrap_or_default();
                                    buf.resize(n as usize, 0);
                                    let read = Plan::read_one(role, at, n as usize);
                                    let r = run_plan(exec, &read, members, &mut buf).map(|()| buf);
                                    // A range that fails to read is read around
                                    // by the combiner; the next ones are still
                                    // this reader's.
                                    if ftx.send(r).is_err() {
                                        break;
                                    }
                                }
                            });
                            feeds.push(Some((frx, back_tx)));
                        }
                        s.spawn(move || {
                            for s in all_steps.clone() {
                                gate.wait(s.start);
                                if quit.load(Ordering::Relaxed) {
                                    break;
                                }
                                let (at, n) = (s.start, s.end - s.start);
                                // Every feed's part of this step is taken, whatever
                                // one of them says, so that the next step's parts
                                // line up.
                                let got: Vec<Option<Result<Vec<u8>>>> = feeds
                                    .iter()
                                    .map(|f| {
                                        f.as_ref().map(|(rx, _)| {
                                            rx.recv().unwrap_or_else(|_| {
                                                Err(Error::new(
                                                    ErrorKind::Io,
                                                    Op::Read,
                                                    "internal: a rebuild reader stopped",
                                                ))
                                            })
                                        })
                                    })
                                    .collect();
                                let mut out = free_rx.try_recv().unwrap_or_default();
                                out.resize(n as usize, 0);
                                let r = parity_step(
                                    exec,
                                    members,
                                    bad,
                                    &geometry,
                                    live,
                                    slot,
                                    (at, n),
                                    &got,
                                    wrong_member,
                                    &mut out,
                                );
                                for (b, f) in got.into_iter().zip(&feeds) {
                                    if let (Some(Ok(b)), Some((_, back))) = (b, f) {
                                        back.send(b).ok();
                                    }
                                }
                                let r = r.map(|write| (at, out, write));
                                let failed = r.is_err();
                                if tx.send(r).is_err() || failed {
                                    break;
                                }
                            }
                        });
                    } else {
                        // Mirrors: each step's plan up to its write runs here,
                        // and its write on the writer's side, so reading the next
                        // step overlaps writing this one.
                        s.spawn(move || {
                            for s in all_steps.clone() {
                                gate.wait(s.start);
                                if quit.load(Ordering::Relaxed) {
                                    break;
                                }
                                let (at, n) = (s.start, s.end - s.start);
                                let mut buf = free_rx.try_recv().unwrap_or_default();
                                buf.resize(n as usize, 0);
                                let r = planned_step(
                                    exec, members, bad, &geometry, live, slot, at, n, &mut buf,
                                )
                                .map(|write| (at, buf, write));
                                let failed = r.is_err();
                                if tx.send(r).is_err() || failed {
                                    break;
                                }
                            }
                        });
                    }
                    lanes.insert(0, (rx, free_tx));
                    // The lane of the step in hand, for its buffer's way back.
                    let (turn, lane) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
                    let result = write_steps(
                        &mut |step| {
                            lane.set(turn.get() % lanes.len());
                            turn.set(turn.get() + 1);
                            gate.open_step(step.start);
                            lanes[lane.get()].0.recv().map_err(|_| {
                                Error::new(
                                    ErrorKind::Io,
                                    Op::Read,
                                    "internal: rebuild reader stopped",
                                )
                            })?
                        },
                        &mut |data| {
                            lanes[lane.get()].1.send(data).ok();
                        },
                    );
                    quit.store(true, Ordering::Relaxed);
                    gate.open_all();
                    drop(lanes);
                    result
                });
                outcome?;
            }
            flush_devices(exec, &members, [target_at])?;
            let bitmap_based = self.members[index].sb.feature_map & feature::RECOVERY_BITMAP != 0;
            if bitmap_based {
                for &(a, b) in &ranges {
                    self.clear_bad_blocks(index, a, b - a)?;
                }
            }
            self.complete_recovery(index, slot)?;
            report.rebuilt.push(RebuiltMember {
                device: self.members[index].device.path.clone(),
                role: slot,
                resumed_from: resume_at,
                bytes: to_rebuild,
                member_bytes: member_total,
                bitmap_based,
            });
        }
        // Nothing lacks a write the bits mark any more: clear them, as md does
        // once a recovery leaves the array complete and in sync (a later
        // re-add or resync would redo their chunks otherwise). Offline only:
        // nothing is in flight. A served array's bits are cleared at its
        // clean stop.
        if self.clear_bitmap_if_complete(self.in_sync(), self.events + 1) {
            self.commit(|_| {})?;
        }
        Ok(report)
    }

    /// Member `index` now holds everything of `slot` (its data flushed): record
    /// it active in that slot; a member it replaced leaves as faulty.
    pub fn complete_recovery(&mut self, index: usize, slot: usize) -> Result<()> {
        let dev_number = self.members[index].sb.dev_number;
        let bitmap_based = self.members[index].sb.feature_map & feature::RECOVERY_BITMAP != 0;
        {
            let m = &mut self.members[index];
            m.sb.feature_map &=
                !(feature::RECOVERY_OFFSET | feature::RECOVERY_BITMAP | feature::REPLACEMENT);
            m.sb.recovery_offset = 0;
            m.state = MemberState::Active;
        }
        if let Some(old) = self.slots[slot].filter(|&o| o != index) {
            let old_dev = self.members[old].sb.dev_number;
            self.members[old].state = MemberState::Faulty;
            self.set_role(old_dev, raidlab_md::ROLE_FAULTY);
        }
        self.slots[slot] = Some(index);
        self.set_role(dev_number, slot as u16);
        if !bitmap_based {
            // Every byte of the data area is written now: md forgets listed
            // sectors. (A bitmap-based rebuild wrote only its ranges, and
            // cleared those as it finished them.)
            self.clear_bad_blocks(index, 0, self.geometry.member_bytes)?;
        }
        self.commit(|_| {})
    }

    /// Record in member `index`'s superblock that it is rebuilt up to `pos`
    /// bytes of its data area (md's recovery_offset), for a resume.
    pub fn checkpoint_recovery(&mut self, index: usize, pos: u64) -> Result<()> {
        let exec = Arc::clone(self.executor());
        let m = &mut self.members[index];
        m.sb.recovery_offset = pos / SECTOR;
        let (at, bytes) =
            m.sb.placed(m.device.volume.size())
                .map_err(|e| e.on_device(m.device.path.clone()))?;
        let mut writes = crate::metadata_plan::DeviceWrites::default();
        writes.push(0, at, &bytes);
        writes.run(exec.as_ref(), &[Some(Arc::clone(&m.device.volume))])
    }
}

impl Assembly {
    /// The byte ranges `[start, end)` of member `index`'s data area a rebuild
    /// from `from` rewrites, in order. A whole rebuild rewrites everything
    /// from there. A re-added member (md's bitmap-based recovery: its
    /// superblock carries RECOVERY_BITMAP) rewrites only the chunks the
    /// write-intent bitmap marks dirty: the bits stay set while a role lacks
    /// a member in sync, so every write it missed is among them, and the
    /// rest of its data area is as the others have it. Each range is widened
    /// to whole rebuild units (a RAID chunk, at least a page) so its steps
    /// are the ones a whole rebuild takes.
    fn recovery_ranges(&self, index: usize, from: u64) -> Vec<(u64, u64)> {
        let total = self.geometry.member_bytes;
        let whole = vec![(from, total)]
            .into_iter()
            .filter(|(a, b)| a < b)
            .collect();
        let bitmap_based = self.members[index].sb.feature_map & feature::RECOVERY_BITMAP != 0;
        let Some(bm) = self.bitmap.as_ref().filter(|_| bitmap_based) else {
            return whole;
        };
        if level::of(&self.geometry).bitmap != BitmapUnit::MemberSectors {
            return whole;
        }
        let unit = self.geometry.chunk_bytes.max(PAGE as u64);
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for (sector, len) in bm.dirty_ranges() {
            let a = (sector * SECTOR / unit * unit).max(from);
            let b = ((sector + len) * SECTOR).div_ceil(unit) * unit;
            let b = b.min(total);
            if a >= b {
                continue;
            }
            match ranges.last_mut() {
                Some(last) if last.1 >= a => last.1 = last.1.max(b),
                _ => ranges.push((a, b)),
            }
        }
        ranges
    }
}

/// The offline rebuild's writer, as the long-run driver steps it: each
/// step's contents and write come from `next`, the write runs here (the
/// target is `members[target_at]`), and the buffer goes back through `back`
/// for a later step. A checkpoint flushes the target before its superblock
/// records the position; progress counts the bytes this run rewrote after
/// what an earlier run did.
struct Writer<'a> {
    asm: &'a mut Assembly,
    exec: &'a dyn Executor,
    members: &'a Members,
    target_at: usize,
    index: usize,
    next: &'a mut dyn FnMut(Range<u64>) -> StepResult,
    back: &'a mut dyn FnMut(Vec<u8>),
    progress: &'a mut dyn FnMut(Progress),
    done: u64,
    total: u64,
}

impl Steps for Writer<'_> {
    fn step(&mut self, step: Range<u64>) -> Result<Stepped> {
        let (at, data, write) = (self.next)(step.clone())?;
        debug_assert_eq!(at..at + data.len() as u64, step);
        let n = data.len() as u64;
        run_with(self.exec, &write, self.members, UserBuf::Write(&data))?;
        (self.back)(data);
        self.done += n;
        Ok(Stepped {
            end: at + n,
            work: n,
        })
    }

    fn checkpoint(&mut self, pos: u64) -> Result<()> {
        flush_devices(self.exec, self.members, [self.target_at])?;
        self.asm.checkpoint_recovery(self.index, pos)
    }

    fn progress(&mut self, _end: u64) {
        (self.progress)(Progress {
            done: self.done,
            total: self.total,
        })
    }
}

/// At most this many workers compute a mapped rebuild's steps: past it, a
/// rebuild would take CPUs from the array's own users for little gain (the
/// writer, one thread, bounds it).
const MAPPED_WORKERS_MAX: usize = 4;

/// A step that is a whole number of chunks (and of pages).
fn step_for(geo: &Geometry, want: u64) -> u64 {
    let unit = geo.chunk_bytes.max(PAGE as u64);
    (want / unit).max(1) * unit
}
