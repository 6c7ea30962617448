//! Membership changes of an array in service: fail, remove, add, re-add
//! and replace while clients keep using it, with the same checks and the
//! same superblock changes as the offline verbs ([`crate::manage`]).
//!
//! What it decides: the order between the running array and the
//! superblocks (a member leaves the array first and the superblocks second;
//! a member joins the superblocks first, as rebuilding, and the array only
//! when its rebuild is complete). It must never decide a change differently
//! from the offline verb.

use super::*;

impl LiveArray {
    /// Mark a member faulty now (it leaves the running array first). A hot
    /// spare, if any, takes its role and is rebuilt in the background.
    pub fn fail(self: &Arc<Self>, path: &str) -> Result<String> {
        self.check_not_reshaping("failing a member")?;
        let (i, state, role) = {
            let asm = lock(&self.asm);
            let i = Self::find(&asm, path)?;
            (i, asm.members[i].state, asm.members[i].role)
        };
        if matches!(state, MemberState::Rebuilding | MemberState::Replacing)
            && role.is_some()
            && self.array().recovery().map(|r| r.role()) == role
        {
            // Outside the assembly lock: the rebuild takes it to stop.
            self.cancel_rebuild();
        }
        let mut asm = lock(&self.asm);
        let label = asm.members[i].device.path.clone();
        if asm.members[i].state == MemberState::Faulty {
            // As mdadm --fail of a faulty device: success, nothing changed.
            return Ok(format!("{label} is already faulty; nothing was changed"));
        }
        if let (MemberState::Active, Some(role)) = (asm.members[i].state, asm.members[i].role) {
            // Refused here when the array could not serve without it: nothing
            // is changed then.
            self.array().fail_member(role)?;
        }
        let spare = asm.change_running(&self.array(), |a| a.fail(i))?;
        let mut out = format!("{label} marked faulty");
        if let Some(r) = self.carried_on(&asm, role) {
            out += &format!("; {r}");
        }
        if let Some(s) = spare {
            out += &format!(
                "; hot spare {} takes its place and is being rebuilt",
                asm.members[s].device.path
            );
        }
        if let Err(e) = self.start_pending(&mut asm) {
            out += &format!("; the rebuild cannot start now: {e}");
        }
        Ok(out)
    }

    /// When the member of `role` just left while a replacement copied it: says
    /// that the replacement carries on as a rebuild.
    pub(super) fn carried_on(&self, asm: &Assembly, role: Option<usize>) -> Option<String> {
        let rec = self.array().recovery()?;
        if Some(rec.role()) != role || rec.replacing() {
            return None;
        }
        let (index, _) = asm
            .rebuilding()
            .into_iter()
            .find(|&(_, slot)| Some(slot) == role)?;
        Some(format!(
            "its replacement {} carries on as a rebuild of role {} from {:.1}%",
            asm.members[index].device.path,
            rec.role(),
            rec.done() as f64 * 100.0 / asm.geometry.member_bytes.max(1) as f64
        ))
    }

    /// Take a faulty, stale or spare member out of the array.
    pub fn remove(&self, path: &str) -> Result<String> {
        self.check_not_reshaping("removing a member")?;
        let mut asm = lock(&self.asm);
        let i = Self::find(&asm, path)?;
        let label = asm.members[i].device.path.clone();
        asm.change_running(&self.array(), |a| a.remove(i))?;
        Ok(format!("{label} removed from the array"))
    }

    /// Add a device: into a missing role (rebuilt in the background at once
    /// unless `rebuild` is false) or as a hot spare.
    pub fn add(self: &Arc<Self>, device: Device, force: bool, rebuild: bool) -> Result<String> {
        self.check_not_reshaping("adding a member")?;
        let mut asm = lock(&self.asm);
        let device = self.io.count(device);
        let path = device.path.clone();
        let added = asm.change_running(&self.array(), |a| a.add(device, force))?;
        Ok(match added {
            Added::IntoSlot(slot) => {
                if rebuild {
                    if let Err(e) = self.start_pending(&mut asm) {
                        return Ok(format!("{path} added into missing role {slot}; the rebuild cannot start now: {e}"));
                    }
                    format!("{path} added into missing role {slot}; rebuilding in the background (`raidlab detail` shows progress)")
                } else {
                    format!("{path} added into missing role {slot}; start its rebuild with `raidlab rebuild`")
                }
            }
            Added::Spare => format!("{path} added as a hot spare"),
        })
    }

    /// Whether `device`, a former member, can be re-added now (md's re-add):
    /// checks only, against the bitmap as the running array has it.
    pub fn re_add_check(&self, device: &Device) -> Result<ReAdd> {
        let mut asm = lock(&self.asm);
        asm.change_running(&self.array(), |a| a.re_add_check(device))
    }

    /// Re-add a former member into its old role while the array serves
    /// (md's re-add): only the chunks the write-intent bitmap marks dirty
    /// when the rebuild reaches them are rewritten, those the bitmap marked
    /// while it was away and those written since. Refused, with md's reason
    /// and nothing written, when [`LiveArray::re_add_check`] is.
    pub fn re_add(self: &Arc<Self>, device: Device, rebuild: bool) -> Result<String> {
        self.check_not_reshaping("a re-add")?;
        let mut asm = lock(&self.asm);
        let device = self.io.count(device);
        let path = device.path.clone();
        let r = asm.change_running(&self.array(), |a| a.re_add(device))?;
        let what = format!(
            "{path} re-added into its role {} (its events {}, the bitmap cleared at {}; {} dirty chunk(s) to resync)",
            r.slot, r.events, r.events_cleared, r.dirty_chunks
        );
        if !rebuild {
            return Ok(format!("{what}; start its resync with `raidlab rebuild`"));
        }
        if let Err(e) = self.start_pending(&mut asm) {
            return Ok(format!("{what}; the resync cannot start now: {e}"));
        }
        Ok(format!(
            "{what}; resyncing in the background (`raidlab detail` shows progress)"
        ))
    }

    /// Start copying an active member onto a new device while both serve
    /// (md's replace); the new one takes over when the copy is complete.
    pub fn replace(
        self: &Arc<Self>,
        old: &str,
        device: Device,
        force: bool,
        rebuild: bool,
    ) -> Result<String> {
        self.check_not_reshaping("replacing a member")?;
        let mut asm = lock(&self.asm);
        let i = Self::find(&asm, old)?;
        let (label, new) = (asm.members[i].device.path.clone(), device.path.clone());
        if self.array().recovery().is_some() {
            return Err(Error::invalid(
                "a rebuild is running: replace a member after it finishes",
            ));
        }
        let device = self.io.count(device);
        asm.change_running(&self.array(), |a| a.replace(i, device, force))?;
        if rebuild {
            if let Err(e) = self.start_pending(&mut asm) {
                return Ok(format!(
                    "{new} will replace {label}; the copy cannot start now: {e}"
                ));
            }
        }
        Ok(format!("{new} is replacing {label}; copying in the background (`raidlab detail` shows progress)"))
    }
}
