//! The volatile write cache of a [`super::FaultVolume`]: a log of pending
//! writes in arrival order (what a flush or a power cut applies to the inner
//! volume, and what reads see over it). While the log is short a read lays
//! its entries over the medium's bytes in order; past [`INDEX_AFTER`] entries
//! a sector-indexed map of the newest pending bytes takes over, so a read
//! never walks a long log. It decides nothing about faults or power; it must
//! never lose or reorder a pending write, and its buffers are reused from
//! flush to flush so that a write costs no allocation of its own.

use super::SECTOR;
use crate::SectorMask;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;

pub(super) struct Overlay {
    pub(super) log: Vec<PendingWrite>,
    /// The bytes of every pending write, back to back: one buffer reused from
    /// flush to flush instead of an allocation per write.
    bytes: Vec<u8>,
    /// Whether `sectors` and `cells` hold the pending bytes (the log grew
    /// past [`INDEX_AFTER`] entries since the last clear); empty otherwise.
    indexed: bool,
    /// Sector index -> its cell in `cells`.
    sectors: BTreeMap<u64, usize>,
    /// Cached sectors, reused from flush to flush (a boxed sector per write
    /// made allocation a fifth of a torture run). A sector forgotten by a FUA
    /// write leaves its cell unused until the next clear.
    cells: Vec<CachedSector>,
}

/// A pending write: its offset on the volume and where its bytes are in
/// [`Overlay::bytes`].
#[derive(Clone, Copy)]
pub(super) struct PendingWrite {
    pub(super) offset: u64,
    at: usize,
    len: usize,
}

const SECTOR_BYTES: usize = SECTOR as usize;

/// Pending writes a read may walk: most flush intervals are shorter, and
/// keeping the per-sector map on every write was a tenth of a torture run.
const INDEX_AFTER: usize = 32;

struct CachedSector {
    data: [u8; SECTOR_BYTES],
    /// Which bytes of `data` the cache holds.
    held: SectorMask,
}

impl CachedSector {
    const EMPTY: CachedSector = CachedSector {
        data: [0; SECTOR_BYTES],
        held: SectorMask::EMPTY,
    };
}

/// The `bytes` buffers of dropped overlays, cleared, for new ones: a volume
/// made per run (the torture harness makes several) grew its buffer from
/// nothing by doubling, each doubling a copy of every pending byte.
static SPARE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// At most this many buffers are kept, none larger than [`SPARE_LARGEST`].
const SPARE_COUNT: usize = 16;
const SPARE_LARGEST: usize = 8 << 20;

impl Default for Overlay {
    fn default() -> Self {
        let bytes = SPARE
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_default();
        Overlay {
            log: Vec::new(),
            bytes,
            indexed: false,
            sectors: BTreeMap::new(),
            cells: Vec::new(),
        }
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.bytes);
        if bytes.capacity() == 0 || bytes.capacity() > SPARE_LARGEST {
            return;
        }
        bytes.clear();
        let mut spare = SPARE.lock().unwrap_or_else(|p| p.into_inner());
        if spare.len() < SPARE_COUNT {
            spare.push(bytes);
        }
    }
}

impl fmt::Debug for Overlay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The contents would drown any assertion message; the shape is what helps.
        f.debug_struct("Overlay")
            .field("pending_writes", &self.log.len())
            .field("cached_sectors", &self.sectors.len())
            .finish()
    }
}

impl Overlay {
    /// The bytes of pending write `w`.
    pub(super) fn data(&self, w: &PendingWrite) -> &[u8] {
        &self.bytes[w.at..w.at + w.len]
    }

    pub(super) fn record(&mut self, data: &[u8], offset: u64) {
        if self.indexed {
            self.index(data, offset);
        }
        self.log.push(PendingWrite {
            offset,
            at: self.bytes.len(),
            len: data.len(),
        });
        self.bytes.extend_from_slice(data);
        if !self.indexed && self.log.len() > INDEX_AFTER {
            // Out of `self` while the map is built from them, once.
            let (log, bytes) = (
                std::mem::take(&mut self.log),
                std::mem::take(&mut self.bytes),
            );
            for w in &log {
                self.index(&bytes[w.at..w.at + w.len], w.offset);
            }
            (self.log, self.bytes) = (log, bytes);
            self.indexed = true;
        }
    }

    /// Lay `data`, written at `offset`, into the per-sector map.
    fn index(&mut self, data: &[u8], offset: u64) {
        let mut pos = 0usize;
        while pos < data.len() {
            let abs = offset + pos as u64;
            let index = abs / SECTOR;
            let within = (abs % SECTOR) as usize;
            let n = (SECTOR_BYTES - within).min(data.len() - pos);
            let cells = &mut self.cells;
            let cell = *self.sectors.entry(index).or_insert_with(|| {
                cells.push(CachedSector::EMPTY);
                cells.len() - 1
            });
            let sector = &mut self.cells[cell];
            sector.data[within..within + n].copy_from_slice(&data[pos..pos + n]);
            sector.held.set(within, within + n, true);
            pos += n;
        }
    }

    /// Lay the cached bytes over `buf`, which holds what the medium has at `offset`.
    pub(super) fn overlay(&self, buf: &mut [u8], offset: u64) {
        if buf.is_empty() || self.log.is_empty() {
            return;
        }
        let end = offset + buf.len() as u64;
        if !self.indexed {
            // In arrival order: a newer write's bytes land over an older's.
            for w in &self.log {
                let (from, to) = (w.offset.max(offset), (w.offset + w.len as u64).min(end));
                if from < to {
                    let src = &self.data(w)[(from - w.offset) as usize..(to - w.offset) as usize];
                    buf[(from - offset) as usize..(to - offset) as usize].copy_from_slice(src);
                }
            }
            return;
        }
        let first = offset / SECTOR;
        let last = (end - 1) / SECTOR;
        for (&index, &cell) in self.sectors.range(first..=last) {
            let sector = &self.cells[cell];
            let sector_start = index * SECTOR;
            let from = sector_start.max(offset);
            let to = (sector_start + SECTOR).min(end);
            let (lo, hi) = ((from - sector_start) as usize, (to - sector_start) as usize);
            let at = (from - offset) as usize;
            if sector.held.holds_all() {
                buf[at..at + hi - lo].copy_from_slice(&sector.data[lo..hi]);
                continue;
            }
            for i in lo..hi {
                if sector.held.holds(i) {
                    buf[at + i - lo] = sector.data[i];
                }
            }
        }
    }

    pub(super) fn clear(&mut self) {
        self.log.clear();
        self.bytes.clear();
        self.sectors.clear();
        self.cells.clear();
        self.indexed = false;
    }

    /// Forget every pending byte of `[offset, offset+len)`: a FUA write put the
    /// newest bytes of that range on the medium, and no older pending write
    /// may land on top of them at a power cut. Pending writes that overlap are
    /// cut into the pieces outside the range.
    pub(super) fn forget(&mut self, offset: u64, len: u64) {
        let end = offset + len;
        let mut kept = Vec::with_capacity(self.log.len());
        for w in std::mem::take(&mut self.log) {
            let w_end = w.offset + w.len as u64;
            if w_end <= offset || end <= w.offset {
                kept.push(w);
                continue;
            }
            // The pieces keep pointing into `bytes`: nothing is copied.
            if w.offset < offset {
                kept.push(PendingWrite {
                    offset: w.offset,
                    at: w.at,
                    len: (offset - w.offset) as usize,
                });
            }
            if end < w_end {
                let from = (end - w.offset) as usize;
                kept.push(PendingWrite {
                    offset: end,
                    at: w.at + from,
                    len: w.len - from,
                });
            }
        }
        self.log = kept;
        if len == 0 || !self.indexed {
            return;
        }
        let first = offset / SECTOR;
        let last = (end - 1) / SECTOR;
        let mut empty = Vec::new();
        for (&index, &cell) in self.sectors.range(first..=last) {
            let sector = &mut self.cells[cell];
            let start = index * SECTOR;
            let from = (start.max(offset) - start) as usize;
            let to = ((start + SECTOR).min(end) - start) as usize;
            sector.held.set(from, to, false);
            if sector.held.holds_none() {
                empty.push(index);
            }
        }
        for index in empty {
            self.sectors.remove(&index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads agree with a byte-per-byte reference (the newest pending value
    /// of each byte, or none), before and after the log grows long enough to
    /// be indexed, through partial writes and FUA forgets.
    #[test]
    fn reads_match_a_byte_reference_short_and_long() {
        use rand::{Rng, SeedableRng};
        const SIZE: usize = 16 * SECTOR_BYTES;
        for seed in 0..20u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut o = Overlay::default();
            let mut reference: Vec<Option<u8>> = vec![None; SIZE];
            for step in 0..100 {
                let off = rng.gen_range(0..SIZE - 1);
                let len = rng.gen_range(1..=(SIZE - off).min(3 * SECTOR_BYTES));
                if rng.gen_range(0..6) == 0 {
                    o.forget(off as u64, len as u64);
                    reference[off..off + len].fill(None);
                } else {
                    let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                    o.record(&data, off as u64);
                    for (r, &b) in reference[off..off + len].iter_mut().zip(&data) {
                        *r = Some(b);
                    }
                }
                let (ro, rl) = (rng.gen_range(0..SIZE - 1), rng.gen_range(1..SIZE));
                let rl = rl.min(SIZE - ro);
                let mut buf = vec![0xa5u8; rl];
                o.overlay(&mut buf, ro as u64);
                for (i, &b) in buf.iter().enumerate() {
                    assert_eq!(
                        b,
                        reference[ro + i].unwrap_or(0xa5),
                        "seed {seed} step {step} (indexed {}): byte {}",
                        o.indexed,
                        ro + i
                    );
                }
            }
            assert!(
                o.indexed,
                "seed {seed}: the log never grew long enough to be indexed"
            );
        }
    }

    #[test]
    fn a_forget_in_the_middle_keeps_the_pieces_either_side_with_their_bytes() {
        let mut o = Overlay::default();
        let data: Vec<u8> = (0..3 * SECTOR_BYTES).map(|i| (i % 251) as u8).collect();
        o.record(&data, 1024);
        o.forget(1024 + 512 + 100, 200);
        let pieces: Vec<(u64, Vec<u8>)> = o
            .log
            .iter()
            .map(|w| (w.offset, o.data(w).to_vec()))
            .collect();
        assert_eq!(
            pieces,
            vec![
                (1024, data[..612].to_vec()),
                (1024 + 812, data[812..].to_vec())
            ]
        );
        // Reads see every held byte and nothing of the forgotten ones.
        let mut buf = vec![0xeeu8; 4 * SECTOR_BYTES];
        o.overlay(&mut buf, 1024);
        assert_eq!(&buf[..612], &data[..612]);
        assert!(buf[612..812].iter().all(|&b| b == 0xee));
        assert_eq!(&buf[812..3 * SECTOR_BYTES], &data[812..]);
        assert!(buf[3 * SECTOR_BYTES..].iter().all(|&b| b == 0xee));
    }

    #[test]
    fn a_whole_sector_then_a_partial_write_and_a_clear() {
        let mut o = Overlay::default();
        o.record(&[1; SECTOR_BYTES], 0);
        o.record(&[2; 70], 60);
        let mut buf = [0u8; SECTOR_BYTES + 8];
        o.overlay(&mut buf, 0);
        assert!(buf[..60].iter().all(|&b| b == 1));
        assert!(buf[60..130].iter().all(|&b| b == 2));
        assert!(buf[130..SECTOR_BYTES].iter().all(|&b| b == 1));
        assert!(buf[SECTOR_BYTES..].iter().all(|&b| b == 0));
        // A forget of the whole sector leaves nothing held there.
        o.forget(0, SECTOR);
        let mut buf = [9u8; 16];
        o.overlay(&mut buf, 56);
        assert_eq!(buf, [9; 16]);
        o.clear();
        assert!(o.log.is_empty() && o.bytes.is_empty() && o.cells.is_empty());
    }
}
