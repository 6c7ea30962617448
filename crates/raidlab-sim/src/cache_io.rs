//! The cache tier's two devices as the real cache sees them: volumes whose
//! every operation, inside a task, is handed to the runner
//! ([`crate::cache::SimCache`]) and suspends the task until the device model
//! has completed it in virtual time.
//!
//! Decides nothing about the operations: which ones and in which order are
//! the real cache's, when they complete is the device model's. Outside a
//! task (creating and opening the cache, which is set-up and takes no
//! virtual time) an operation is done at once and timed by nothing.
//!
//! Data is not simulated: the cache device keeps only the bytes of its
//! metadata area (the cache reads its table and superblocks back), data
//! blocks read as zeros; the origin keeps nothing.

use raidlab_core::task::{self, Wait};
use raidlab_core::IoKind;
use raidlab_core::{Op, Result, Volume};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Which device an operation of the cache goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    Cache,
    Origin,
}

/// One operation the cache issued to its cache device or its origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheOp {
    pub side: Side,
    pub kind: IoKind,
    pub offset: u64,
    pub len: u64,
}

/// Operations tasks asked for and the runner has not yet taken: one at a
/// time, as a task suspends at each.
pub(crate) type Outbox = Arc<Mutex<Vec<CacheOp>>>;

const PAGE: u64 = 4096;

/// The bytes a volume keeps: below this offset, by 4 KiB page.
type Kept = (u64, HashMap<u64, Box<[u8]>>);

/// The cache device's or the origin's stand-in under the real cache.
#[derive(Debug)]
pub struct DeviceVolume {
    name: String,
    size: u64,
    side: Side,
    optimal: Option<u64>,
    outbox: Outbox,
    kept: Mutex<Kept>,
}

impl DeviceVolume {
    /// A volume for `side`, keeping the bytes written below `keep_below`.
    pub(crate) fn new(
        name: String,
        size: u64,
        side: Side,
        optimal: Option<u64>,
        outbox: Outbox,
        keep_below: u64,
    ) -> DeviceVolume {
        DeviceVolume {
            name,
            size,
            side,
            optimal,
            outbox,
            kept: Mutex::new((keep_below, HashMap::new())),
        }
    }

    /// Hand the operation to the runner and wait for the device model to
    /// complete it; at once outside a task.
    fn io(&self, kind: IoKind, offset: u64, len: u64) {
        if !task::in_task() {
            return;
        }
        self.outbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(CacheOp {
                side: self.side,
                kind,
                offset,
                len,
            });
        task::suspend(Wait::Runner(0));
    }

    fn check(&self, op: Op, offset: u64, len: u64) -> Result<()> {
        raidlab_core::check_range(&self.name, op, self.size, offset, len)
    }

    /// Keep from now on only the bytes below `limit` (0: none).
    pub(crate) fn keep_below(&self, limit: u64) {
        let mut k = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        k.0 = limit;
        k.1.retain(|&page, _| page * PAGE < limit);
    }
}

impl Volume for DeviceVolume {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.check(Op::Read, offset, buf.len() as u64)?;
        self.io(IoKind::Read, offset, buf.len() as u64);
        buf.fill(0);
        let k = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let end = offset + buf.len() as u64;
        if offset >= k.0 {
            return Ok(());
        }
        for page in offset / PAGE..end.div_ceil(PAGE) {
            if let Some(bytes) = k.1.get(&page) {
                let (from, to) = ((page * PAGE).max(offset), ((page + 1) * PAGE).min(end));
                buf[(from - offset) as usize..(to - offset) as usize].copy_from_slice(
                    &bytes[(from - page * PAGE) as usize..(to - page * PAGE) as usize],
                );
            }
        }
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check(Op::Write, offset, buf.len() as u64)?;
        {
            let mut k = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            let end = (offset + buf.len() as u64).min(k.0);
            let pages = if offset < end {
                offset / PAGE..end.div_ceil(PAGE)
            } else {
                0..0
            };
            for page in pages {
                let (from, to) = ((page * PAGE).max(offset), ((page + 1) * PAGE).min(end));
                let bytes =
                    k.1.entry(page)
                        .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
                bytes[(from - page * PAGE) as usize..(to - page * PAGE) as usize]
                    .copy_from_slice(&buf[(from - offset) as usize..(to - offset) as usize]);
            }
        }
        self.io(IoKind::Write, offset, buf.len() as u64);
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        self.io(IoKind::Flush, 0, 0);
        Ok(())
    }
    // A FUA write is what the trait's default makes of it, a write and a flush:
    // the simulated devices have no FUA of their own.
    fn optimal_io_size(&self) -> Option<u64> {
        self.optimal
    }
}
