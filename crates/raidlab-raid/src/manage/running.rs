//! A running array's membership as the superblocks record it: a change of
//! the superblocks made while the array runs (written with its bitmap as it
//! is now), and the members the running array took out recorded as faulty,
//! a hot spare stepping into each slot it can.
//!
//! What it decides: what is recorded and in which order when the running
//! array and the superblocks disagree. It must never take a member out of
//! the running array itself except one whose superblock cannot be written
//! (md's rule), nor move data.

use super::*;

impl Assembly {
    /// Change the superblocks of a running `array`'s members: they are
    /// written with the array's bitmap (its current dirty bits, never an
    /// older copy), whose writes wait meanwhile; the array's bitmap then
    /// carries the new event count, and the new size when the change
    /// resized the bitmap.
    pub fn change_running<T>(
        &mut self,
        array: &crate::array::Array,
        f: impl FnOnce(&mut Assembly) -> Result<T>,
    ) -> Result<T> {
        let mut f = Some(f);
        let held = array.with_bitmap_held(|bm| {
            self.bitmap = Some(bm.clone());
            let r = (f.take().expect("called once"))(self);
            if let Some(b) = &self.bitmap {
                bm.sb.events = b.sb.events;
                // A change that resized the bitmap (a RAID 10 shrink's end)
                // wrote the resized one: the running copy takes it, or its
                // next write would put the old size back on the members.
                if (b.sb.sync_size, b.sb.chunksize) != (bm.sb.sync_size, bm.sb.chunksize) {
                    *bm = b.clone();
                }
            }
            r
        });
        match held {
            Some(r) => r,
            None => (f.take().expect("called once"))(self),
        }
    }

    /// Record the members the running `array` took out that the superblocks
    /// still call active: faulty now, all with one commit (which writes
    /// every member still marked active, so one at a time would write the
    /// next dead one's superblock and fail on it); a hot spare steps into
    /// each slot it can. Each member's (index, role, outcome): the spare that
    /// took its slot, or why it could not be failed. The outer error is the
    /// commit's. Members recorded before are left alone, and so is a member
    /// being rebuilt into a slot after the running array took the slot's old
    /// member out: that is not the member it took out.
    ///
    /// A member whose superblock cannot be written in that commit (a device
    /// that went away without the array reading or writing it yet) is taken
    /// out of the running array too, when the level can serve without it,
    /// and the commit is made again without it, as md fails a device whose
    /// superblock write fails and writes the others again. Only an error
    /// that names no member in service, or a member the level cannot lose,
    /// is returned, with the assembly as it was.
    pub fn record_taken_out(&mut self, array: &crate::array::Array) -> Result<Vec<TakenOut>> {
        self.commit_running(&[array], |asm| {
            let taken: Vec<(usize, usize)> = array
                .failed_members()
                .into_iter()
                .filter_map(|role| {
                    // A shrink's leaving member has no slot (past the new
                    // count) but is active in the old geometry.
                    let i = asm.slots.get(role).copied().flatten().or_else(|| {
                        asm.members
                            .iter()
                            .position(|m| m.role == Some(role) && role >= asm.slots.len())
                    })?;
                    (asm.members[i].state == MemberState::Active).then_some((i, role))
                })
                .collect();
            if taken.is_empty() {
                return Ok(Vec::new());
            }
            let indices: Vec<usize> = taken.iter().map(|t| t.0).collect();
            let (members, slots) = (asm.members.clone(), asm.slots.clone());
            match asm.change_running(array, |a| a.fail_many_with(&indices, true)) {
                Ok(outcomes) => Ok(Self::taken_out(taken, outcomes)),
                Err(e) => {
                    // fail_many changed members and slots before its commit
                    // failed: the superblocks on disk still say so.
                    asm.members = members;
                    asm.slots = slots;
                    Err(e)
                }
            }
        })
    }

    /// One change of the superblocks of running arrays, as md's
    /// `md_update_sb` makes it: `attempt` makes the change and commits it;
    /// when the commit fails on a member in service (a device that went
    /// away without a request to it failing yet), that member is taken out
    /// of every one of `arrays` whose geometry holds its role, and `attempt`
    /// runs again (it then finds the member among the arrays' failed ones).
    /// The commit's error stands when it names no member in service, one
    /// already taken out for it, or one a level cannot lose. `arrays` are
    /// one running array, or the two sides of a served reshape.
    pub(crate) fn commit_running<T>(
        &mut self,
        arrays: &[&crate::array::Array],
        mut attempt: impl FnMut(&mut Assembly) -> Result<T>,
    ) -> Result<T> {
        let mut tried: Vec<usize> = Vec::new();
        loop {
            let e = match attempt(self) {
                Ok(t) => return Ok(t),
                Err(e) => e,
            };
            let Some(role) = self
                .member_of_error(&e)
                .filter(|&i| self.members[i].state == MemberState::Active)
                .and_then(|i| self.members[i].role)
                .filter(|role| !tried.contains(role))
            else {
                return Err(e);
            };
            tried.push(role);
            let mut took = false;
            for a in arrays {
                if role < a.geometry().raid_disks {
                    if a.fail_member(role).is_err() {
                        return Err(e);
                    }
                    took = true;
                }
            }
            if !took {
                return Err(e);
            }
        }
    }

    fn taken_out(
        taken: Vec<(usize, usize)>,
        outcomes: Vec<Result<Option<usize>>>,
    ) -> Vec<TakenOut> {
        taken
            .into_iter()
            .zip(outcomes)
            .map(|((index, role), outcome)| TakenOut {
                index,
                role,
                outcome,
            })
            .collect()
    }

    /// Record what a running array saw: read errors it corrected (md's
    /// cnt_corrected_read, written with the next superblock update) and members it
    /// took out, which become faulty here (a hot spare steps in). Returns the
    /// paths of the members marked faulty.
    pub fn absorb(&mut self, array: &crate::array::Array) -> Result<Vec<String>> {
        for (role, n) in array.corrected_reads().into_iter().enumerate() {
            if let Some(i) = self.slots.get(role).copied().flatten() {
                let sb = &mut self.members[i].sb;
                sb.cnt_corrected_read = sb.cnt_corrected_read.saturating_add(n);
            }
        }
        let mut failed = Vec::new();
        for t in self.record_taken_out(array)? {
            t.outcome?;
            failed.push(self.members[t.index].device.path.clone());
        }
        Ok(failed)
    }
}

/// A member the running array took out, as [`Assembly::record_taken_out`]
/// recorded it.
#[derive(Debug)]
pub struct TakenOut {
    /// Index into the assembly's members.
    pub index: usize,
    pub role: usize,
    /// The hot spare that took its slot, or why it could not be failed.
    pub outcome: Result<Option<usize>>,
}
