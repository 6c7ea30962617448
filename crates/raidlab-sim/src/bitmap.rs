//! md's internal write-intent bitmap on a simulated array: the members carry
//! an md 1.2 superblock and bitmap (built by raidlab-md as `mdadm --create
//! --bitmap=internal` would), the engine marks chunks dirty and plans the
//! bitmap writes before a write reaches the members (`Array::with_intent`,
//! its `note_intent`), and this module plays md's bitmap daemon, which clears
//! the bits of chunks nobody has written for two of its passes and writes the
//! bitmap back.
//!
//! Decides: the superblocks and bitmap the simulated members start with (a
//! clean array: no bit set), which chunks a request is writing while it runs,
//! and when the daemon clears bits (every `daemon_sleep`, md's 5 s default
//! from the bitmap header, only while bits are set; a chunk's bit goes on
//! the second pass that finds no write in flight on it, as md's counter
//! falls 2, 1, 0; never on a degraded array, where md keeps the bits for the
//! member's return). It never decides when a write dirties a bit or what the
//! engine writes for it (the engine's plans, scheduled like any other), and
//! never reads the wall clock.

use crate::array::DATA_OFFSET;
use crate::device::{Ns, SEC};
use raidlab_core::Volume;
use raidlab_devices::SizeOnly;
use raidlab_layout::{Geometry, Level};
use raidlab_md::bitmap::{new_internal, Bitmap};
use raidlab_md::superblock::{new_member, NewArray};
use raidlab_md::Superblock;
use raidlab_raid::metadata_plan::DeviceWrites;
use raidlab_raid::plan::Space;
use raidlab_raid::{Array, Plan};
use rustc_hash::FxHashMap;
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

/// The engine's view of the members' bitmap copies: what
/// `Array::with_intent` takes.
pub type IntentDevices = Vec<(usize, Arc<dyn Volume>, Superblock)>;

/// md's bitmap daemon for one simulated array.
#[derive(Debug)]
pub struct SimBitmap {
    /// Each member's superblock (where its bitmap copy lives), in the order
    /// of the engine's device table: the members in service, by role.
    sbs: Vec<Superblock>,
    /// Role of each position of that table (a bitmap plan's member numbers
    /// are positions, not roles).
    pub roles: Vec<usize>,
    /// Bitmap chunk, in md sectors.
    chunk_sectors: u64,
    /// md's `daemon_sleep`, in virtual ns.
    sleep: Ns,
    /// RAID 10's bitmap counts array sectors, the other levels' member
    /// sectors (as md's, and the engine's).
    by_array_sector: bool,
    /// A member is missing: md never clears bits then.
    degraded: bool,
    /// The daemon's next pass, while bits are set.
    pub next: Option<Ns>,
    /// Chunks the last pass found with no write in flight (md's counter at 1).
    idle_once: BTreeSet<u64>,
    /// Requests under way writing each chunk (md's counter above 2).
    busy: FxHashMap<u64, u32>,
    /// Bits cleared and bitmap writes planned by the daemon so far.
    pub cleared: u64,
}

impl SimBitmap {
    /// Superblocks and a clean bitmap for the members of `g` that are present,
    /// as `mdadm --create --bitmap=internal --bitmap-chunk=CHUNK` lays them
    /// out (with the simulator's 1 MiB data offset); `chunk` `None` takes
    /// mdadm's choice for the member size.
    pub fn build(
        name: &str,
        g: &Geometry,
        capacities: &[Option<u64>],
        chunk: Option<u64>,
    ) -> Result<(Bitmap, IntentDevices, SimBitmap), String> {
        if g.level == Level::Raid0 {
            return Err("a bitmap needs redundancy: RAID 0 has none (md refuses one there)".into());
        }
        let chunk = match chunk {
            Some(c) => Some(u32::try_from(c).map_err(|_| {
                format!("bitmap chunk {c} bytes is too large (md's is a 32-bit byte count)")
            })?),
            None => None,
        };
        let array = NewArray {
            uuid: [0x5a; 16],
            name: name.chars().take(31).collect(),
            level: g.level.md_level(),
            layout: g.md_layout(),
            chunk_sectors: g.md_chunk_sectors(),
            raid_disks: g.raid_disks as u32,
            member_sectors: g.member_bytes / 512,
            data_offset_sectors: DATA_OFFSET / 512,
            total_devices: g.raid_disks as u32,
            clean: true,
        };
        let mut devices: IntentDevices = Vec::new();
        let mut bitmap: Option<Bitmap> = None;
        for (role, cap) in capacities.iter().enumerate() {
            let Some(cap) = *cap else { continue };
            let mut sb = new_member(
                &array,
                role as u32,
                role as u16,
                [role as u8; 16],
                cap / 512,
                0,
            );
            let bm = new_internal(&mut sb, chunk).map_err(|e| format!("bitmap: {e}"))?;
            bitmap.get_or_insert(bm);
            let dev = Arc::new(SizeOnly::new(format!("{name} member {role} (whole)"), cap));
            devices.push((role, dev as Arc<dyn Volume>, sb));
        }
        let mut bitmap = bitmap.ok_or("a bitmap needs at least one member in service")?;
        // md clears a new bitmap when it starts an array that is in sync.
        bitmap.clear_all();
        let sim = SimBitmap {
            sbs: devices.iter().map(|d| d.2.clone()).collect(),
            roles: devices.iter().map(|d| d.0).collect(),
            chunk_sectors: bitmap.sb.chunk_sectors(),
            sleep: u64::from(bitmap.sb.daemon_sleep.max(1)) * SEC,
            by_array_sector: g.level == Level::Raid10,
            degraded: devices.len() < g.raid_disks,
            next: None,
            idle_once: BTreeSet::new(),
            busy: FxHashMap::default(),
            cleared: 0,
        };
        Ok((bitmap, devices, sim))
    }

    /// The bitmap chunk size, in bytes.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_sectors * 512
    }

    /// The bitmap chunks a request writes with `plans` (`host`: its array
    /// range, which RAID 10's bitmap counts), now counted busy until
    /// [`SimBitmap::done`]; starts the daemon's passes if they were stopped.
    pub fn start(&mut self, now: Ns, plans: &VecDeque<Plan>, host: Option<(u64, u64)>) -> Vec<u64> {
        let mut chunks = Vec::new();
        let cs = self.chunk_sectors;
        let mut add = |offset: u64, len: u64| {
            if len > 0 {
                chunks.extend(offset / 512 / cs..=(offset + len - 1) / 512 / cs);
            }
        };
        if self.by_array_sector {
            if let Some((offset, len)) =
                host.filter(|_| plans.iter().any(|p| p.writes().next().is_some()))
            {
                add(offset, len);
            }
        } else {
            for p in plans.iter().filter(|p| p.space == Space::Data) {
                for op in p.writes() {
                    add(op.offset, op.length);
                }
            }
        }
        chunks.sort_unstable();
        chunks.dedup();
        for &c in &chunks {
            *self.busy.entry(c).or_default() += 1;
            self.idle_once.remove(&c);
        }
        if !chunks.is_empty() && self.next.is_none() && !self.degraded {
            self.next = Some(now + self.sleep);
        }
        chunks
    }

    /// A request counted by [`SimBitmap::start`] finished.
    pub fn done(&mut self, chunks: &[u64]) {
        for c in chunks {
            if let Some(n) = self.busy.get_mut(c) {
                *n -= 1;
                if *n == 0 {
                    self.busy.remove(c);
                }
            }
        }
    }

    /// One pass of md's bitmap daemon at `now`: clear the bits idle for two
    /// passes and, if any was, the plan that writes the bitmap to every member
    /// (positions of the engine's table, as its own bitmap plans). The next
    /// pass is due `daemon_sleep` later while bits are still set.
    pub fn pass(&mut self, now: Ns, array: &Array) -> Result<Option<Plan>, String> {
        self.next = None;
        let Self {
            sbs,
            idle_once,
            busy,
            chunk_sectors,
            cleared,
            ..
        } = self;
        let result = array.with_bitmap_held(|bm| -> Result<(Option<Plan>, u64), String> {
            let cs = *chunk_sectors;
            let dirty: Vec<u64> = bm
                .dirty_ranges()
                .flat_map(|(start, len)| start / cs..(start + len).div_ceil(cs))
                .collect();
            let mut any = false;
            for c in dirty {
                if busy.contains_key(&c) {
                    idle_once.remove(&c);
                } else if idle_once.remove(&c) {
                    bm.clear(c).map_err(|e| format!("bitmap daemon: {e}"))?;
                    *cleared += 1;
                    any = true;
                } else {
                    idle_once.insert(c);
                }
            }
            let plan = if any {
                let mut writes = DeviceWrites::default();
                for (k, sb) in sbs.iter().enumerate() {
                    let (at, bytes) = bm.placed(sb).map_err(|e| format!("bitmap daemon: {e}"))?;
                    writes.push(k, at, &bytes);
                }
                Some(writes.plan())
            } else {
                None
            };
            Ok((plan, bm.dirty_count()))
        });
        let Some(result) = result else {
            return Ok(None);
        };
        let (plan, dirty) = result?;
        if dirty > 0 {
            self.next = Some(now + self.sleep);
        }
        Ok(plan)
    }
}
