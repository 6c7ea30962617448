//! Which write-intent bitmap an assembly trusts: the copy on the first
//! active member, out of date (a full resync) when its event count is behind
//! the superblocks', with the dirty bits of every other active member's copy
//! added. It decides what the array's bitmap says after assembly; it never
//! writes a bitmap (the superblock commits do).

use super::Member;
use raidlab_core::Result;
use raidlab_md::bitmap::Bitmap;
use raidlab_md::Superblock;

/// The array's bitmap as assembly takes it from `members` (active ones in
/// `slots`), or `None` when the array has no internal bitmap.
pub(super) fn assembled(
    members: &[Member],
    slots: &[Option<usize>],
    reference: &Superblock,
) -> Result<Option<Bitmap>> {
    let Some(&first) = slots.iter().flatten().next() else {
        return Ok(None);
    };
    if reference.feature_map & raidlab_md::superblock::feature::BITMAP_OFFSET == 0 {
        return Ok(None);
    }
    let m = &members[first];
    let mut bm = Bitmap::read_from(m.device.volume.as_ref(), &m.sb)
        .map_err(|e| e.on_device(m.device.path.clone()))?;
    if let Some(b) = bm.as_mut() {
        if b.is_stale(reference) {
            // md: an out-of-date bitmap means a full resync.
            for c in 0..b.chunks() {
                let _ = b.set(c);
            }
        }
        union_others(b, members, slots, first, reference);
    }
    Ok(bm)
}

/// Add to `bm` (read from member `first`) the dirty bits of every other
/// active member's copy that is not out of date. A running array writes its
/// bitmap to the members in service; one it took out in a write nobody had
/// to acknowledge yet (a held stripe written out in the background) is not
/// recorded faulty before the next acknowledgement, so after a crash it may
/// come back active with a copy that lacks the bits set since, and a resync
/// guided by that copy alone would skip stripes written at the crash (torture
/// seed 4 run 914). md reads one copy because it records such a failure
/// before it writes on; the union is never less safe than any one copy (more
/// dirty bits only widen the resync). A copy that cannot be read adds nothing.
fn union_others(
    bm: &mut Bitmap,
    members: &[Member],
    slots: &[Option<usize>],
    first: usize,
    reference: &Superblock,
) {
    for &j in slots.iter().flatten().filter(|&&j| j != first) {
        let m = &members[j];
        let Ok(Some(other)) = Bitmap::read_from(m.device.volume.as_ref(), &m.sb) else {
            continue;
        };
        if other.is_stale(reference) || other.chunks() != bm.chunks() {
            continue;
        }
        for (start, len) in other.dirty_ranges() {
            let _ = bm.set_sectors(start, len);
        }
    }
}
