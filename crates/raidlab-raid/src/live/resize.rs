//! A change of the component size while the array serves (md's `--grow
//! --size` of a running array: the level's resize, then a resync of the new
//! space from the old size in the background): the change is `grow`'s, made
//! with the requests held; the running array of the new size takes them;
//! the new space is resynced in service, one step at a time under the stripe
//! locks, while clients read and write all of it (a write there before the
//! resync reaches it computes its stripe's parity from data, md's
//! reconstruct-write past `recovery_cp`: the running array is told where
//! the resync is owed from, `Array::set_unsynced_from`).
//!
//! What it decides: what the superblocks say of the owed resync while the
//! array serves. md's rule: `resync_offset` says where the resync is while
//! the array is idle, and 0 while writes are pending (safe mode writes the
//! first when the writes stop, `safe_mode.rs`); the clean stop records where
//! it is; the bitmap's bits of the new space stay set until it is done (the
//! bitmap daemon waits, `super::LiveArray::poll`).
//!
//! A smaller size (md's `raid5_resize` of a running array) is the same
//! swap with nothing to resync, allowed only when the array of the new
//! size still holds all the clients address: they were cut to it first
//! with `--array-size` (`array_size.rs`), which it keeps.
//!
//! It must never decide the size or refuse one itself (`grow` does), nor
//! resync anything but what the superblocks say is owed.

use super::array_size::check_array_size;
use super::{lock, LiveArray, TaskStatus};
use crate::array::Array;
use crate::grow::{SizeChange, SizeRequest};
use crate::recovery::{Progress, RunOptions, ScrubReport};
use raidlab_core::{Error, Result};
use raidlab_md::superblock::MAX_SECTOR;
use std::sync::Arc;

impl LiveArray {
    /// Change the component size while the array serves (`grow --size`):
    /// `grow`'s checks and superblocks with the requests held, the array of
    /// the new size serving from then on (new connections see its size),
    /// then, when the array grew without `assume_clean`, the resync of the
    /// new space here (`opts`: rate, stop), its progress in `detail`.
    /// `array_size` is an `--array-size` given with it (`Some(None)`:
    /// `max`), set with the same requests held once both are checked, so
    /// either both are made or neither. A size whose array would hold less
    /// than the clients address (after that) is refused (`grow`, md's
    /// words); so is a change while a rebuild, a check, a reshape or the
    /// last one's resync runs. A smaller size resyncs nothing: what lies
    /// past the new end stays on the members, as md leaves it.
    pub fn resize(
        self: &Arc<Self>,
        req: SizeRequest,
        assume_clean: bool,
        array_size: Option<Option<u64>>,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(SizeChange, Option<ScrubReport>)> {
        let change = self.change_running(|asm| {
            let holds = asm.geometry.array_bytes();
            let exposed = match array_size {
                Some(Some(b)) => {
                    check_array_size(b, holds)?;
                    b
                }
                Some(None) => holds,
                None => self.serving.exposed().size(holds),
            };
            let c = asm.grow_size_served(req, assume_clean, exposed)?;
            if let Some(cut) = array_size {
                // The requests are held: none is under way past the cut.
                self.serving.exposed().set(cut);
            }
            if c.resync_from.is_some() {
                *lock(&self.resync_owed) = Some(asm.resync_offset());
            }
            // `grow` recorded the array idle (the resync point, or clean);
            // a write that passed safe mode's gate before the requests were
            // held still counts on the dirty mark.
            if !self.marked_clean() {
                asm.commit(|sb| sb.resync_offset = 0)?;
            }
            Ok(c)
        })?;
        let Some(from) = change.resync_from else {
            return Ok((change, None));
        };
        let array = self.array();
        // Until the resync is done, writes to the new space compute parity
        // from data (md's reconstruct-write past `recovery_cp`): its parity
        // is not made right yet. A resync that stops leaves it so.
        array.set_unsynced_from(Some(from));
        *lock(&self.scrub) = Some(TaskStatus::new(
            "resync",
            "array".into(),
            None,
            from,
            change.new_member_bytes,
            lock(&self.clock).now(),
        ));
        let owed = self.resync_owed().unwrap_or(0);
        let mut copy = lock(&self.asm).clone();
        let result = copy.resync_running(
            &array,
            owed,
            &mut |at| self.save_resync_point(&array, at),
            opts,
            &mut |p: Progress| {
                if let Some(s) = lock(&self.scrub).as_mut() {
                    s.advance(p.done, lock(&self.clock).now());
                }
                progress(p)
            },
        );
        let result = result.and_then(|report| {
            let mut asm = lock(&self.asm);
            *lock(&self.resync_owed) = None;
            array.set_unsynced_from(None);
            if self.marked_clean() {
                asm.change_running(&array, |a| a.commit(|sb| sb.resync_offset = MAX_SECTOR))?;
            }
            Ok(report)
        });
        if let Some(s) = lock(&self.scrub).as_mut() {
            s.running = false;
            if let Err(e) = &result {
                s.error = Some(e.to_string());
            }
        }
        Ok((change, Some(result?)))
    }

    /// Where the resync of the new space is owed from (md's `resync_offset`
    /// unit), while one is.
    pub fn resync_owed(&self) -> Option<u64> {
        *lock(&self.resync_owed)
    }

    /// The resync reached `at`: owed from there, and said so in the
    /// superblocks now if they say the array is idle (while writes are
    /// pending they say 0, and safe mode writes the point when they stop).
    fn save_resync_point(&self, array: &Array, at: u64) -> Result<()> {
        let mut asm = lock(&self.asm);
        *lock(&self.resync_owed) = Some(at);
        if self.marked_clean() {
            asm.change_running(array, |a| a.commit(|sb| sb.resync_offset = at))?;
        }
        Ok(())
    }

    /// At a clean stop, once every write is flushed: record what the
    /// running `array` took out and mark the array clean, as
    /// `lifecycle::stop_records`; with a resync of new space owed, the
    /// superblocks say where it resumes instead (md's clean stop mid-resync).
    pub fn stop_records(&self, array: &Array, was_clean: bool) -> Result<Vec<String>> {
        let owed = self.resync_owed();
        let mut asm = lock(&self.asm);
        let failed = crate::lifecycle::stop_records(&mut asm, array, was_clean && owed.is_none())?;
        if let Some(at) = owed {
            asm.commit(|sb| sb.resync_offset = at).map_err(|e| {
                Error::invalid(format!(
                    "cannot record where the resync of the new space resumes (sector {at}): {e}"
                ))
            })?;
        }
        Ok(failed)
    }
}
