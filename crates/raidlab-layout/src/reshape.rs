//! An md array stopped in the middle of a reshape: two geometries over the
//! same members, meeting at md's reshape position.
//!
//! md reshapes stripe by stripe through the array's logical addresses and
//! records how far it got (`reshape_position`, array sectors). Going forwards
//! (a grow, a chunk or layout change), everything below the position is
//! already in the new geometry and everything from it on is still in the old
//! one; going backwards (a shrink, or a reshape that moves the data offset
//! up: md's RESHAPE_BACKWARDS) it is the other way round. The old geometry has
//! `raid_disks - delta_disks` members and reads from each member's
//! `data_offset`; the new one has `raid_disks` members and, when md moved the
//! data (`new_offset`), reads from `data_offset + new_offset`.
//!
//! It decides which geometry holds each array byte and how large the array
//! is while the reshape is stopped (the smaller of the two: md grows the array
//! only once a grow completes, and shrinks it before a shrink starts); and,
//! for a forward reshape whose data offset moved down (parity levels, and a
//! RAID 10 in the near or offset layout: md never reshapes the far one), how
//! far the new geometry may be written before the position must be
//! checkpointed, and the least move of the data offset that keeps such a
//! walk going; and the same two for a backward reshape to fewer members (a
//! parity level, or a RAID 10 in the near or offset layout), whose data
//! offset moves up by mdadm's least move (a RAID 10's: one row). A RAID
//! 10's new chunk or switch between near and offset over the same members
//! is a forward reshape like a grow, its rows those of each side. A parity
//! array's other member count with a new chunk or layout at once (md's
//! `delta_disks` with `new_chunk`/`new_layout`) is the same walk in either
//! direction, each side counted in its own rows and the step in stripes of
//! the larger chunk (`reshape_combined_tests` checks the limits against the
//! placement over random old and new geometries). For a grow of the data
//! members that keeps the data offset (metadata 0.90), it decides the
//! critical section: the prefix only a backup lets a walk in place cross
//! (`reshape_critical_tests` checks it against mdadm's and the kernel's
//! own tests). It
//! must never do I/O, and never accept fields that make either geometry one
//! md would not run.

use crate::{Geometry, Layout, Level};
use raidlab_core::{Error, Result};

const SECTOR: u64 = 512;

/// Both geometries of an interrupted reshape and where they meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Reshape {
    /// The geometry the array had (level, layout, chunk, member count).
    pub old: Geometry,
    /// The geometry it is being reshaped to.
    pub new: Geometry,
    /// Array byte where the two meet (md's reshape_position).
    pub position: u64,
    /// md's RESHAPE_BACKWARDS: the new geometry is from `position` on.
    pub backwards: bool,
}

/// The superblock fields of an interrupted reshape, as md records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MdReshape {
    pub level: i32,
    pub layout: u32,
    pub chunk_sectors: u32,
    /// The new member count (md's raid_disks during a reshape).
    pub raid_disks: u32,
    pub new_level: i32,
    pub new_layout: u32,
    pub new_chunk_sectors: u32,
    pub delta_disks: i32,
    /// Array sectors already reshaped (md's reshape_position).
    pub position_sectors: u64,
    pub backwards: bool,
    /// Sectors of each member the array uses (md's `size`).
    pub member_sectors: u64,
}

impl Reshape {
    /// Both geometries from the superblock's fields. An error names the field
    /// that makes no geometry md would run, or a position past the array.
    pub fn from_md(f: &MdReshape) -> Result<Reshape> {
        let old_disks = i64::from(f.raid_disks) - i64::from(f.delta_disks);
        let old_disks = u32::try_from(old_disks)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "reshape: raid_disks {} less delta_disks {} leaves no members for the old geometry",
                    f.raid_disks, f.delta_disks
                ))
            })?;
        let geometry = |what: &str, level, layout, chunk: u32, disks| {
            // Each geometry uses whole chunks of the member size.
            let chunk_s = u64::from(chunk.max(1));
            let sectors = if level == 1 {
                f.member_sectors
            } else {
                f.member_sectors / chunk_s * chunk_s
            };
            Geometry::from_md(level, layout, chunk, disks, sectors)
                .map_err(|e| Error::invalid(format!("reshape: the {what} geometry: {}", e.message)))
        };
        let old = geometry("old", f.level, f.layout, f.chunk_sectors, old_disks)?;
        let new = geometry(
            "new",
            f.new_level,
            f.new_layout,
            f.new_chunk_sectors,
            f.raid_disks,
        )?;
        let r = Reshape {
            old,
            new,
            position: f.position_sectors.saturating_mul(SECTOR),
            backwards: f.backwards,
        };
        if r.position > old.array_bytes().max(new.array_bytes()) {
            return Err(Error::invalid(format!(
                "reshape: reshape_position {} sectors is past the array ({} bytes old, {} new)",
                f.position_sectors,
                old.array_bytes(),
                new.array_bytes()
            )));
        }
        Ok(r)
    }

    /// Bytes of the array while the reshape is stopped.
    pub fn array_bytes(&self) -> u64 {
        self.old.array_bytes().min(self.new.array_bytes())
    }

    /// Whether array byte `at` is in the new geometry.
    pub fn is_new(&self, at: u64) -> bool {
        (at < self.position) != self.backwards
    }

    /// The step of a forward reshape, in array bytes. Parity levels: whole
    /// stripes of the new geometry at the larger of the two chunks, as md's
    /// reshape walks (`reshape_sectors`), so every position it records is
    /// one md accepts on a resume (md refuses a reshape_position off this
    /// boundary). RAID 10: the larger chunk, as md's RAID 10 walk never
    /// lets a piece straddle a chunk of either geometry (and takes any
    /// position back).
    pub fn forward_unit(&self) -> u64 {
        let chunk = self.old.chunk_bytes.max(self.new.chunk_bytes);
        if self.new.level == Level::Raid10 {
            chunk
        } else {
            chunk * self.new.data_disks() as u64
        }
    }

    /// A forward reshape whose new geometry starts `gap` bytes below the old
    /// one on every member: the array byte (exclusive, on a
    /// [`Reshape::forward_unit`] boundary) up to which the new geometry may
    /// be written while a resume from `checkpoint` would still read the old
    /// geometry from the old row holding `checkpoint` on. Writing past it
    /// could overwrite old data a crash makes the walk read again.
    ///
    /// A row is md's: one chunk high on every member (a RAID 10 in the
    /// offset layout: one chunk per far copy, as its copies sit in the rows
    /// just below), holding the data chunks of one stripe (parity levels)
    /// or `raid_disks / near` chunks' copies (RAID 10, where a chunk's near
    /// copies may wrap into the next row). The old row where `checkpoint`
    /// starts is md's `first_dev_address` of it, the new rows the writes
    /// fill its `last_dev_address`.
    pub fn forward_write_limit(&self, gap: u64, checkpoint: u64) -> u64 {
        let (old, new) = (Rows::of(&self.old), Rows::of(&self.new));
        // Member bytes, counted from the new data offset, still to be read.
        let keep = gap + old.first_row(checkpoint) * old.height;
        let unit = self.forward_unit();
        new.chunks_in_rows(keep / new.height) * new.chunk / unit * unit
    }

    /// The least a forward reshape must move the data offset down so that
    /// [`Reshape::forward_write_limit`] always lets the next unit be written
    /// once the position is checkpointed at its start (a walk that never
    /// stalls). Parity levels: the larger chunk (md's rule for a reshape over
    /// the same members without a backup). RAID 10: md's least move is the
    /// taller row of the two geometries (`raid10_start_reshape`: the chunk
    /// times the far copies); with the row-granular rule above one row is
    /// enough while the member count grows by at least `near - 1` (the
    /// copies of the chunk at the checkpoint then end within the row after
    /// its first), otherwise two rows are needed; for a new chunk or a
    /// switch between near and offset over the same members, one row
    /// where the walk shows it is enough, else two
    /// (`reshape_raid10_restripe_tests` checks every such change md makes).
    pub fn forward_min_gap(&self) -> u64 {
        let (old, new) = (Rows::of(&self.old), Rows::of(&self.new));
        if self.new.level != Level::Raid10 {
            return old.chunk.max(new.chunk);
        }
        let row = old.height.max(new.height);
        if old.slots == new.slots {
            return self.restripe_min_gap(row);
        }
        let grows_enough = new.slots >= old.slots + new.per_chunk.saturating_sub(1);
        if grows_enough && old.chunk == new.chunk && old.height == new.height {
            row
        } else {
            2 * row
        }
    }

    /// [`Reshape::forward_min_gap`] of a RAID 10 restriped over the same
    /// members (a new chunk, near to offset or back): md's least move, one
    /// row of the taller side, when the walk never stalls with it, else
    /// two. The rows of both sides fill at the same rate (the same copies
    /// over the same members), so the limit keeps its distance ahead of
    /// the checkpoint after every `members` chunks of the larger chunk:
    /// one such period, resumed from the start of every old chunk in it
    /// (md records positions anywhere), tells.
    fn restripe_min_gap(&self, row: u64) -> u64 {
        let unit = self.forward_unit();
        let old = Rows::of(&self.old);
        let period = old.slots * unit;
        let end = self.new.array_bytes();
        let one_row = (0..=period / old.chunk).map(|k| k * old.chunk).all(|at| {
            let next = ((at / unit + 1) * unit).min(end);
            at >= end || self.forward_write_limit(row, at) >= next
        });
        if one_row {
            row
        } else {
            2 * row
        }
    }

    /// A forward reshape of a parity level to more data members that does
    /// not move the data offset (md's only way for metadata 0.90, which has
    /// no new offset): the array bytes from the start, on a
    /// [`Reshape::forward_unit`] boundary, past which a walk with
    /// `forward_write_limit(0, checkpoint)` never stalls (the checkpoint at
    /// the start of each unit). Below it the new rows overlap the old rows
    /// of the same data, so that prefix (mdadm's "critical section") can
    /// only be walked with a backup of it elsewhere. `None` when the walk
    /// never gets going without a backup (no more data members: mdadm then
    /// needs a backup file for the whole walk) or for RAID 10, which md
    /// never reshapes in place.
    pub fn forward_critical_section(&self) -> Option<u64> {
        if self.new.level == Level::Raid10 || self.old.level == Level::Raid10 {
            return None;
        }
        let (old, new) = (Rows::of(&self.old), Rows::of(&self.new));
        let (od, nd) = (old.slots, new.slots);
        if nd <= od {
            return None;
        }
        let unit = self.forward_unit();
        let end = self.new.array_bytes();
        // Past `bound` the old row of the checkpoint leads the new rows the
        // next unit fills by more than both rows' heights (array bytes per
        // member byte: od behind, nd ahead), so no stall can lie above it.
        let bound = ((old.height + new.height) * od * nd + unit * od).div_ceil(nd - od);
        let bound = (bound / unit + 1) * unit;
        let mut critical = 0;
        let mut at = 0;
        while at < end.min(bound) {
            let next = (at + unit).min(end);
            if self.forward_write_limit(0, at) < next {
                critical = next;
            }
            at += unit;
        }
        Some(critical)
    }

    /// A backward reshape (fewer members of a parity level or of a RAID 10
    /// in the near or offset layout, md's backward direction) whose new
    /// geometry starts `gap` bytes above the old one on every member: the
    /// lowest array byte (on a [`Reshape::forward_unit`] boundary) down to
    /// which the new geometry may be written while a resume from
    /// `checkpoint` would still read the old geometry below it. The walk
    /// goes from the end of the array towards its start, so the old rows
    /// still to be read are the low ones, up to the row holding the last
    /// copy of the byte just below `checkpoint` (a RAID 10's near copies
    /// may wrap into the next row: md's `last_dev_address`); a new chunk
    /// may be written only where the row of its first copy (md's
    /// `first_dev_address`) lands at or above their top.
    pub fn backward_write_limit(&self, gap: u64, checkpoint: u64) -> u64 {
        let (old, new) = (Rows::of(&self.old), Rows::of(&self.new));
        // Member bytes (from the old data offset) a resume still reads.
        let keep = match checkpoint {
            0 => 0,
            c => (old.last_row(c - 1) + 1) * old.height,
        };
        let first_row = keep.saturating_sub(gap).div_ceil(new.height);
        let unit = self.forward_unit();
        (new.first_chunk_in_row(first_row) * new.chunk).div_ceil(unit) * unit
    }

    /// How far mdadm moves the data offset up for a backward reshape of a
    /// parity level (its `min_offset_change`): the least common multiple of
    /// an old and a new stripe, divided by the old data members, which is
    /// at least the larger chunk, so that a walk from the end always finds
    /// room for its next stripe once the position is checkpointed.
    pub fn backward_gap(&self) -> u64 {
        let a = self.old.chunk_bytes / SECTOR * self.old.data_disks() as u64;
        let b = self.new.chunk_bytes / SECTOR * self.new.data_disks() as u64;
        let (mut x, mut y) = (a, b);
        while y != 0 {
            (x, y) = (y, x % y);
        }
        a / x.max(1) * b / self.old.data_disks() as u64 * SECTOR
    }

    /// The least a backward reshape must move the data offset up so that
    /// [`Reshape::backward_write_limit`] always lets the next unit down be
    /// written once the position is checkpointed at its end. Parity
    /// levels: mdadm's move ([`Reshape::backward_gap`]). RAID 10: md's
    /// least move is the taller row of the two geometries (mdadm's
    /// `min_offset_change`, the chunk times the far copies, which
    /// `raid10_start_reshape` demands); with the row-granular rule one row
    /// is enough while no chunk's last old copy sits in a row above the
    /// new row of its first copy (always so without near copies), else
    /// two rows are needed (a near=3 array losing one member of five).
    pub fn backward_min_gap(&self) -> u64 {
        if self.new.level != Level::Raid10 {
            return self.backward_gap();
        }
        let (old, new) = (Rows::of(&self.old), Rows::of(&self.new));
        let row = old.height.max(new.height);
        // Fewer slots per row in the new geometry: a chunk's new row climbs
        // faster than its old one, so only the first chunks can fail.
        let chunks = (new.slots * (old.per_chunk + old.slots)).div_ceil(old.per_chunk.max(1));
        let one_row = old.chunk == new.chunk
            && old.height == new.height
            && (0..=chunks).all(|k| old.last_row(k * old.chunk) <= new.first_row(k * new.chunk));
        if one_row {
            row
        } else {
            2 * row
        }
    }

    /// `len` bytes from `at` cut where the geometries meet: `(new, at, len)`
    /// pieces in order.
    pub fn split(&self, at: u64, len: u64) -> Vec<(bool, u64, u64)> {
        let end = at.saturating_add(len);
        if at < self.position && end > self.position {
            vec![
                (self.is_new(at), at, self.position - at),
                (
                    self.is_new(self.position),
                    self.position,
                    end - self.position,
                ),
            ]
        } else if len == 0 {
            Vec::new()
        } else {
            vec![(self.is_new(at), at, len)]
        }
    }
}

/// How one side of a forward reshape fills its members, in md's rows (see
/// [`Reshape::forward_write_limit`]).
#[derive(Debug, Clone, Copy)]
struct Rows {
    /// Bytes of array data per chunk.
    chunk: u64,
    /// Member bytes of one row.
    height: u64,
    /// Chunk slots per row: the data members (parity levels), every member
    /// (RAID 10).
    slots: u64,
    /// Slots one chunk of data takes: its near copies (RAID 10), else one.
    per_chunk: u64,
}

impl Rows {
    fn of(g: &Geometry) -> Rows {
        match g.layout {
            Layout::Raid10(l) => Rows {
                chunk: g.chunk_bytes,
                height: g.chunk_bytes * u64::from(if l.offset { l.far } else { 1 }),
                slots: g.raid_disks as u64,
                per_chunk: u64::from(l.near),
            },
            _ => Rows {
                chunk: g.chunk_bytes,
                height: g.chunk_bytes,
                slots: g.data_disks() as u64,
                per_chunk: 1,
            },
        }
    }

    /// The row array byte `at`'s chunk starts in.
    fn first_row(&self, at: u64) -> u64 {
        at / self.chunk * self.per_chunk / self.slots
    }

    /// How many whole chunks from the array's start fit in `rows` rows.
    fn chunks_in_rows(&self, rows: u64) -> u64 {
        rows * self.slots / self.per_chunk
    }

    /// The row holding the last copy of array byte `at`'s chunk.
    fn last_row(&self, at: u64) -> u64 {
        ((at / self.chunk + 1) * self.per_chunk - 1) / self.slots
    }

    /// The first chunk whose first copy lies in row `rows` or above.
    fn first_chunk_in_row(&self, rows: u64) -> u64 {
        (rows * self.slots).div_ceil(self.per_chunk)
    }
}

#[cfg(test)]
#[path = "reshape_raid10_tests.rs"]
mod raid10_tests;

#[cfg(test)]
#[path = "reshape_raid10_restripe_tests.rs"]
mod raid10_restripe_tests;

#[cfg(test)]
#[path = "reshape_combined_tests.rs"]
mod combined_tests;

#[cfg(test)]
#[path = "reshape_critical_tests.rs"]
mod critical_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn grow(position_sectors: u64, backwards: bool) -> MdReshape {
        MdReshape {
            level: 5,
            layout: 2,
            chunk_sectors: 128,
            raid_disks: 5,
            new_level: 5,
            new_layout: 2,
            new_chunk_sectors: 128,
            delta_disks: 1,
            position_sectors,
            backwards,
            member_sectors: 16384,
        }
    }

    #[test]
    fn a_grow_by_one_member() {
        let r = Reshape::from_md(&grow(6144, false)).unwrap();
        assert_eq!((r.old.raid_disks, r.new.raid_disks), (4, 5));
        assert_eq!(r.array_bytes(), 3 * 16384 * 512, "the old size until done");
        assert!(r.is_new(0) && r.is_new(6144 * 512 - 1) && !r.is_new(6144 * 512));
        assert_eq!(
            r.split(6000 * 512, 1000 * 512),
            vec![
                (true, 6000 * 512, 144 * 512),
                (false, 6144 * 512, 856 * 512)
            ]
        );
        let b = Reshape::from_md(&grow(6144, true)).unwrap();
        assert!(!b.is_new(0) && b.is_new(6144 * 512));
    }

    #[test]
    fn a_chunk_change_rounds_each_geometry_to_its_chunk() {
        let mut f = grow(0, false);
        f.delta_disks = 0;
        f.raid_disks = 4;
        f.new_chunk_sectors = 1024;
        f.member_sectors = 16384 + 200;
        let r = Reshape::from_md(&f).unwrap();
        assert_eq!(r.old.member_bytes, (16384 + 128) * 512);
        assert_eq!(r.new.member_bytes, 16384 * 512);
        assert_eq!(r.array_bytes(), 3 * 16384 * 512);
    }

    #[test]
    fn a_raid5_to_raid6_conversion() {
        // `mdadm --grow --level=6 --raid-devices=5` of a 4-member RAID 5: md
        // first takes the array over as a RAID 6 in left-symmetric-6 (Q on the
        // new fifth member), then reshapes it to left-symmetric in place.
        let f = MdReshape {
            level: 6,
            layout: 18,
            raid_disks: 5,
            new_level: 6,
            new_layout: 2,
            delta_disks: 0,
            ..grow(3072, false)
        };
        let r = Reshape::from_md(&f).unwrap();
        assert_eq!(r.old.layout.name(), "left-symmetric-6");
        assert_eq!(r.new.layout.name(), "left-symmetric");
        assert_eq!((r.old.raid_disks, r.new.raid_disks), (5, 5));
        assert_eq!(r.array_bytes(), 3 * 16384 * 512);
        assert!(r.is_new(3072 * 512 - 1) && !r.is_new(3072 * 512));
        // Below the position Q rotates; from it on Q is still the last member.
        let chunk = 128 * 512;
        let at = |g: &crate::Geometry, byte: u64| g.stripe(byte / chunk / 3).q;
        assert_eq!(at(&r.old, 3072 * 512), Some(4));
        assert_eq!(at(&r.new, 0), Some(0));
    }

    /// Every forward walk md or raidlab starts can make progress: with the
    /// data moved down by at least the larger chunk (md's rule for a reshape
    /// over the same members) or by one chunk when members are added, a
    /// checkpoint at the step's start always lets the next unit be written.
    #[test]
    fn a_forward_walk_always_has_room_for_its_next_unit() {
        let chunks = [8u32, 16, 64, 128, 1024, 2048];
        let mut walks = 0;
        for &oc in &chunks {
            for &nc in &chunks {
                for disks in 3..=7u32 {
                    for delta in 0..=2u32 {
                        if delta > 0 && oc != nc {
                            continue;
                        }
                        let f = MdReshape {
                            chunk_sectors: oc,
                            new_chunk_sectors: nc,
                            raid_disks: disks + delta,
                            delta_disks: delta as i32,
                            member_sectors: 8192,
                            ..grow(0, false)
                        };
                        let r = Reshape::from_md(&f).unwrap();
                        let gap = u64::from(oc.max(nc)) * 512;
                        let unit = r.forward_unit();
                        let (mut at, mut checkpoint) = (0, 0);
                        while at < r.new.array_bytes() {
                            if r.forward_write_limit(gap, checkpoint) < at + unit {
                                checkpoint = at;
                            }
                            assert!(
                                r.forward_write_limit(gap, checkpoint) >= at + unit,
                                "chunks {oc}->{nc}, {disks}+{delta} members: stuck at {at}"
                            );
                            at += unit;
                        }
                        walks += 1;
                    }
                }
            }
        }
        assert_eq!(walks, 6 * 6 * 5 + 6 * 5 * 2);
        // Less than the larger chunk is not enough for a chunk change.
        let f = MdReshape {
            delta_disks: 0,
            raid_disks: 4,
            chunk_sectors: 128,
            new_chunk_sectors: 1024,
            ..grow(0, false)
        };
        let r = Reshape::from_md(&f).unwrap();
        assert!(r.forward_write_limit(128 * 512, 0) < r.forward_unit());
    }

    /// Every backward walk (fewer members) with the data moved up by
    /// mdadm's least move finds room for its next stripe once the position
    /// is checkpointed at the stripe's end; with no move it stalls near the
    /// start (where md needs a backup file).
    #[test]
    fn a_backward_walk_always_has_room_for_its_next_unit() {
        let mut walks = 0;
        for &chunk in &[8u32, 64, 128, 1024] {
            for (level, layout, parity) in [(5, 2u32, 1u32), (6, 2, 2), (4, 0, 1)] {
                for old in (parity + 2).max(level as u32 - 1)..=8 {
                    for new in (parity + 1).max(level as u32 - 2)..old {
                        let f = MdReshape {
                            level,
                            new_level: level,
                            layout,
                            new_layout: layout,
                            chunk_sectors: chunk,
                            new_chunk_sectors: chunk,
                            raid_disks: new,
                            delta_disks: new as i32 - old as i32,
                            member_sectors: 8192,
                            ..grow(0, true)
                        };
                        let mut r = Reshape::from_md(&f).unwrap();
                        let gap = r.backward_gap();
                        assert!(gap >= u64::from(chunk) * 512, "{old}->{new}: gap {gap}");
                        let unit = r.forward_unit();
                        let end = r.new.array_bytes();
                        r.position = end;
                        let (mut at, mut checkpoint) = (end, end);
                        while at > 0 {
                            if r.backward_write_limit(gap, checkpoint) > at - unit {
                                checkpoint = at;
                            }
                            assert!(
                                r.backward_write_limit(gap, checkpoint) <= at - unit,
                                "RAID {level} chunk {chunk}, {old}->{new}: stuck at {at}"
                            );
                            at -= unit;
                        }
                        // Without a move the last stripes overwrite old rows
                        // a resume would read.
                        assert!(r.backward_write_limit(0, unit) > 0);
                        walks += 1;
                    }
                }
            }
        }
        assert!(walks > 50, "{walks}");
    }

    #[test]
    fn impossible_fields_are_named() {
        let mut f = grow(0, false);
        f.delta_disks = 5;
        let e = Reshape::from_md(&f).unwrap_err().to_string();
        assert!(e.contains("delta_disks"), "{e}");
        let mut f = grow(0, false);
        f.new_layout = 9;
        let e = Reshape::from_md(&f).unwrap_err().to_string();
        assert!(e.contains("new geometry") && e.contains("9"), "{e}");
        // A RAID 5 cannot hold a RAID 6 conversion layout.
        let mut f = grow(0, false);
        f.layout = 18;
        let e = Reshape::from_md(&f).unwrap_err().to_string();
        assert!(
            e.contains("old geometry") && e.contains("left-symmetric-6"),
            "{e}"
        );
        let e = Reshape::from_md(&grow(1 << 40, false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("reshape_position"), "{e}");
    }
}
