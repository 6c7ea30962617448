//! The simulated hardware of one served reshape run: the members (memory
//! with a volatile cache, a tripwire for the power), the power cut (each
//! member's unflushed writes kept, dropped or torn) and the members given
//! to the engine's assembly as a user names them.
//!
//! It decides what the hardware does and which devices are handed over;
//! it must never decide anything of the array (`Assembly::assemble` reads
//! the superblocks and decides what each device is).

use raidlab_devices::{FaultVolume, MemVolume, Tripwire};
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::exec::{Executor, Interleaved};
use std::sync::Arc;

/// Each member's size: metadata 1.1/1.2 put the data 1 MiB in, leaving
/// about 1 MiB of data and room below it for the walk to move into.
const MEMBER_BYTES: u64 = 2 << 20;

type Member = Arc<FaultVolume<MemVolume>>;

/// The members of one run and what is known of them.
pub(super) struct Rig {
    pub(super) members: Vec<Member>,
    pub(super) dead: Vec<bool>,
    pub(super) exec: Arc<dyn Executor>,
}

impl Rig {
    pub(super) fn new(n: usize) -> Rig {
        Rig {
            members: (0..n)
                .map(|_| {
                    Arc::new(FaultVolume::with_volatile_cache(MemVolume::new(
                        MEMBER_BYTES,
                    )))
                })
                .collect(),
            dead: vec![false; n],
            exec: Arc::new(Interleaved),
        }
    }

    pub(super) fn device(&self, i: usize) -> Device {
        Device {
            path: format!("mem{i}"),
            volume: self.members[i].clone(),
        }
    }

    pub(super) fn assemble(&self) -> Result<Assembly, String> {
        // The devices carrying a superblock, as a user names an array's
        // members: a level change's device not yet added has none.
        let devs = (0..self.members.len())
            .filter(|&i| !self.dead[i])
            .filter(|&i| {
                !matches!(
                    raidlab_md::Superblock::read_from(self.members[i].as_ref()),
                    Ok(None)
                )
            })
            .map(|i| self.device(i))
            .collect();
        let mut asm = Assembly::assemble(devs).map_err(|e| format!("assemble: {e}"))?;
        asm.set_executor(self.exec.clone());
        Ok(asm)
    }

    pub(super) fn arm(&self, wire: Option<&Arc<Tripwire>>) {
        for m in &self.members {
            m.set_tripwire(wire.cloned());
        }
    }

    /// The power goes: each member's unflushed writes kept, dropped or torn.
    pub(super) fn cut(&self, seed: u64) {
        self.arm(None);
        for (k, m) in self.members.iter().enumerate() {
            let _ = m.power_cut(seed ^ (k as u64).wrapping_mul(0x9e37_79b9));
            m.restart();
        }
    }

    /// On metadata 0.90, the members whose superblock a cut tore (one
    /// checksum over its 4 KiB) taken as dead, as mdadm leaves them out;
    /// whether any was.
    pub(super) fn drop_torn_090(&mut self, metadata: raidlab_md::MetadataVersion) -> bool {
        if metadata != raidlab_md::MetadataVersion::V0_90 {
            return false;
        }
        let mut any = false;
        for k in 0..self.members.len() {
            let v: &dyn raidlab_core::Volume = self.members[k].as_ref();
            if !self.dead[k] && raidlab_md::Superblock::read_from(v).is_err() {
                self.dead[k] = true;
                any = true;
            }
        }
        any
    }

    pub(super) fn writes(&self) -> u64 {
        self.members.iter().map(|m| m.stats().writes).sum()
    }
}
