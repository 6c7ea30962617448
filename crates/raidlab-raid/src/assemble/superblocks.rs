//! Writing the array's state into its members' superblocks: clean or dirty,
//! roles, events and the bitmap. It must never write outside the superblock and
//! bitmap areas raidlab-md places.

use super::*;

impl Assembly {
    /// Take back the bitmap a running array updated (so the next superblock write
    /// carries its dirty bits).
    pub fn absorb_bitmap(&mut self, array: &Array) {
        if let Some(b) = array.intent_bitmap() {
            self.bitmap = Some(b);
        }
    }

    /// Record in every active member's superblock that writes are in flight (md's
    /// "active" state: resync_offset 0), so a crash before [`Assembly::mark_clean`]
    /// is seen as an unclean stop. Keeps the previous sync state to restore later.
    pub fn mark_dirty(&mut self) -> Result<bool> {
        let was_clean = self.in_sync();
        if !crate::level::of(&self.geometry).resyncs {
            // Nothing to resync without redundancy: md never marks RAID 0 dirty.
            return Ok(was_clean);
        }
        // A member being rebuilt does not receive the writes to come: what it
        // has rebuilt so far can no longer be trusted, so its rebuild starts
        // over (a live rebuild resumes from the offsets read before this).
        if self.has_journal() && self.journal_member().is_some() && was_clean {
            // md keeps a journaled array's superblocks clean while it runs
            // (MD_JOURNAL_CLEAN): after a crash the journal replay, not a resync,
            // makes the stripes consistent.
            if self.partly_rebuilt() {
                self.commit(restart_rebuild)?;
            }
            return Ok(was_clean);
        }
        self.commit(|sb| {
            sb.resync_offset = 0;
            restart_rebuild(sb);
        })?;
        Ok(was_clean)
    }

    /// md's safe mode: a running array whose writes have all completed and
    /// been flushed is recorded clean again (resync_offset back at its end), so
    /// that a crash while it sits idle costs no resync. The next write marks
    /// it dirty first ([`Assembly::mark_dirty`]). Only for an array that was in
    /// sync when it started. Unlike [`Assembly::mark_clean`] the bitmap keeps
    /// its bits (the running array's copy decides when to write them again,
    /// so clearing them here would let a later write skip setting one) and a
    /// journal is not checkpointed (its array's superblocks stay clean anyway).
    pub fn mark_idle(&mut self) -> Result<()> {
        if !crate::level::of(&self.geometry).resyncs
            || (self.has_journal() && self.journal_member().is_some())
        {
            // The same arrays whose dirty mark writes nothing.
            return Ok(());
        }
        self.commit(|sb| sb.resync_offset = u64::MAX)
    }

    /// After a flush: record a clean stop (if the array was in sync before).
    /// With a started journal, it is emptied first (members flushed, the tail
    /// moved past everything logged).
    pub fn mark_clean(&mut self, was_clean: bool) -> Result<()> {
        let journal = self
            .journal_handle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(j) = journal {
            let vols: Vec<Option<Arc<dyn Volume>>> = self
                .slots
                .iter()
                .flatten()
                .map(|&i| Some(self.members[i].device.volume.clone()))
                .collect();
            let exec = &*self.executor;
            j.checkpoint(&|| crate::metadata_plan::flush_all(exec, &vols))?;
        }
        // Everything written has been flushed: no region is dirty any more,
        // unless a role has no member in sync to have received the writes.
        self.clear_bitmap_if_complete(was_clean, self.events + 1);
        self.commit(|sb| {
            if was_clean {
                sb.resync_offset = u64::MAX;
            }
        })
    }

    /// Clear the bitmap's bits once everything written is on every role
    /// (`consistent`: the stripes agree), recording `events` as the event
    /// count the bits were cleared at. While a role has no member in sync
    /// (missing, stale, removed, being rebuilt) md never clears a bit: the
    /// bits set since the member left are exactly what a re-add of it must
    /// resync, and events_cleared stays at or before the moment it left,
    /// which is what lets the re-add judge it recent enough. Returns whether
    /// the bits were cleared.
    pub(crate) fn clear_bitmap_if_complete(&mut self, consistent: bool, events: u64) -> bool {
        let complete = self.missing().is_empty();
        match self.bitmap.as_mut() {
            Some(b) if consistent && complete => {
                b.clear_all();
                b.sb.events_cleared = events;
                true
            }
            _ => false,
        }
    }

    /// Apply an array-wide change to the superblock of every live member (active,
    /// being rebuilt, spare), with the event count raised by one, and write them.
    /// Faulty and stale members are left alone, as md never writes them.
    ///
    /// A commit that fails leaves the assembly as it was: what it meant to
    /// record is not on every member, and a caller that takes the failing
    /// member out and commits again must not find the change half made (a
    /// resync's end recorded as done, a dirty mark read back as the state
    /// before it).
    pub fn commit(&mut self, f: impl Fn(&mut Superblock)) -> Result<()> {
        let before: Vec<Superblock> = self.members.iter().map(|m| m.sb.clone()).collect();
        let bitmap_events = self.bitmap.as_ref().map(|b| b.sb.events);
        // Members taken one event behind are first written level with the
        // rest, at the count they already have in memory. Without that, a
        // cut inside this commit could leave them two behind a device that
        // took the new count (the journal device is written first), and
        // the next assembly would set them aside as out of date.
        let r = match self.lagging.clone() {
            lagging if lagging.is_empty() => Ok(()),
            lagging => self.commit_all(|_| {}, false, Some(&lagging)),
        };
        if r.is_ok() {
            self.lagging.clear();
        }
        let r = r.and_then(|()| self.commit_all(f, true, None));
        if r.is_err() {
            for (m, sb) in self.members.iter_mut().zip(before) {
                m.sb = sb;
            }
            if let (Some(b), Some(e)) = (self.bitmap.as_mut(), bitmap_events) {
                b.sb.events = e;
            }
        }
        r
    }

    /// Write the superblocks of the live members (of those numbered in
    /// `only`, when given) with `f` applied, the count raised by one when
    /// `bump`.
    fn commit_all(
        &mut self,
        f: impl Fn(&mut Superblock),
        bump: bool,
        only: Option<&[u32]>,
    ) -> Result<()> {
        let now = now_secs();
        let events = self.events + u64::from(bump);
        if let Some(b) = self.bitmap.as_mut() {
            // md keeps the bitmap's event count with the superblock's; a bitmap
            // behind it would be taken as stale (full resync).
            b.sb.events = events;
        }
        let journal = self
            .journal_handle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let in_service = self.in_service_090();
        // md writes the role table from the devices it has (super_1_sync;
        // super_90_sync lists a slot no device holds "removed, faulty"): a
        // device listed in a slot but not in the array now (not given, or
        // set aside as out of date) is listed removed. Only then may the
        // assembly take a member one event behind as up to date, as md does
        // ([`super::member_state`]): a device absent at a commit is no longer
        // listed where it was.
        let live: Vec<u32> = self
            .members
            .iter()
            .filter(|m| m.is_live())
            .map(|m| m.sb.dev_number)
            .collect();
        // Every member's superblock (and bitmap) in one plan: the writes
        // together, then the flushes together.
        let mut writes = crate::metadata_plan::DeviceWrites::default();
        let mut table: Vec<Option<Arc<dyn Volume>>> = Vec::new();
        let picked = |m: &super::Member| only.map_or(true, |o| o.contains(&m.sb.dev_number));
        for m in self.members.iter_mut().filter(|m| m.is_live() && picked(m)) {
            m.sb.events = events;
            m.sb.utime = now;
            f(&mut m.sb);
            for (d, r) in m.sb.dev_roles.iter_mut().enumerate() {
                if *r < raidlab_md::ROLE_JOURNAL && !live.contains(&(d as u32)) {
                    *r = raidlab_md::ROLE_SPARE;
                }
            }
            if let Some(t) = m.sb.v0_90.as_mut() {
                t.in_service = Some(in_service.clone());
            }
            if let (MemberState::Journal, Some(j)) = (m.state, &journal) {
                // The running journal owns its superblock's journal_tail; the
                // rest (events, role table) is the assembly's.
                m.sb = j
                    .write_superblock(m.sb.clone())
                    .map_err(|e| e.on_device(m.device.path.clone()))?;
                continue;
            }
            let on_device = |e: raidlab_core::Error| e.on_device(m.device.path.clone());
            let (at, bytes) = m.sb.placed(m.device.volume.size()).map_err(on_device)?;
            writes.push(table.len(), at, &bytes);
            if let Some(b) = &self.bitmap {
                let (at, bytes) = b.placed(&m.sb).map_err(on_device)?;
                writes.push(table.len(), at, &bytes);
            }
            table.push(Some(Arc::clone(&m.device.volume)));
        }
        writes.run(&*self.executor, &table)?;
        self.events = events;
        Ok(())
    }

    /// The devices in service, for a 0.90 superblock's disk table (md writes
    /// it from the devices it has; a member being rebuilt is a spare there,
    /// as 0.90 has no field for how far its rebuild got).
    fn in_service_090(&self) -> raidlab_md::sb090::InService {
        let live = self.members.iter().filter(|m| m.is_live());
        raidlab_md::sb090::InService {
            numbers: live.clone().map(|m| m.sb.dev_number).collect(),
            rebuilding: live
                .filter(|m| matches!(m.state, MemberState::Rebuilding | MemberState::Replacing))
                .map(|m| m.sb.dev_number)
                .collect(),
        }
    }

    /// Set the role of device number `dev_number` in every live superblock's
    /// role table (the change itself is written by [`Assembly::commit`]).
    pub fn set_role(&mut self, dev_number: u32, raw_role: u16) {
        for m in self.members.iter_mut().filter(|m| m.is_live()) {
            if let Some(r) = m.sb.dev_roles.get_mut(dev_number as usize) {
                *r = raw_role;
            }
        }
    }

    /// The data area of member `index` (of `members`).
    pub fn area(&self, index: usize) -> Result<Arc<dyn Volume>> {
        let m = &self.members[index];
        let area = SliceVolume::new(
            m.device.volume.clone(),
            m.sb.data_offset * SECTOR,
            self.geometry.member_bytes,
        )?;
        Ok(Arc::new(area))
    }
}
