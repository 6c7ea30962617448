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
    /// Whether `unknown` may hold a true (else it need not be cleared).
    any_unknown: bool,
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
            any_unknown: self.any_unknown,
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
                any_unknown: p.any_unknown,
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
        if m.any_unknown {
            refill(&mut m.unknown, size, false);
        } else {
            // All false already: only a longer tail needs setting.
            m.unknown.resize(size, false);
        }
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
        if self.any_unknown {
            self.unknown[offset..end].fill(false);
        }
        if len == 0 {
            return;
        }
        let (first, last) = (offset / SECTOR, (end - 1) / SECTOR);
        // Every sector's image in one copy (the last padded with zeros past
        // the array's end), not a copy and a mask built per sector.
        let from = first * SECTOR;
        let to = ((last + 1) * SECTOR).min(self.size());
        self.image_bytes.extend_from_slice(&self.current[from..to]);
        let padded = self.image_bytes.len() + (last + 1) * SECTOR - to;
        self.image_bytes.resize(padded, 0);
        let mut whole = SectorMask::EMPTY;
        whole.set(0, SECTOR, true);
        for s in first..=last {
            let held = if s == first || s == last {
                let mut m = SectorMask::EMPTY;
                m.set(
                    offset.max(s * SECTOR) - s * SECTOR,
                    end.min((s + 1) * SECTOR) - s * SECTOR,
                    true,
                );
                m
            } else {
                whole
            };
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

    /// Sectors written since the last flush, in the order first written
    /// (every caller's use is a set: sorting them was a fifth of a long run
    /// beyond its level's tolerance, whose failed flushes keep them all).
    pub fn pending_sectors(&self) -> impl Iterator<Item = usize> + '_ {
        self.listed
            .iter()
            .map(|&s| s as usize)
            .filter(|&s| self.heads[s].0 != NONE)
    }

    /// Mark sector `s` unknown (md's write hole there, or a log's documented
    /// limit): any contents are allowed once.
    pub fn allow_any(&mut self, s: usize) {
        let r = s * SECTOR..((s + 1) * SECTOR).min(self.size());
        self.unknown[r].fill(true);
        self.any_unknown = true;
    }

    /// `super::trace::digest` of `current`, the whole array as it must read.
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
        // Nearly every sector holds its durable value: a memcmp of eight at
        // once passes them, and only a group that differs goes sector by
        // sector.
        const GROUP: usize = 8 * SECTOR;
        for (g, group) in got.chunks(GROUP).enumerate() {
            let base = g * GROUP;
            if group == &self.durable[base..base + group.len()] {
                continue;
            }
            for (i, sector) in group.chunks(SECTOR).enumerate() {
                let s = base / SECTOR + i;
                if let Some(writes) = self.sector_wrong(s, sector, &mut imgs) {
                    count += 1;
                    first.get_or_insert(Wrong {
                        sector: s,
                        durable_lost: writes == 0,
                        writes_since_flush: writes,
                    });
                }
            }
        }
        first.map(|w| (w, count))
    }

    /// Whether sector `s` may not hold `sector` after a power cut: then the
    /// number of its writes since the last flush. `imgs` is scratch.
    fn sector_wrong(&self, s: usize, sector: &[u8], imgs: &mut Vec<usize>) -> Option<usize> {
        let r = s * SECTOR..s * SECTOR + sector.len();
        let unknown = &self.unknown[r.clone()];
        let durable = &self.durable[r.clone()];
        if sector == durable || unknown.iter().all(|&u| u) {
            return None;
        }
        // With no byte unknown, a sector is one of the allowed images
        // exactly: a memcmp, not a test per byte.
        let none_unknown = !self.any_unknown || !unknown.contains(&true);
        self.images_of(s, imgs);
        let ok = if imgs.is_empty() {
            !none_unknown && (0..sector.len()).all(|i| unknown[i] || sector[i] == durable[i])
        } else if imgs.iter().all(|&i| self.images[i].held.holds_all()) {
            // Whole-sector writes land whole: the sector is one of
            // them, or the durable value, in every byte a failed
            // write did not leave unknown.
            let is = |img: &[u8]| {
                img == sector
                    || (!none_unknown
                        && (0..sector.len()).all(|i| unknown[i] || img[i] == sector[i]))
            };
            imgs.iter().any(|&i| is(&self.image(i)[..sector.len()])) || is(durable)
        } else {
            (0..sector.len()).all(|i| {
                unknown[i]
                    || sector[i] == durable[i]
                    || imgs
                        .iter()
                        .any(|&m| self.images[m].held.holds(i) && self.image(m)[i] == sector[i])
            })
        };
        (!ok).then_some(imgs.len())
    }

    /// After a power cut and the array's recovery: what it reads now (`got`,
    /// which passed [`Model::check_after_cut`], taken as the model's own) is
    /// what it holds, durably. Gives back the buffer it replaced, for the
    /// next read.
    pub fn settle(&mut self, got: Vec<u8>) -> Vec<u8> {
        assert_eq!(got.len(), self.size(), "a read of the whole array");
        let old = std::mem::replace(&mut self.current, got);
        if self.any_unknown {
            // An unknown byte may have come back as anything.
            self.crcs.all_changed();
            self.durable.copy_from_slice(&self.current);
            self.unknown.fill(false);
            self.any_unknown = false;
        } else {
            // The check passed, so a sector not written since the last
            // flush holds its durable value, which is its current one too:
            // only the sectors written since can differ from before (copying
            // the whole array into `durable` at every power cut, and the
            // CRC of all of it again, were most of a settle).
            for &s in &self.listed {
                let r = s as usize * SECTOR..(s as usize + 1) * SECTOR;
                self.durable[r.clone()].copy_from_slice(&self.current[r.clone()]);
                self.crcs.changed(r.start, SECTOR);
            }
        }
        debug_assert!(self.durable == self.current, "settled durably");
        self.clear_pending();
        old
    }
}

#[cfg(test)]
mod tests;
