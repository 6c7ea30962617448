//! The torture harness's reference model: what every byte of the array must
//! read back as while it runs, and what each 512-byte sector may hold after a
//! power cut. It decides what is allowed and nothing else; it never touches
//! the engine.
//!
//! A sector's durable value is what it held at the last completed flush (or
//! FUA write covering it). Every write since is kept as a sector image with a
//! mask of the bytes it set. After a power cut a member's volatile cache keeps,
//! drops or tears each unflushed write at sector granularity in any order, so
//! a sector may hold its durable value or any written image; where writes set
//! only part of a sector, each byte may hold its durable value or any value
//! written to it. Bytes the harness cannot know (a write that failed beyond
//! the level's tolerance, md's write hole) are marked unknown and match
//! anything until written again.

use raidlab_devices::SectorMask;
use std::collections::BTreeMap;

pub const SECTOR: usize = 512;

/// The end of a sector's list of images.
const NONE: u32 = u32::MAX;

/// One write to a sector since its last flush. Inline, not boxed: a sector
/// written costs the harness at most its list's allocation, not two more.
#[derive(Clone)]
struct Image {
    data: [u8; SECTOR],
    /// The bytes this write set (a bool each made the image twice the size).
    held: SectorMask,
}

pub struct Model {
    /// Every acknowledged write applied: what reads must return.
    pub current: Vec<u8>,
    durable: Vec<u8>,
    /// Sector -> its images in `images` since the last flush, newest last
    /// (the first image's index and the last's).
    pending: BTreeMap<usize, (u32, u32)>,
    /// Every image since the last flush, each with the index of the next
    /// image of its sector (`NONE` for the last): one buffer kept from flush
    /// to flush, not a list allocated per sector written.
    images: Vec<(Image, u32)>,
    unknown: Vec<bool>,
}

/// What [`Model::check_after_cut`] found wrong, first sector only.
#[derive(Debug)]
pub struct Wrong {
    pub sector: usize,
    pub durable_lost: bool,
    pub writes_since_flush: usize,
}

impl Wrong {
    /// For a violation: `count` wrong sectors, this the first.
    pub fn describe(&self, count: usize) -> String {
        format!(
            "{count} sector(s) hold a value never allowed there; first: array sector {} (byte {}), {}",
            self.sector,
            self.sector * SECTOR,
            if self.durable_lost {
                "durable (flushed) data lost".to_string()
            } else {
                format!(
                    "neither the durable value nor any of the {} written since the last flush",
                    self.writes_since_flush
                )
            }
        )
    }
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The contents would drown any message; the shape is what helps.
        f.debug_struct("Model")
            .field("bytes", &self.current.len())
            .field("pending_sectors", &self.pending.len())
            .finish()
    }
}

impl Model {
    /// An array created over zeroed members: zeros, durably.
    pub fn new(size: usize) -> Model {
        Model {
            current: vec![0; size],
            durable: vec![0; size],
            pending: BTreeMap::new(),
            images: Vec::new(),
            unknown: vec![false; size],
        }
    }

    pub fn size(&self) -> usize {
        self.current.len()
    }

    /// An acknowledged write (zeros for write-zeroes and a trim that zeroes).
    pub fn write(&mut self, data: &[u8], offset: usize) {
        self.current[offset..offset + data.len()].copy_from_slice(data);
        self.unknown[offset..offset + data.len()].fill(false);
        let end = offset + data.len();
        let mut pos = offset;
        while pos < end {
            let s = pos / SECTOR;
            let within = pos % SECTOR;
            let n = (SECTOR - within).min(end - pos);
            let base = s * SECTOR;
            let mut img = Image {
                data: [0; SECTOR],
                held: SectorMask::EMPTY,
            };
            let have = SECTOR.min(self.size() - base);
            img.data[..have].copy_from_slice(&self.current[base..base + have]);
            img.held.set(within, within + n, true);
            let at = self.images.len() as u32;
            self.images.push((img, NONE));
            match self.pending.get_mut(&s) {
                Some((_, last)) => {
                    self.images[*last as usize].1 = at;
                    *last = at;
                }
                None => {
                    self.pending.insert(s, (at, at));
                }
            }
            pos += n;
        }
    }

    /// A write that failed: its bytes may hold anything from now on (beyond the
    /// level's tolerance only; within it every write must succeed).
    pub fn forget(&mut self, offset: usize, len: usize) {
        self.unknown[offset..offset + len].fill(true);
    }

    /// A completed flush: everything acknowledged is durable.
    pub fn flush(&mut self) {
        for &s in self.pending.keys() {
            let r = s * SECTOR..(s + 1) * SECTOR;
            self.durable[r.clone()].copy_from_slice(&self.current[r]);
        }
        self.pending.clear();
        self.images.clear();
    }

    /// The images of sector `s` since the last flush that still hold a byte
    /// (a FUA write over a sector's bytes clears them from its images).
    fn images_of(&self, s: usize) -> Vec<&Image> {
        let mut out = Vec::new();
        let mut at = self.pending.get(&s).map_or(NONE, |&(first, _)| first);
        while at != NONE {
            let (img, next) = &self.images[at as usize];
            if !img.held.holds_none() {
                out.push(img);
            }
            at = *next;
        }
        out
    }

    /// A completed FUA write of `offset..offset+len`: those bytes are durable.
    pub fn fua(&mut self, offset: usize, len: usize) {
        self.durable[offset..offset + len].copy_from_slice(&self.current[offset..offset + len]);
        let (first, last) = (offset / SECTOR, (offset + len - 1) / SECTOR);
        for s in first..=last {
            let Some(&(mut at, _)) = self.pending.get(&s) else {
                continue;
            };
            let base = s * SECTOR;
            let lo = offset.max(base) - base;
            let hi = (offset + len).min(base + SECTOR) - base;
            let mut left = false;
            while at != NONE {
                let (img, next) = &mut self.images[at as usize];
                img.held.set(lo, hi, false);
                left |= !img.held.holds_none();
                at = *next;
            }
            if !left {
                self.pending.remove(&s);
            }
        }
    }

    /// Sectors written since the last flush.
    pub fn pending_sectors(&self) -> impl Iterator<Item = usize> + '_ {
        self.pending.keys().copied()
    }

    /// Mark sector `s` unknown (md's write hole there, or a log's documented
    /// limit): any contents are allowed once.
    pub fn allow_any(&mut self, s: usize) {
        let r = s * SECTOR..((s + 1) * SECTOR).min(self.size());
        self.unknown[r].fill(true);
    }

    /// Whether the bytes read at `offset` are what the model says, byte index
    /// of the first difference otherwise.
    pub fn first_difference(&self, got: &[u8], offset: usize) -> Option<usize> {
        // Nearly every read is right: one memcmp answers it, and only a
        // difference (maybe in bytes allowed any value) is looked at byte by
        // byte. Whole-array reads after every restart made this the
        // harness's hottest loop.
        if got == &self.current[offset..offset + got.len()] {
            return None;
        }
        (0..got.len()).find(|&i| !self.unknown[offset + i] && got[i] != self.current[offset + i])
    }

    /// After a power cut: every sector holds its durable value or one written
    /// since (per byte where writes were partial). Returns the first wrong
    /// sector and how many are wrong.
    pub fn check_after_cut(&self, got: &[u8]) -> Option<(Wrong, usize)> {
        let mut first = None;
        let mut count = 0;
        for (s, sector) in got.chunks(SECTOR).enumerate() {
            let r = s * SECTOR..s * SECTOR + sector.len();
            // The memcmp first: nearly every sector holds its durable value.
            if sector == &self.durable[r.clone()] || self.unknown[r.clone()].iter().all(|&u| u) {
                continue;
            }
            let imgs = self.images_of(s);
            let ok = if imgs.is_empty() {
                (0..sector.len())
                    .all(|i| self.unknown[r.start + i] || sector[i] == self.durable[r.start + i])
            } else if imgs.iter().all(|i| i.held.holds_all()) {
                // Whole-sector writes land whole: the sector is one of
                // them, or the durable value, in every byte a failed
                // write did not leave unknown.
                let is = |img: &[u8]| {
                    (0..sector.len()).all(|i| self.unknown[r.start + i] || img[i] == sector[i])
                };
                imgs.iter().any(|i| is(&i.data[..sector.len()])) || is(&self.durable[r.clone()])
            } else {
                (0..sector.len()).all(|i| {
                    self.unknown[r.start + i]
                        || sector[i] == self.durable[r.start + i]
                        || imgs
                            .iter()
                            .any(|m| m.held.holds(i) && m.data[i] == sector[i])
                })
            };
            if !ok {
                count += 1;
                first.get_or_insert(Wrong {
                    sector: s,
                    durable_lost: imgs.is_empty(),
                    writes_since_flush: imgs.len(),
                });
            }
        }
        first.map(|w| (w, count))
    }

    /// After a power cut and the array's recovery: what it reads now is what
    /// it holds, durably (the check passed, or the bytes were allowed any
    /// value).
    pub fn settle(&mut self, got: &[u8]) {
        self.current.copy_from_slice(got);
        self.durable.copy_from_slice(got);
        self.pending.clear();
        self.images.clear();
        self.unknown.fill(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_allows_old_or_new_and_nothing_else() {
        let mut m = Model::new(4 * SECTOR);
        m.write(&[1; SECTOR], 0);
        m.flush();
        m.write(&[2; SECTOR], 0);
        let mut got = vec![0u8; 4 * SECTOR];
        got[..SECTOR].fill(1);
        assert!(m.check_after_cut(&got).is_none());
        got[..SECTOR].fill(2);
        assert!(m.check_after_cut(&got).is_none());
        got[..SECTOR].fill(3);
        assert!(m.check_after_cut(&got).is_some());
        got[..SECTOR].fill(2);
        got[SECTOR] = 9;
        let (w, n) = m.check_after_cut(&got).unwrap();
        assert!(w.durable_lost && w.sector == 1 && n == 1);
    }

    /// A whole-sector write, then a failed write over the sector's tail
    /// (beyond the tolerance): the tail may hold anything, the rest is still
    /// one whole image (seed 7 run 648, RAID 0: the failed write's
    /// read-modify-write put the acknowledged bytes back before its own).
    #[test]
    fn a_failed_write_leaves_only_its_own_bytes_unknown_in_a_whole_sector() {
        let mut m = Model::new(SECTOR);
        m.write(&[2; SECTOR], 0);
        m.forget(400, 112);
        let mut got = vec![2u8; SECTOR];
        got[400..].fill(9);
        assert!(m.check_after_cut(&got).is_none());
        got[..400].fill(0);
        assert!(
            m.check_after_cut(&got).is_none(),
            "the durable value, and the tail"
        );
        got[10] = 2;
        assert!(
            m.check_after_cut(&got).is_some(),
            "no sector mixes two images"
        );
    }

    #[test]
    fn fua_makes_its_bytes_durable() {
        let mut m = Model::new(2 * SECTOR);
        m.write(&[5; SECTOR], 0);
        m.fua(0, SECTOR);
        let got = vec![0u8; 2 * SECTOR];
        assert!(m.check_after_cut(&got).is_some());
    }

    #[test]
    fn partial_writes_are_checked_per_byte() {
        let mut m = Model::new(SECTOR);
        m.write(&[7; 10], 100);
        m.write(&[8; 10], 300);
        let mut got = vec![0u8; SECTOR];
        got[300..310].fill(8);
        assert!(m.check_after_cut(&got).is_none());
        got[0] = 1;
        assert!(m.check_after_cut(&got).is_some());
    }
}
