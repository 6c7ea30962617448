//! How a plain file or block device origin is identified, so that a cache is
//! never used in front of another one. (An md array is identified by its array
//! UUID, which its owner passes in.)
//!
//! This module decides what makes two paths "the same origin"; it must never
//! read or write the origin's contents.

use crate::format::OriginId;
use raidlab_core::{Error, Op, Result};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// A regular file by its file system and inode (a copy, or another file at the
/// same path later, is another origin); a block device by its device number.
pub fn path_identity(path: &Path) -> Result<OriginId> {
    let m =
        std::fs::metadata(path).map_err(|e| Error::io(Op::Open, path.display().to_string(), e))?;
    let mut sig = [0u8; 32];
    if m.file_type().is_block_device() {
        sig[..4].copy_from_slice(b"bdev");
        sig[4..12].copy_from_slice(&m.rdev().to_le_bytes());
    } else {
        sig[..4].copy_from_slice(b"file");
        sig[4..12].copy_from_slice(&m.dev().to_le_bytes());
        sig[12..20].copy_from_slice(&m.ino().to_le_bytes());
    }
    Ok(OriginId::Signature(sig))
}
