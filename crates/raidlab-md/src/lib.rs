//! raidlab-md: Linux md's on-disk formats, as plain bytes.
//!
//! Each format lives in its own module and is read and written as explicit
//! little-endian bytes at fixed offsets (never by transmuting structs), so that what
//! raidlab writes is byte-for-byte what the Linux md driver and `mdadm` write and
//! read. On read, checksums are verified and every field is range-checked; a failure
//! is an [`raidlab_core::Error`] of kind `Invalid` that names the field, the value
//! found and what was expected.
//!
//! What this crate must never do:
//! - panic, whatever bytes it is given (fuzzed with proptest);
//! - do any I/O other than reading or writing a member's metadata areas (the 4 KiB
//!   superblock at any of its three places, the bitmap area, the PPL area, a journal device's ring) through the [`raidlab_core::Volume`]
//!   trait (never the data area).
//!
//! Modules:
//! - [`superblock`]: the version-1 superblock (`struct mdp_superblock_1`) at the
//!   place of each of metadata 1.0 (end of the member), 1.1 (start) and 1.2
//!   (4 KiB from the start), `mdadm --examine` style output and the choices
//!   `mdadm --create` makes (data offset, member size, bad-block-log placement).
//! - [`sb090`]: the old metadata 0.90 superblock (`mdp_super_t`, 64 KiB aligned
//!   near the end, in the writing host's byte order), presented as its v1
//!   equivalent so assembly needs no second path, and written back as md
//!   rebuilds it (in the host's byte order).
//! - [`badblocks`]: md's per-member bad-block log (read and printed, not written).
//! - [`bitmap`]: the internal write-intent bitmap (`bitmap_super_t` and one bit per
//!   chunk, right after the v1.2 superblock) and the chunk mdadm chooses.
//! - [`ppl`]: the raid5 partial parity log (`struct ppl_header`, crc32c checksums,
//!   placement from the superblock's `ppl` fields, what md would replay).
//! - [`journal`]: the raid4/5/6 write journal on its own device (`raid5-cache`:
//!   meta blocks, data/parity/flush payloads, uuid-seeded crc32c, the journal
//!   role and `journal_tail`).
//! - [`grow_backup`]: mdadm's backup of a reshape's critical section
//!   (`mdp_backup_super`, `md_backup_data-1`/`-2`) and where mdadm puts it on
//!   a new member when it has no backup file (bytes and placement only: the
//!   backup is in a data area, which this crate never writes).
//! - `planted`: test-only planted bugs in the readers (feature
//!   `planted-bugs`, enabled by `raidlab-sim`'s tests only).

/// `planted!(Name)`: whether the test-only bug `planted::Bug::Name` is on for
/// this thread; the literal `false` without the `planted-bugs` feature.
#[cfg(feature = "planted-bugs")]
macro_rules! planted {
    ($bug:ident) => {
        $crate::planted::on($crate::planted::Bug::$bug)
    };
}
#[cfg(not(feature = "planted-bugs"))]
macro_rules! planted {
    ($bug:ident) => {
        false
    };
}

pub mod badblocks;
pub mod bitmap;
pub mod grow_backup;
pub mod journal;
mod le;
#[cfg(feature = "planted-bugs")]
pub mod planted;
pub mod ppl;
pub mod sb090;
pub mod superblock;

pub use bitmap::{Bitmap, BitmapSuper};
pub use ppl::{PplEntry, PplHeader};
pub use superblock::{
    default_data_offset, default_member_sectors, default_member_sectors_for, mdadm_data_offset,
    mdadm_data_offset_for, new_member, new_member_at, MetadataVersion, NewArray, Role, Superblock,
    ROLE_FAULTY, ROLE_JOURNAL, ROLE_SPARE, SB_OFFSET,
};
