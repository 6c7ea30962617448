//! Starting an assembled array's write log: md's write journal or its partial
//! parity log. Starting one replays what an unclean stop left in it, before any
//! new write can overwrite an entry never replayed. It must never write array
//! data except through the replay of a log entry.

use super::*;

impl Assembly {
    /// Whether the array keeps md's write journal (consistency policy `journal`,
    /// a separate journal device).
    pub fn has_journal(&self) -> bool {
        self.newest().feature_map & raidlab_md::superblock::feature::JOURNAL != 0
            && crate::level::of(&self.geometry).journal
    }

    /// Stripes a start of the journal would change on the members (0 once
    /// started, without a journal, or after a clean stop). Reads only.
    pub fn journal_unreplayed(&self) -> Result<u64> {
        let r = self.journal_dry_run()?;
        Ok(r.stripes_replayed + r.data_only_stripes)
    }

    /// Stripes whose data is in the journal but not on the members: writes
    /// acknowledged in write-back mode before an unclean stop, which reads of
    /// the members alone would miss (0 once started, or after a clean stop).
    /// Reads only.
    pub fn journal_data_not_on_members(&self) -> Result<u64> {
        Ok(self.journal_dry_run()?.data_not_on_members)
    }

    /// What a start of the journal would change, compared and not written.
    fn journal_dry_run(&self) -> Result<crate::journal::JournalReplay> {
        let started = self
            .journal_handle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        match self.journal_member() {
            Some(j) if self.has_journal() && !started => {
                let vols = self
                    .slots
                    .iter()
                    .map(|slot| slot.map(|i| self.area(i)).transpose())
                    .collect::<Result<Vec<_>>>()?;
                let plain = Array::new("array (journal check)", self.geometry, vols)?
                    .with_executor(Arc::clone(&self.executor));
                crate::journal::unreplayed(j.device.volume.as_ref(), &j.sb, &self.uuid, &plain)
            }
            _ => Ok(Default::default()),
        }
    }

    /// Refuse `verb`, which writes data to the members (a rebuild, a resync,
    /// a repair, a reshape), on an array whose write journal device is
    /// missing or stale: md runs such an array only read-only (and only
    /// with --force), so it neither recovers nor reshapes it, and a stripe
    /// written around the journal could be torn by what the journal still
    /// holds. Membership records (fail, remove) are not data and pass.
    pub fn refuse_data_writes_without_journal(&self, verb: &str) -> Result<()> {
        if !self.has_journal() || self.journal_member().is_some() {
            return Ok(());
        }
        Err(raidlab_core::Error::new(
            raidlab_core::ErrorKind::ReadOnly,
            raidlab_core::Op::Open,
            format!(
                "refusing to {verb}: the array has a write journal (md's JOURNAL feature) but its journal device is missing or stale, and md runs such an array read-only (mdadm --assemble --force), writing no data to it. Give the journal device with the members; nothing was written"
            ),
        ))
    }

    /// The up-to-date journal device, if it was given.
    pub fn journal_member(&self) -> Option<&Member> {
        self.members
            .iter()
            .find(|m| m.state == MemberState::Journal)
    }

    /// Start the write journal before the array is used, as md does at every
    /// start of an array with one: replay what the journal holds from
    /// `journal_tail` (stripes complete in it are written to the members again,
    /// which makes them consistent whatever a crash left), then begin a new log.
    /// The superblocks stay clean throughout (md's MD_JOURNAL_CLEAN): the
    /// journal, not a resync, is what makes an unclean stop safe, and a degraded
    /// array may start. `None` without a journal (or without its device: then
    /// the array runs read-only, after [`Assembly::check_startable`] with force).
    pub fn start_journal(&mut self) -> Result<Option<crate::journal::JournalReplay>> {
        if !self.has_journal() {
            return Ok(None);
        }
        let Some(jm) = self.journal_member() else {
            return Ok(None);
        };
        let (device, sb) = (jm.device.volume.clone(), jm.sb.clone());
        let vols = self
            .slots
            .iter()
            .map(|slot| slot.map(|i| self.area(i)).transpose())
            .collect::<Result<Vec<_>>>()?;
        let plain = Array::new("array (journal replay)", self.geometry, vols)?
            .with_executor(Arc::clone(&self.executor));
        let (journal, replay) =
            crate::journal::Journal::start(device, sb, self.geometry, &self.uuid, &plain)?;
        // Keep the journal device's superblock (its journal_tail moved) current
        // in the assembly, so later superblock writes do not move it back.
        let tail = journal.tail();
        for m in self
            .members
            .iter_mut()
            .filter(|m| m.state == MemberState::Journal)
        {
            raidlab_md::journal::set_journal_tail(&mut m.sb, tail);
        }
        *self
            .journal_handle
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(journal));
        if replay.replayed_anything() && self.partly_rebuilt() {
            // The replay wrote the members in service only: a member being
            // rebuilt may lack writes that were in flight at the crash, below
            // its checkpoint. Its rebuild starts over.
            self.commit(restart_rebuild)?;
        }
        Ok(Some(replay))
    }

    /// Whether a member being rebuilt (or replacing another) has a checkpoint
    /// past its start.
    pub(super) fn partly_rebuilt(&self) -> bool {
        self.members.iter().any(|m| {
            matches!(m.state, MemberState::Rebuilding | MemberState::Replacing)
                && m.sb.recovery_offset != 0
        })
    }

    /// Whether the array keeps md's partial parity log (consistency policy
    /// `ppl`). md runs it for RAID 5; other levels ignore the flag.
    pub fn has_ppl(&self) -> bool {
        use raidlab_md::superblock::feature;
        // md records one or the other: MULTIPLE_PPLS once it has used an area with
        // room for several log writes.
        self.newest().feature_map & (feature::PPL | feature::MULTIPLE_PPLS) != 0
    }

    /// Whether writes go through the partial parity log.
    pub fn logs_partial_parity(&self) -> bool {
        self.has_ppl() && crate::level::of(&self.geometry).ppl
    }

    fn ppl_members(&self) -> Vec<(usize, Arc<dyn Volume>, Superblock)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(r, s)| s.map(|i| (r, i)))
            .map(|(r, i)| {
                let m = &self.members[i];
                (r, m.device.volume.clone(), m.sb.clone())
            })
            .collect()
    }

    pub(super) fn partial_parity_log(&self) -> Result<crate::ppl::PartialParityLog> {
        let mut by_role: Vec<Option<(Arc<dyn Volume>, Superblock)>> =
            vec![None; self.geometry.raid_disks];
        for (r, dev, sb) in self.ppl_members() {
            by_role[r] = Some((dev, sb));
        }
        crate::ppl::PartialParityLog::new(raidlab_md::ppl::signature(&self.uuid), by_role)
    }

    /// Start the partial parity log before writing, as md does when it starts an
    /// array with one: after an unclean stop, replay each member's log (parity of
    /// the rows being written at the crash is recomputed from the partial parity
    /// and the data), then start every log afresh (zeroed, an empty header) and,
    /// when every log checked out, record the array as clean: no resync needed.
    /// Returns what the replay did (`None` when there was nothing to replay: a
    /// clean array, or one without a log).
    pub fn start_ppl(&mut self) -> Result<Option<crate::ppl::PplReplay>> {
        if !self.logs_partial_parity() {
            return Ok(None);
        }
        let members = self.ppl_members();
        let replay = if self.in_sync() {
            None
        } else {
            // The replay writes parity directly: it runs on the array without logs.
            let vols = self
                .slots
                .iter()
                .map(|slot| slot.map(|i| self.area(i)).transpose())
                .collect::<Result<Vec<_>>>()?;
            let plain = Array::new("array (PPL replay)", self.geometry, vols)?
                .with_executor(Arc::clone(&self.executor));
            let r = crate::ppl::replay(&plain, &members, raidlab_md::ppl::signature(&self.uuid))?;
            plain.flush()?;
            Some(r)
        };
        // Every log emptied, as one plan: written together, each flushed.
        let mut writes = crate::metadata_plan::DeviceWrites::default();
        for (i, (_, dev, sb)) in members.iter().enumerate() {
            writes
                .push_empty_ppl(i, sb)
                .map_err(|e| e.on_device(dev.name()))?;
        }
        let table: Vec<Option<Arc<dyn Volume>>> = members
            .iter()
            .map(|(_, dev, _)| Some(Arc::clone(dev)))
            .collect();
        writes.run(&*self.executor, &table)?;
        if let Some(r) = &replay {
            // The replay fixed parity of the members in service only: a member
            // being rebuilt may hold torn stripes below its checkpoint. Its
            // rebuild starts over.
            let clean = r.mismatches == 0;
            if clean || self.partly_rebuilt() {
                self.commit(|sb| {
                    if clean {
                        sb.resync_offset = u64::MAX;
                    }
                    restart_rebuild(sb);
                })?;
            }
        }
        Ok(replay)
    }
}
