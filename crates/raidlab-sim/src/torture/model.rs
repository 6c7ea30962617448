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

use super::digest::BlockCrcs;
use raidlab_devices::SectorMask;
use std::cell::RefCell;

pub const SECTOR: usize = 512;

/// The end of a sector's list of images, and a sector with none.
const NONE: u32 = u32::MAX;

/// One write to a sector since its last flush: the bytes it set (its
/// sector's whole image sits in [`Model::image_bytes`] at the same index)
/// and the index of its sector's next image.
#[derive(Clone, Copy)]
struct Image {
    held: SectorMask,
    next: u32,
}

pub struct Model {
    /// Every acknowledged write applied: what reads must return.
    pub current: Vec<u8>,
    durable: Vec<u8>,
    /// Per sector, its first and last image since the last flush (`NONE`
    /// first: none). A slot a sector, not a map: a map entry per sector
    /// written was an allocation and a tree walk per write.
    heads: Vec<(u32, u32)>,
    /// The sectors given images since the last flush, each once (one a FUA
    /// write emptied stays listed, with `NONE` first), so a flush visits
    /// only them.
    listed: Vec<u32>,
    is_listed: Vec<bool>,
    /// Every image since the last flush; kept from flush to flush.
    images: Vec<Image>,
    /// The images' sector contents, [`SECTOR`] bytes each, back to back: a
    /// write copies a sector in, with no image built and moved.
    image_bytes: Vec<u8>,
    unknown: Vec<bool>,
    /// Whether any byte of `unknown` may be set: after a restart nearly
    /// none is, and clearing the whole map each time was a pass over it.
    any_unknown: bool,
    /// The CRCs of `current`'s blocks, for its digest.
    crcs: BlockCrcs,
}

/// A model's buffers, kept for the next model made on the thread: a model
/// per run made three array-sized buffers and an image list grow from
/// nothing, each run.
struct Parts {
    current: Vec<u8>,
    durable: Vec<u8>,
    heads: Vec<(u32, u32)>,
    listed: Vec<u32>,
    is_listed: Vec<bool>,
    images: Vec<Image>,
    image_bytes: Vec<u8>,
    unknown: Vec<bool>,
    crcs: BlockCrcs,
}

thread_local! {
    static SPARE: RefCell<Option<Parts>> = const { RefCell::new(None) };
}

impl Drop for Model {
    fn drop(&mut self) {
        let parts = Parts {
            current: std::mem::take(&mut self.current),
            durable: std::mem::take(&mut self.durable),
            heads: std::mem::take(&mut self.heads),
            listed: std::mem::take(&mut self.listed),
            is_listed: std::mem::take(&mut self.is_listed),
            images: std::mem::take(&mut self.images),
            image_bytes: std::mem::take(&mut self.image_bytes),
            unknown: std::mem::take(&mut self.unknown),
            crcs: std::mem::take(&mut self.crcs),
        };
        // The bigger one is kept: a run's placeholder model is empty.
        let _ = SPARE.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.as_ref().map_or(0, |p| p.current.capacity()) <= parts.current.capacity() {
                *s = Some(parts);
            }
        });
    }
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
            .field("pending_sectors", &self.pending_sectors().count())
            .finish()
    }
}

/// `v` holding `len` copies of `x` and nothing else, in its own allocation.
fn refill<T: Clone>(v: &mut Vec<T>, len: usize, x: T) {
    v.clear();
    v.resize(len, x);
}

impl Model {
    /// An array created over zeroed members: zeros, durably.
    pub fn new(size: usize) -> Model {
        // An empty model (a run's placeholder until its array exists)
        // leaves the buffers to the real one.
        let p = SPARE
            .try_with(|s| s.borrow_mut().take_if(|_| size > 0))
            .ok()
            .flatten();
        let mut m = match p {
            Some(p) => Model {
                current: p.current,
                durable: p.durable,
                heads: p.heads,
                listed: p.listed,
                is_listed: p.is_listed,
                images: p.images,
                image_bytes: p.image_bytes,
                unknown: p.unknown,
                any_unknown: false,
                crcs: p.crcs,
            },
            None => Model {
                current: Vec::new(),
                durable: Vec::new(),
                heads: Vec::new(),
                listed: Vec::new(),
                is_listed: Vec::new(),
                images: Vec::new(),
                image_bytes: Vec::new(),
                unknown: Vec::new(),
                any_unknown: false,
                crcs: BlockCrcs::default(),
            },
        };
        let sectors = size.div_ceil(SECTOR);
        refill(&mut m.current, size, 0);
        refill(&mut m.durable, size, 0);
        refill(&mut m.heads, sectors, (NONE, NONE));
        m.listed.clear();
        refill(&mut m.is_listed, sectors, false);
        m.images.clear();
        m.image_bytes.clear();
        refill(&mut m.unknown, size, false);
        m.any_unknown = false;
        m.crcs.reset(size);
        m
    }

    pub fn size(&self) -> usize {
        self.current.len()
    }

    /// An acknowledged write.
    pub fn write(&mut self, data: &[u8], offset: usize) {
        self.apply(offset, data.len(), |c| c.copy_from_slice(data));
    }

    /// An acknowledged write of zeros (write-zeroes, a trim that zeroes).
    pub fn write_zeroes(&mut self, offset: usize, len: usize) {
        self.apply(offset, len, |c| c.fill(0));
    }

    /// `offset..offset + len` set by `set` and kept as a sector image per
    /// sector it touches.
    fn apply(&mut self, offset: usize, len: usize, set: impl FnOnce(&mut [u8])) {
        let end = offset + len;
        set(&mut self.current[offset..end]);
        self.crcs.changed(offset, len);
        self.unknown[offset..end].fill(false);
        let mut pos = offset;
        while pos < end {
            let s = pos / SECTOR;
            let within = pos % SECTOR;
            let n = (SECTOR - within).min(end - pos);
            let base = s * SECTOR;
            let have = SECTOR.min(self.size() - base);
            self.image_bytes
                .extend_from_slice(&self.current[base..base + have]);
            self.image_bytes
                .resize(self.image_bytes.len() + SECTOR - have, 0);
            let mut held = SectorMask::EMPTY;
            held.set(within, within + n, true);
            let at = self.images.len() as u32;
            self.images.push(Image { held, next: NONE });
            let head = &mut self.heads[s];
            if head.0 == NONE {
                *head = (at, at);
                if !self.is_listed[s] {
                    self.is_listed[s] = true;
                    self.listed.push(s as u32);
                }
            } else {
                self.images[head.1 as usize].next = at;
                head.1 = at;
            }
            pos += n;
        }
    }

    /// A write that failed: its bytes may hold anything from now on (beyond the
    /// level's tolerance only; within it every write must succeed).
    pub fn forget(&mut self, offset: usize, len: usize) {
        self.unknown[offset..offset + len].fill(true);
        self.any_unknown = true;
    }

    /// No sector has images: what a flush or a settle leaves.
    fn clear_pending(&mut self) {
        for &s in &self.listed {
            self.heads[s as usize] = (NONE, NONE);
            self.is_listed[s as usize] = false;
        }
        self.listed.clear();
        self.images.clear();
        self.image_bytes.clear();
    }

    /// A completed flush: everything acknowledged is durable.
    pub fn flush(&mut self) {
        for &s in &self.listed {
            let s = s as usize;
            if self.heads[s].0 != NONE {
                let r = s * SECTOR..(s + 1) * SECTOR;
                self.durable[r.clone()].copy_from_slice(&self.current[r]);
            }
        }
        self.clear_pending();
    }

    /// The images of sector `s` since the last flush that still hold a byte
    /// (a FUA write over a sector's bytes clears them from its images), by
    /// index, into `out`.
    fn images_of(&self, s: usize, out: &mut Vec<usize>) {
        out.clear();
        let mut at = self.heads[s].0;
        while at != NONE {
            let img = &self.images[at as usize];
            if !img.held.holds_none() {
                out.push(at as usize);
            }
            at = img.next;
        }
    }

    /// The bytes of image `i`.
    fn image(&self, i: usize) -> &[u8] {
        &self.image_bytes[i * SECTOR..(i + 1) * SECTOR]
    }

    /// A completed FUA write of `offset..offset+len`: those bytes are durable.
    pub fn fua(&mut self, offset: usize, len: usize) {
        self.durable[offset..offset + len].copy_from_slice(&self.current[offset..offset + len]);
        let (first, last) = (offset / SECTOR, (offset + len - 1) / SECTOR);
        for s in first..=last {
            let mut at = self.heads[s].0;
            if at == NONE {
                continue;
            }
            let base = s * SECTOR;
            let lo = offset.max(base) - base;
            let hi = (offset + len).min(base + SECTOR) - base;
            let mut left = false;
            while at != NONE {
                let img = &mut self.images[at as usize];
                img.held.set(lo, hi, false);
                left |= !img.held.holds_none();
                at = img.next;
            }
            if !left {
                self.heads[s] = (NONE, NONE);
            }
        }
    }

    /// Sectors written since the last flush, in order.
    pub fn pending_sectors(&self) -> impl Iterator<Item = usize> + '_ {
        let mut p: Vec<usize> = self
            .listed
            .iter()
            .map(|&s| s as usize)
            .filter(|&s| self.heads[s].0 != NONE)
            .collect();
        p.sort_unstable();
        p.into_iter()
    }

    /// Mark sector `s` unknown (md's write hole there, or a log's documented
    /// limit): any contents are allowed once.
    pub fn allow_any(&mut self, s: usize) {
        let r = s * SECTOR..((s + 1) * SECTOR).min(self.size());
        self.unknown[r].fill(true);
        self.any_unknown = true;
    }

    /// [`super::trace::digest`] of `current`, the whole array as it must read.
    pub fn digest(&mut self) -> u64 {
        self.crcs.digest(&self.current)
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
        let mut imgs = Vec::new();
        for (s, sector) in got.chunks(SECTOR).enumerate() {
            let r = s * SECTOR..s * SECTOR + sector.len();
            // The memcmp first: nearly every sector holds its durable value.
            if sector == &self.durable[r.clone()] || self.unknown[r.clone()].iter().all(|&u| u) {
                continue;
            }
            self.images_of(s, &mut imgs);
            let ok = if imgs.is_empty() {
                (0..sector.len())
                    .all(|i| self.unknown[r.start + i] || sector[i] == self.durable[r.start + i])
            } else if imgs.iter().all(|&i| self.images[i].held.holds_all()) {
                // Whole-sector writes land whole: the sector is one of
                // them, or the durable value, in every byte a failed
                // write did not leave unknown.
                let is = |img: &[u8]| {
                    (0..sector.len()).all(|i| self.unknown[r.start + i] || img[i] == sector[i])
                };
                imgs.iter().any(|&i| is(&self.image(i)[..sector.len()]))
                    || is(&self.durable[r.clone()])
            } else {
                (0..sector.len()).all(|i| {
                    self.unknown[r.start + i]
                        || sector[i] == self.durable[r.start + i]
                        || imgs
                            .iter()
                            .any(|&m| self.images[m].held.holds(i) && self.image(m)[i] == sector[i])
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

    /// After a power cut and the array's recovery: what it reads now (`got`,
    /// taken as the model's own) is what it holds, durably (the check passed,
    /// or the bytes were allowed any value). Gives back the buffer it
    /// replaced, for the next read.
    pub fn settle(&mut self, got: Vec<u8>) -> Vec<u8> {
        assert_eq!(got.len(), self.size(), "a read of the whole array");
        let old = std::mem::replace(&mut self.current, got);
        self.crcs.all_changed();
        self.durable.copy_from_slice(&self.current);
        self.clear_pending();
        if self.any_unknown {
            self.unknown.fill(false);
            self.any_unknown = false;
        }
        old
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

    /// A sector a FUA write emptied leaves the pending list, comes back
    /// once when written again, and the list is in sector order.
    #[test]
    fn pending_sectors_follow_writes_fua_and_flush() {
        let mut m = Model::new(8 * SECTOR);
        m.write(&[1; 10], 5 * SECTOR);
        m.write(&[2; SECTOR + 1], SECTOR);
        assert_eq!(m.pending_sectors().collect::<Vec<_>>(), [1, 2, 5]);
        m.fua(5 * SECTOR, SECTOR);
        assert_eq!(m.pending_sectors().collect::<Vec<_>>(), [1, 2]);
        m.write(&[3; 1], 5 * SECTOR + 100);
        m.write(&[4; 1], 5 * SECTOR + 200);
        assert_eq!(m.pending_sectors().collect::<Vec<_>>(), [1, 2, 5]);
        let mut got = vec![0u8; 8 * SECTOR];
        got[5 * SECTOR..5 * SECTOR + 10].fill(1);
        got[5 * SECTOR + 200] = 4;
        assert!(
            m.check_after_cut(&got).is_none(),
            "the FUA bytes, one write"
        );
        m.flush();
        assert_eq!(m.pending_sectors().count(), 0);
        got[5 * SECTOR + 100] = 3;
        got[SECTOR..2 * SECTOR + 1].fill(2);
        assert!(m.check_after_cut(&got).is_none());
        assert!(m.check_after_cut(&vec![0u8; 8 * SECTOR]).is_some());
    }

    /// A model made after another was dropped on the thread (its buffers
    /// reused) is all zeros, durably, with nothing pending or unknown.
    #[test]
    fn a_new_model_starts_clean_after_a_used_one() {
        let mut m = Model::new(4 * SECTOR);
        m.write(&[9; 3 * SECTOR], 10);
        m.forget(0, 7);
        drop(m);
        let m = Model::new(4 * SECTOR);
        assert_eq!(m.pending_sectors().count(), 0);
        assert_eq!(m.first_difference(&[0; 4 * SECTOR], 0), None);
        assert_eq!(m.first_difference(&[1; 7], 0), Some(0));
        assert!(m.check_after_cut(&[0; 4 * SECTOR]).is_none());
    }

    /// The model's digest follows its writes, zeroes and settles.
    #[test]
    fn the_digest_is_that_of_the_current_bytes() {
        use super::super::trace::digest;
        let mut m = Model::new(5 * 4096 + 3 * SECTOR);
        m.write(&[1; 3], 4095);
        assert_eq!(m.digest(), digest(&m.current));
        m.write_zeroes(4094, 2);
        m.write(&[2; 1500], 5 * 4096 - 10);
        assert_eq!(m.digest(), digest(&m.current));
        let mut got = m.current.clone();
        got[77] = 9;
        m.settle(got);
        assert_eq!(m.digest(), digest(&m.current));
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
