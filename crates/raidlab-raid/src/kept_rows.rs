//! Rows kept up to date in memory after a write, as md keeps an idle stripe
//! head's pages (`R5_UPTODATE`) until its stripe cache reuses the head for
//! another stripe: a later write of the row then reads nothing from the
//! members, since the planner (`planner/parity.rs`) takes the row's blocks
//! from here instead (`Compute::Kept`), and the write's own `Step::Keep`
//! leaves the row here again with its new contents.
//!
//! A row is one page ([`ROW`] bytes) at one member offset on every member of
//! a parity array: the unit md's stripe heads hold. Of a row, the pages a
//! write read or wrote are known (md's `R5_UPTODATE`): every page after a
//! reconstruct-write, the data written and the parity after a
//! read-modify-write. A known page is always what its member holds there.
//!
//! It decides which rows stay (the least recently used go first, never one
//! a write in flight has pinned) and which pages of a row are known. It never
//! decides what a write reads or plans (the planner asks it), never does
//! member I/O, and holds nothing a member does not hold too: the write path
//! forgets the rows a write changes without keeping them, and anything that
//! could make a member differ from a kept row (a failure, a trim, a rebuild,
//! a reshape) clears it (`array/kept.rs` says where).

use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The bytes of one member a row holds: md's stripe head page.
pub const ROW: u64 = 4096;

/// md's default `stripe_cache_size`: the stripe heads md keeps (256 rows).
pub const MD_ROWS: usize = 256;

/// md's largest `stripe_cache_size` (`raid5_set_cache_size` refuses more):
/// 128 MiB a member.
pub const MOST_ROWS: usize = 32768;

#[derive(Debug)]
struct Row {
    /// Every member's page, member after member (zeros where not known).
    bytes: Box<[u8]>,
    /// Which members' pages are known, a bit a member.
    known: u64,
    /// The row's place in the use order (its key in `Inner::order`).
    used: u64,
    /// Writes in flight that will fill from this row.
    pins: u32,
    /// Forgotten while pinned ([`KeptRows::clear`] beside a write that
    /// holds the row's stripe lock): no new plan finds it, the write that
    /// pinned it still fills from it (the row was what the members held
    /// when that write took its locks, and no one else writes the row
    /// meanwhile), and it goes at its last unpin.
    doomed: bool,
}

#[derive(Debug, Default)]
struct Inner {
    /// By row index (an Fx hash: a lookup on every parity write).
    rows: FxHashMap<u64, Row>,
    /// Use stamp to row index, least recently used first.
    order: BTreeMap<u64, u64>,
    clock: u64,
    /// Member ranges a write filled from here since the start.
    hits: u64,
}

/// The rows kept for one running array.
#[derive(Debug)]
pub struct KeptRows {
    members: usize,
    capacity: usize,
    inner: Mutex<Inner>,
}

/// Member `member`'s page in a row's bytes.
fn page(member: usize) -> std::ops::Range<usize> {
    member * ROW as usize..(member + 1) * ROW as usize
}

/// Member `member`'s bit in a row's mask (none past the 64th member, for
/// which nothing is kept).
fn bit(member: usize) -> u64 {
    1u64.checked_shl(member as u32).unwrap_or(0)
}

/// The members `pages` gives (`Some`), a bit a member: a write's kept pages
/// (`plan::KeptRow`) or their bytes.
pub fn given<T>(pages: &[Option<T>]) -> u64 {
    pages
        .iter()
        .enumerate()
        .filter(|(_, p)| p.is_some())
        .fold(0, |b, (m, _)| b | bit(m))
}

impl Inner {
    /// Let row `r` go, with its place in the use order.
    fn drop_row(&mut self, r: u64) {
        if let Some(row) = self.rows.remove(&r) {
            self.order.remove(&row.used);
        }
    }

    /// Whether member `member`'s bytes `[moff, moff + len)` (whole rows)
    /// are all known; a doomed row's only if `doomed_too`.
    fn knows(&self, member: usize, moff: u64, len: u64, doomed_too: bool) -> bool {
        bit(member) != 0
            && KeptRows::rows_of(moff, len).is_some_and(|mut rs| {
                rs.all(|r| {
                    self.rows.get(&r).is_some_and(|row| {
                        (doomed_too || !row.doomed) && row.known & bit(member) != 0
                    })
                })
            })
    }
}

impl KeptRows {
    /// Room for `capacity` rows of `members` members each; none kept for
    /// arrays of more than 64 members.
    pub fn new(members: usize, capacity: usize) -> KeptRows {
        KeptRows {
            members,
            capacity: if members <= 64 { capacity } else { 0 },
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere cannot leave a row half written: every change
        // is made whole before the lock goes.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The rows `[moff, moff + len)` of the members lies in, if whole rows.
    fn rows_of(moff: u64, len: u64) -> Option<std::ops::Range<u64>> {
        (len > 0 && moff % ROW == 0 && len % ROW == 0).then(|| moff / ROW..(moff + len) / ROW)
    }

    /// The members whose bytes `[moff, moff + len)` are all known, a bit a
    /// member: what a write of the segment need not read (one look for
    /// every member of the row).
    pub fn known(&self, moff: u64, len: u64) -> u64 {
        let Some(rows) = Self::rows_of(moff, len) else {
            return 0;
        };
        let inner = self.lock();
        rows.into_iter()
            .map(|r| {
                inner
                    .rows
                    .get(&r)
                    .filter(|row| !row.doomed)
                    .map_or(0, |row| row.known)
            })
            .fold(u64::MAX, |all, k| all & k)
    }

    /// Pin the rows of `ranges` (member, offset, length) so that none is
    /// let go for room while the write that fills from them runs; false
    /// (nothing pinned) if a page is no longer known. Undone by
    /// [`KeptRows::unpin`].
    pub fn pin(&self, ranges: &[(usize, u64, u64)]) -> bool {
        let mut inner = self.lock();
        if !ranges.iter().all(|&(m, o, n)| inner.knows(m, o, n, false)) {
            return false;
        }
        for &(_, o, n) in ranges {
            for r in Self::rows_of(o, n).into_iter().flatten() {
                if let Some(row) = inner.rows.get_mut(&r) {
                    row.pins += 1;
                }
            }
        }
        true
    }

    /// Undo one [`KeptRows::pin`] of `ranges`.
    pub fn unpin(&self, ranges: &[(usize, u64, u64)]) {
        let mut inner = self.lock();
        for &(_, o, n) in ranges {
            for r in Self::rows_of(o, n).into_iter().flatten() {
                let gone = inner.rows.get_mut(&r).is_some_and(|row| {
                    row.pins = row.pins.saturating_sub(1);
                    row.doomed && row.pins == 0
                });
                if gone {
                    inner.drop_row(r);
                }
            }
        }
    }

    /// Copy member `member`'s known bytes at `moff` (whole rows' part of
    /// one member) into `dst`; false if they are not all known.
    /// A row forgotten while pinned still fills (see `Row::doomed`).
    pub fn fill(&self, member: usize, moff: u64, dst: &mut [u8]) -> bool {
        let mut inner = self.lock();
        if !inner.knows(member, moff, dst.len() as u64, true) {
            return false;
        }
        for (i, chunk) in dst.chunks_mut(ROW as usize).enumerate() {
            let r = moff / ROW + i as u64;
            if let Some(row) = inner.rows.get(&r) {
                chunk.copy_from_slice(&row.bytes[page(member)]);
            }
        }
        inner.hits += 1;
        true
    }

    /// Make the pages of `[moff, moff + len)` (whole rows) known with
    /// `pages[m]`, member `m`'s new bytes there, for the members given;
    /// the others' pages stay as they were. Room for a new row is made by
    /// letting the least recently used unpinned row go. A range that is not
    /// whole rows is forgotten for the members given.
    pub fn keep(&self, moff: u64, len: u64, pages: &[Option<&[u8]>]) {
        let fits =
            pages.len() == self.members && pages.iter().flatten().all(|p| p.len() as u64 == len);
        self.put(moff, len, fits.then_some(pages), given(pages));
    }

    /// [`KeptRows::keep`] for an executor that moves no parity bytes (the
    /// simulator's device models): the pages of the members in `members`
    /// (a bit a member) count as known, so that the planner decides as it
    /// would on real members, but their bytes are not the members'. Only
    /// for an array whose plans never fill real buffers from them.
    pub fn keep_unmodelled(&self, moff: u64, len: u64, members: u64) {
        self.put(moff, len, Some(&[]), members);
    }

    /// The pages of members `given` known, with `pages`' bytes where there
    /// are some; `None` (pages that do not fit the rows) or a range that is
    /// not whole rows forgets them instead.
    fn put(&self, moff: u64, len: u64, pages: Option<&[Option<&[u8]>]>, given: u64) {
        let (Some(pages), Some(rows)) = (
            pages,
            Self::rows_of(moff, len).filter(|_| self.capacity > 0 && given != 0),
        ) else {
            for m in (0..self.members).filter(|&m| given & bit(m) != 0) {
                self.forget(m, moff, len);
            }
            return;
        };
        let mut inner = self.lock();
        for (i, r) in rows.enumerate() {
            // (bytes, known, pins, doomed) of the row as it was.
            let (mut bytes, known, pins, doomed) = match inner.rows.remove(&r) {
                Some(old) => {
                    inner.order.remove(&old.used);
                    (old.bytes, old.known, old.pins, old.doomed)
                }
                None if inner.rows.len() >= self.capacity => {
                    // The buffer of the row let go serves this one.
                    match Self::let_one_go(&mut inner) {
                        Some(bytes) => (bytes, 0, 0, false),
                        None => continue,
                    }
                }
                None => (
                    vec![0u8; self.members * ROW as usize].into_boxed_slice(),
                    0,
                    0,
                    false,
                ),
            };
            for (m, p) in pages.iter().enumerate() {
                if let Some(p) = p {
                    bytes[page(m)].copy_from_slice(&p[i * ROW as usize..][..ROW as usize]);
                }
            }
            inner.clock += 1;
            let used = inner.clock;
            inner.order.insert(used, r);
            inner.rows.insert(
                r,
                Row {
                    bytes,
                    known: known | given,
                    used,
                    pins,
                    doomed,
                },
            );
        }
    }

    /// Let the least recently used unpinned row go, giving back its
    /// buffer; `None` if every row is pinned.
    fn let_one_go(inner: &mut Inner) -> Option<Box<[u8]>> {
        let (u, r) = inner
            .order
            .iter()
            .find(|(_, r)| inner.rows.get(r).is_some_and(|row| row.pins == 0))
            .map(|(&u, &r)| (u, r))?;
        inner.order.remove(&u);
        inner.rows.remove(&r).map(|row| row.bytes)
    }

    /// Forget member `member`'s pages that bytes `[moff, moff + len)`
    /// touch; a row left with no known page goes.
    pub fn forget(&self, member: usize, moff: u64, len: u64) {
        if len == 0 {
            return;
        }
        let mut inner = self.lock();
        for r in moff / ROW..(moff + len).div_ceil(ROW) {
            let gone = inner.rows.get_mut(&r).is_some_and(|row| {
                row.known &= !bit(member);
                // Past 64 members nothing is kept; any page forgotten
                // there forgets the row.
                row.known == 0 || bit(member) == 0
            });
            if gone {
                inner.drop_row(r);
            }
        }
    }

    /// Forget every row; one a write in flight has pinned is only doomed
    /// (see `Row::doomed`).
    pub fn clear(&self) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        inner.rows.retain(|_, row| {
            row.doomed = true;
            row.pins > 0
        });
        let rows = &inner.rows;
        inner.order.retain(|_, r| rows.contains_key(r));
    }

    /// Rows kept now, and member ranges writes filled from them since the
    /// start.
    pub fn counts(&self) -> (u64, u64) {
        let inner = self.lock();
        (inner.rows.len() as u64, inner.hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(members: usize, len: usize, seed: u8) -> Vec<Vec<u8>> {
        (0..members)
            .map(|m| (0..len).map(|i| seed ^ (m as u8) ^ (i as u8)).collect())
            .collect()
    }

    /// Whether member `m`'s bytes `[moff, moff + len)` are known.
    fn covers(k: &KeptRows, m: usize, moff: u64, len: u64) -> bool {
        k.known(moff, len) & bit(m) != 0
    }

    fn all(p: &[Vec<u8>]) -> Vec<Option<&[u8]>> {
        p.iter().map(|v| Some(v.as_slice())).collect()
    }

    #[test]
    fn keeps_pages_and_fills_any_part_of_one_member() {
        let k = KeptRows::new(3, 4);
        let p = pages(3, 8192, 7);
        k.keep(8192, 8192, &all(&p));
        assert!(covers(&k, 2, 8192, 8192));
        assert!(covers(&k, 0, 12288, 4096));
        assert!(!covers(&k, 0, 4096, 8192), "row 1 was never kept");
        assert!(!covers(&k, 0, 8192, 512), "not whole rows");
        let mut dst = vec![0u8; 4096];
        assert!(k.fill(2, 12288, &mut dst));
        assert_eq!(dst, p[2][4096..]);
        assert!(!k.fill(3, 8192, &mut dst), "no member 3");
    }

    #[test]
    fn only_the_members_given_become_known_and_a_forget_is_per_member() {
        let k = KeptRows::new(3, 4);
        let p = pages(3, 4096, 1);
        k.keep(0, 4096, &[Some(&p[0]), None, Some(&p[2])]);
        assert!(covers(&k, 0, 0, 4096) && covers(&k, 2, 0, 4096));
        assert!(!covers(&k, 1, 0, 4096));
        assert_eq!(k.known(0, 4096), 0b101);
        assert_eq!(k.known(0, 8192), 0, "row 1 not kept: nothing known of both");
        k.keep(0, 4096, &[None, Some(&p[1]), None]);
        assert!(
            covers(&k, 1, 0, 4096) && covers(&k, 0, 0, 4096),
            "earlier pages stay"
        );
        k.forget(0, 100, 1);
        assert!(!covers(&k, 0, 0, 4096) && covers(&k, 1, 0, 4096));
        k.forget(1, 0, 4096);
        k.forget(2, 0, 4096);
        assert_eq!(k.counts().0, 0, "a row with no page known goes");
        k.keep(0, 512, &all(&pages(3, 512, 2)));
        assert_eq!(k.counts().0, 0, "not whole rows: nothing kept");
    }

    #[test]
    fn the_least_recently_used_unpinned_row_goes_first() {
        let k = KeptRows::new(1, 2);
        let p = pages(1, 4096, 3);
        k.keep(0, 4096, &all(&p));
        k.keep(4096, 4096, &all(&p));
        assert!(k.pin(&[(0, 0, 4096)]));
        k.keep(8192, 4096, &all(&p));
        assert!(
            covers(&k, 0, 0, 4096),
            "pinned: kept though least recently used"
        );
        assert!(!covers(&k, 0, 4096, 4096));
        k.unpin(&[(0, 0, 4096)]);
        k.keep(4096, 4096, &all(&p));
        assert!(!covers(&k, 0, 0, 4096), "unpinned and oldest: let go");
        assert!(covers(&k, 0, 8192, 4096) && covers(&k, 0, 4096, 4096));
        assert!(
            !k.pin(&[(0, 0, 4096), (0, 4096, 4096)]),
            "one row gone: nothing pinned"
        );
        k.keep_unmodelled(0, 4096, 1);
        assert!(covers(&k, 0, 0, 4096));
        k.clear();
        assert_eq!(k.counts().0, 0);
    }

    #[test]
    fn a_row_cleared_while_pinned_fills_its_write_then_goes() {
        let k = KeptRows::new(2, 4);
        let p = pages(2, 4096, 5);
        k.keep(0, 4096, &all(&p));
        k.keep(4096, 4096, &all(&p));
        assert!(k.pin(&[(1, 0, 4096)]));
        k.clear();
        assert!(!covers(&k, 1, 0, 4096), "no new plan finds it");
        assert!(!k.pin(&[(1, 0, 4096)]), "nor pins it");
        assert_eq!(k.known(0, 4096), 0);
        let mut dst = vec![0u8; 4096];
        assert!(
            k.fill(1, 0, &mut dst),
            "the write that pinned it still fills"
        );
        assert_eq!(dst, p[1]);
        assert_eq!(k.counts().0, 1, "the unpinned row went at once");
        k.unpin(&[(1, 0, 4096)]);
        assert_eq!(k.counts().0, 0, "gone at its last unpin");
    }
}
