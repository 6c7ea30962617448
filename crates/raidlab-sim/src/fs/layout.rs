//! Where a file system puts one large file's blocks and its own metadata on the
//! volume: ext3's block groups and indirect blocks, XFS's single stripe-aligned
//! extent, and each one's journal or log area.
//!
//! Decides: the volume offset of a file offset, how far the volume stays
//! contiguous from there, which metadata blocks allocating a range dirties
//! (ext3) or how many log bytes it costs (XFS), and where the journal or log
//! lies. It must never do I/O or keep time: the file-system device (`mod.rs`)
//! does. Layout constants and their sources are in `presets/kernels.toml`.

use super::kernel::{Kernel, PAGE};

/// The file systems the articles measured through, in the modes they name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum FsKind {
    /// ext3; `ordered` is ext3's default data=ordered, else data=writeback.
    Ext3 { ordered: bool },
    /// XFS; `aligned` when mkfs.xfs was given (or read from md) su/sw.
    Xfs { aligned: bool },
}

impl FsKind {
    /// The `fs=` option's values.
    pub fn parse(v: &str) -> Result<FsKind, String> {
        Ok(match v {
            "ext3" => FsKind::Ext3 { ordered: true },
            "ext3-writeback" => FsKind::Ext3 { ordered: false },
            "xfs" => FsKind::Xfs { aligned: true },
            "xfs-noalign" => FsKind::Xfs { aligned: false },
            _ => {
                return Err(format!(
                    "`fs={v}`: unknown file system (known: ext3 (data=ordered), ext3-writeback (data=writeback), xfs (su/sw from the array), xfs-noalign)"
                ))
            }
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            FsKind::Ext3 { ordered: true } => "ext3",
            FsKind::Ext3 { ordered: false } => "ext3-writeback",
            FsKind::Xfs { aligned: true } => "xfs",
            FsKind::Xfs { aligned: false } => "xfs-noalign",
        }
    }
}

/// ext3's blocks per group with 4 KiB blocks (one bitmap block's bits).
const EXT3_GROUP_BLOCKS: u64 = 32768;
/// Bytes of an ext3 inode of 2008's mke2fs.
const EXT3_INODE_BYTES: u64 = 128;
/// Group descriptors per 4 KiB block (32 bytes each).
const EXT3_DESC_PER_BLOCK: u64 = 128;
/// Block addresses per 4 KiB indirect block.
const ADDR_PER_BLOCK: u64 = 1024;
/// Direct block pointers in an ext3 inode.
const DIRECT: u64 = 12;
/// ext3's first group after the journal, where the file is assumed to start.
const EXT3_FILE_GROUP: u64 = 2;
/// XFS's AG headers and free-space btree roots, then the root inode chunk
/// (64 inodes of 256 bytes), unaligned: 4 blocks + 16 KiB.
const XFS_UNALIGNED_START: u64 = 32 << 10;

/// One ext3 group's run of file-usable blocks.
#[derive(Debug, Clone, Copy)]
struct Group {
    /// Index of the first allocated block (data or indirect) in this group.
    k_start: u64,
    /// Volume byte offset of its first usable block.
    addr: u64,
    blocks: u64,
    /// Volume byte offset of the group's block bitmap.
    bitmap: u64,
}

/// One file's placement on a volume.
#[derive(Debug, Clone)]
pub struct Layout {
    pub kind: FsKind,
    /// The largest file this layout places, in bytes.
    pub max_file: u64,
    groups: Vec<Group>,
    /// ext3: the inode table block holding the file's inode; XFS: unused.
    inode_block: u64,
    /// XFS: where the file's extent starts.
    xfs_start: u64,
    /// Journal (ext3) or log (XFS) area: start and length in bytes.
    pub log_area: (u64, u64),
}

/// The stripe geometry the file system is told about (or reads from md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stripe {
    /// Chunk (stripe unit) in bytes.
    pub unit: u64,
    /// Data chunks per stripe.
    pub width: u64,
}

fn is_power_of(mut g: u64, b: u64) -> bool {
    if g == 0 {
        return false;
    }
    while g % b == 0 {
        g /= b;
    }
    g == 1
}

/// Whether ext3 group `g` holds a superblock backup (sparse_super).
fn has_backup(g: u64) -> bool {
    g <= 1 || is_power_of(g, 3) || is_power_of(g, 5) || is_power_of(g, 7)
}

impl Layout {
    pub fn new(kind: FsKind, k: &Kernel, capacity: u64, stripe: Option<Stripe>) -> Layout {
        match kind {
            FsKind::Ext3 { .. } => Self::ext3(kind, k, capacity),
            FsKind::Xfs { aligned } => {
                let unit = stripe.filter(|_| aligned).map(|s| s.unit.max(PAGE));
                let start = unit.map_or(XFS_UNALIGNED_START, |u| 2 * u);
                let mid = capacity / 2;
                let log_start = unit.map_or(mid / PAGE * PAGE, |u| mid / u * u);
                // The internal log of a volume this size: 128 MiB (mkfs.xfs's
                // largest default of the time), or less on a small one.
                let log_len = (128u64 << 20).min(capacity / 64 / PAGE * PAGE).max(PAGE);
                Layout {
                    kind,
                    max_file: (log_start - start).min(1 << 43),
                    groups: Vec::new(),
                    inode_block: 0,
                    xfs_start: start,
                    log_area: (log_start, log_len),
                }
            }
        }
    }

    fn ext3(kind: FsKind, k: &Kernel, capacity: u64) -> Layout {
        let group_bytes = EXT3_GROUP_BLOCKS * PAGE;
        let ngroups = (capacity / group_bytes).max(1);
        let blocks = ngroups * EXT3_GROUP_BLOCKS;
        let gdt = ngroups.div_ceil(EXT3_DESC_PER_BLOCK);
        // calc_reserved_gdt_blocks(): room for 1024x growth, at most 2^32
        // blocks, capped at one block of addresses.
        let grow = (blocks.saturating_mul(1024)).min(1 << 32);
        let rsv = (grow
            .div_ceil(EXT3_GROUP_BLOCKS)
            .div_ceil(EXT3_DESC_PER_BLOCK))
        .saturating_sub(gdt)
        .min(ADDR_PER_BLOCK);
        let inodes = EXT3_GROUP_BLOCKS * PAGE / k.ext3_inode_ratio_bytes.max(1);
        let itable = (inodes * EXT3_INODE_BYTES).div_ceil(PAGE);
        let mut groups = Vec::new();
        let mut kk = 0;
        let mut g0_data = 0;
        let mut inode_block = 0;
        for g in 0..ngroups {
            let base = g * group_bytes;
            let backup = if has_backup(g) { 1 + gdt + rsv } else { 0 };
            let bitmap = base + backup * PAGE;
            let first = backup + 2 + itable;
            if g == 0 {
                g0_data = base + first * PAGE;
            }
            if g == EXT3_FILE_GROUP {
                inode_block = bitmap + 2 * PAGE;
            }
            if g >= EXT3_FILE_GROUP {
                let n = EXT3_GROUP_BLOCKS - first;
                groups.push(Group {
                    k_start: kk,
                    addr: base + first * PAGE,
                    blocks: n,
                    bitmap,
                });
                kk += n;
            }
        }
        // Double indirection covers 12 + 1024 + 1024^2 blocks; the file
        // blocks are the allocated ones less the indirect blocks.
        let mapped = DIRECT + ADDR_PER_BLOCK + ADDR_PER_BLOCK * ADDR_PER_BLOCK;
        let fits = kk.saturating_sub(3 + kk / ADDR_PER_BLOCK);
        Layout {
            kind,
            max_file: mapped.min(fits) * PAGE,
            groups,
            inode_block,
            xfs_start: 0,
            log_area: (g0_data, k.ext3_journal_bytes),
        }
    }

    /// ext3: the inode table block holding the file's inode.
    pub fn inode_block(&self) -> u64 {
        self.inode_block
    }

    /// ext3: indirect (and double-indirect) blocks allocated before logical
    /// block `l`.
    fn meta_before(l: u64) -> u64 {
        if l < DIRECT {
            0
        } else if l < DIRECT + ADDR_PER_BLOCK {
            1
        } else {
            3 + (l - DIRECT - ADDR_PER_BLOCK) / ADDR_PER_BLOCK
        }
    }

    /// ext3: the first logical block after `l`'s run of data blocks that lie
    /// next to each other among the allocated blocks.
    fn run_end(l: u64) -> u64 {
        if l < DIRECT {
            DIRECT
        } else if l < DIRECT + ADDR_PER_BLOCK {
            DIRECT + ADDR_PER_BLOCK
        } else {
            let j = (l - DIRECT - ADDR_PER_BLOCK) / ADDR_PER_BLOCK;
            DIRECT + ADDR_PER_BLOCK * (j + 2)
        }
    }

    /// Volume offset of allocated block `k` and blocks contiguous from it.
    fn k_addr(&self, k: u64) -> (u64, u64) {
        let i = self.groups.partition_point(|g| g.k_start <= k) - 1;
        let g = &self.groups[i];
        (g.addr + (k - g.k_start) * PAGE, g.k_start + g.blocks - k)
    }

    /// Volume offset of file offset `off` (page aligned) and how many bytes
    /// from there are contiguous on the volume.
    pub fn map(&self, off: u64) -> (u64, u64) {
        match self.kind {
            FsKind::Xfs { .. } => (self.xfs_start + off, self.max_file - off),
            FsKind::Ext3 { .. } => {
                let l = off / PAGE;
                let (addr, in_group) = self.k_addr(l + Self::meta_before(l));
                let run = Self::run_end(l) - l;
                (addr + off % PAGE, run.min(in_group) * PAGE - off % PAGE)
            }
        }
    }

    /// ext3: the metadata blocks (volume offsets) that allocating the file's
    /// pages `first..end` dirties: the indirect blocks mapping them (and the
    /// double-indirect one), each group's block bitmap, the group descriptor
    /// block and the inode's block. Empty for XFS (its cost is log bytes).
    pub fn alloc_metadata(&self, first: u64, end: u64, out: &mut Vec<u64>) {
        if !matches!(self.kind, FsKind::Ext3 { .. }) || end <= first {
            return;
        }
        out.push(PAGE); // the group descriptor table's first block
        out.push(self.inode_block);
        let mut l = first;
        while l < end {
            let k = l + Self::meta_before(l);
            if l >= DIRECT {
                // The indirect block is the allocated block before the run.
                let run_start = if l < DIRECT + ADDR_PER_BLOCK {
                    DIRECT
                } else {
                    Self::run_end(l) - ADDR_PER_BLOCK
                };
                let ind_k = run_start + Self::meta_before(run_start) - 1;
                out.push(self.k_addr(ind_k).0);
                if l >= DIRECT + ADDR_PER_BLOCK {
                    out.push(self.k_addr(DIRECT + ADDR_PER_BLOCK + 1).0);
                }
            }
            let i = self.groups.partition_point(|g| g.k_start <= k) - 1;
            out.push(self.groups[i].bitmap);
            l = Self::run_end(l).min(end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel() -> Kernel {
        super::super::kernel::preset("linux-2.6.2x-md").unwrap()
    }

    #[test]
    fn ext3_puts_an_indirect_block_before_every_4_mib_of_data() {
        let l = Layout::new(FsKind::Ext3 { ordered: true }, &kernel(), 500 << 30, None);
        // The 12 direct blocks, then a one-block gap (the indirect block).
        let (a0, run0) = l.map(0);
        assert_eq!(run0, 12 * PAGE);
        let (a12, run12) = l.map(12 * PAGE);
        assert_eq!(a12, a0 + 13 * PAGE);
        assert_eq!(run12, 1024 * PAGE);
        // After the first 1036 blocks: double-indirect and indirect, 2 blocks.
        let (b, run) = l.map(1036 * PAGE);
        assert_eq!(b, a12 + 1024 * PAGE + 2 * PAGE);
        assert_eq!(run, 1024 * PAGE);
        // A 4 GiB file fits, and its blocks are not stripe aligned past the
        // first run (a 320 KiB stripe: 64K x 5).
        assert!(l.max_file >= 4 << 30);
        let (c, _) = l.map((1036 + 1024) * PAGE);
        assert_eq!(c, b + 1025 * PAGE);
        let mut meta = Vec::new();
        l.alloc_metadata(1036, 1036 + 2048, &mut meta);
        assert!(meta.contains(&(b - PAGE)), "the run's indirect block");
    }

    #[test]
    fn ext3_skips_each_groups_bitmaps_and_inode_table() {
        let l = Layout::new(FsKind::Ext3 { ordered: false }, &kernel(), 500 << 30, None);
        let g = l.groups[0];
        // Group 2 has no superblock backup: 2 bitmaps + 256 inode-table blocks.
        assert_eq!(g.addr, 2 * 32768 * PAGE + 258 * PAGE);
        let (_, run) = l.map((g.blocks - 3 - 50) * PAGE);
        assert!(run <= 50 * PAGE + PAGE, "a run stops at the group's end");
    }

    #[test]
    fn xfs_told_su_sw_starts_the_file_on_a_stripe_unit() {
        let s = Some(Stripe {
            unit: 256 << 10,
            width: 5,
        });
        let a = Layout::new(FsKind::Xfs { aligned: true }, &kernel(), 500 << 30, s);
        assert_eq!(a.map(0).0 % (256 << 10), 0);
        assert_eq!(a.map(0).1, a.max_file);
        let u = Layout::new(FsKind::Xfs { aligned: false }, &kernel(), 500 << 30, s);
        assert_ne!(u.map(0).0 % (256 << 10), 0);
        assert!(a.log_area.0 > 200 << 30, "the log is in the middle AG");
    }
}
