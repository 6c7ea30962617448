//! md's internal write-intent bitmap on a simulated array: the members carry
//! an md 1.2 superblock and bitmap (built by raidlab-md as `mdadm --create
//! --bitmap=internal` would), the engine marks chunks dirty and plans the
//! bitmap writes before a write reaches the members (`Array::with_intent`,
//! its `note_intent`), and the engine's bitmap daemon
//! (`raidlab_raid::bitmap_daemon`) clears the bits of chunks nobody has
//! written for two of its passes and writes the bitmap back.
//!
//! Decides: the superblocks and bitmap the simulated members start with (a
//! clean array: no bit set), and the clock of the daemon's passes (every
//! `daemon_sleep` of virtual time, only while bits are set). It tells the
//! engine's daemon when a request's writes are under way in virtual time
//! (the engine plans a request at once, so its own count ends at once). It
//! never decides which chunks a write holds, which bits a pass clears or
//! what is written for them (the engine's, scheduled like any other plan),
//! and never reads the wall clock.

use crate::array::DATA_OFFSET;
use crate::device::Ns;
use raidlab_core::Volume;
use raidlab_devices::SizeOnly;
use raidlab_layout::{Geometry, Level};
use raidlab_md::bitmap::{new_internal, Bitmap};
use raidlab_md::superblock::{new_member, NewArray};
use raidlab_md::Superblock;
use raidlab_raid::bitmap_daemon::{chunks_of, counts_array_sectors, write_sectors, Daemon};
use raidlab_raid::{Array, Plan};
use std::collections::VecDeque;
use std::sync::Arc;

/// The engine's view of the members' bitmap copies: what
/// `Array::with_intent` takes.
pub type IntentDevices = Vec<(usize, Arc<dyn Volume>, Superblock)>;

/// md's bitmap daemon for one simulated array: its clock and the writes under
/// way in virtual time.
#[derive(Debug)]
pub struct SimBitmap {
    /// Role of each position of the engine's device table (a bitmap plan's
    /// member numbers are positions, not roles).
    pub roles: Vec<usize>,
    /// Bitmap chunk, in md sectors, and the bitmap's chunk count.
    chunk_sectors: u64,
    chunks: u64,
    /// md's `daemon_sleep`, in virtual ns.
    sleep: Ns,
    /// RAID 10's bitmap counts array sectors, the other levels' member
    /// sectors (as md's, and the engine's).
    by_array_sector: bool,
    /// A member is missing: md never clears bits then.
    degraded: bool,
    /// The daemon's next pass, while bits are set.
    pub next: Option<Ns>,
    /// The engine's daemon, told of writes as they run in virtual time.
    daemon: Daemon,
    /// Bits cleared by the daemon so far.
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
            roles: devices.iter().map(|d| d.0).collect(),
            chunk_sectors: bitmap.sb.chunk_sectors(),
            chunks: bitmap.chunks(),
            sleep: Daemon::sleep(&bitmap).as_nanos() as Ns,
            by_array_sector: counts_array_sectors(g.level),
            degraded: devices.len() < g.raid_disks,
            next: None,
            daemon: Daemon::default(),
            cleared: 0,
        };
        Ok((bitmap, devices, sim))
    }

    /// The bitmap chunk size, in bytes.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_sectors * 512
    }

    /// The bitmap chunks a request writes with `plans` (`host`: its array
    /// range, which RAID 10's bitmap counts), now counted under way until
    /// [`SimBitmap::done`]; starts the daemon's passes if they were stopped.
    pub fn start(&mut self, now: Ns, plans: &VecDeque<Plan>, host: Option<(u64, u64)>) -> Vec<u64> {
        // Writes of the array's own thread (a stripe written out) have no
        // host range: an empty one (RAID 10, which counts by it, has none).
        let ranges = write_sectors(self.by_array_sector, plans, host.unwrap_or((0, 0)));
        let chunks = chunks_of(&ranges, self.chunk_sectors, self.chunks);
        self.daemon.start(&chunks);
        if !chunks.is_empty() && self.next.is_none() && !self.degraded {
            self.next = Some(now + self.sleep);
        }
        chunks
    }

    /// A request counted by [`SimBitmap::start`] finished.
    pub fn done(&mut self, chunks: &[u64]) {
        self.daemon.done(chunks);
    }

    /// One pass of the engine's bitmap daemon at `now`, with the writes under
    /// way in virtual time; what it writes (a flush, then the bitmap on every
    /// member) is recorded by the array's executor for the caller to
    /// schedule. The next pass is due `daemon_sleep` later while bits are
    /// still set.
    pub fn pass(&mut self, now: Ns, array: &Array) -> Result<(), String> {
        self.next = None;
        let cleared = array
            .bitmap_daemon_pass_by(&mut self.daemon)
            .map_err(|e| format!("bitmap daemon: {e}"))?;
        self.cleared += cleared;
        if array.with_bitmap_held(|b| b.dirty_count()).unwrap_or(0) > 0 {
            self.next = Some(now + self.sleep);
        }
        Ok(())
    }
}
