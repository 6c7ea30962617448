//! md's RAID 10: its layout names and word (near, far, offset copies), the
//! numbers md derives from a geometry (`calc_sectors`, `raid10_size`), and
//! where each copy of a chunk lives (`raid10_find_phys`) and back.
//!
//! Decides RAID 10 placement only, as pure arithmetic; it must never do I/O,
//! and never place a far-set layout (bits 17-18 of md's word), which mdadm
//! never creates.

use crate::{Content, Geometry, Layout, Location, Raid10Layout};
use raidlab_core::{Error, Result};

pub(crate) const RAID10_LAYOUT_NAMES: &str = "nN (near), fN (far), oN (offset) with N copies, \
     2 <= N <= number of members, e.g. n2, f2, o2, n3";

/// RAID 10 numbers derived from the geometry, in chunks, as md's `calc_sectors`
/// and `raid10_size` compute them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct R10 {
    near: u64,
    far: u64,
    offset: bool,
    disks: u64,
    /// Chunks of array data.
    pub(crate) array_chunks: u64,
    /// Chunks of each member md uses (md's dev_sectors in chunks).
    pub(crate) dev_chunks: u64,
    /// Distance in chunks between far copies on a member.
    stride_chunks: u64,
}

impl R10 {
    pub(crate) fn new(l: Raid10Layout, disks: usize, member_chunks: u64) -> R10 {
        let (near, far, disks) = (u64::from(l.near), u64::from(l.far), disks as u64);
        // raid10_size: chunks per device / far copies * disks / near copies.
        let array_chunks = member_chunks / far * disks / near;
        // calc_sectors: the chunks every member needs, rounded up.
        let dev_chunks = (array_chunks * near * far).div_ceil(disks);
        let stride_chunks = if l.offset { 1 } else { dev_chunks / far };
        R10 {
            near,
            far,
            offset: l.offset,
            disks,
            array_chunks,
            dev_chunks,
            stride_chunks,
        }
    }
}

impl Raid10Layout {
    /// Parse mdadm's RAID 10 layout names: `n`, `f` or `o` followed by the number of
    /// copies ("n2" = near 2, "f2" = far 2, "o2" = offset 2). Whether the copies fit
    /// the member count is checked by [`Geometry::new`].
    pub fn from_name(s: &str) -> Result<Raid10Layout> {
        let lower = s.trim().to_ascii_lowercase();
        let bad = || {
            Error::invalid(format!(
                "unknown RAID 10 layout '{s}'; valid layouts: {RAID10_LAYOUT_NAMES}"
            ))
        };
        let mut chars = lower.chars();
        let kind = chars.next().ok_or_else(bad)?;
        let digits = chars.as_str();
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let copies: u32 = digits.parse().map_err(|_| bad())?;
        if !(2..=255).contains(&copies) {
            return Err(Error::invalid(format!(
                "RAID 10 layout '{s}' asks for {copies} copies; md needs 2 to 255 copies \
                 (and no more than the number of members)"
            )));
        }
        match kind {
            'n' => Ok(Raid10Layout {
                near: copies,
                far: 1,
                offset: false,
            }),
            'f' => Ok(Raid10Layout {
                near: 1,
                far: copies,
                offset: false,
            }),
            'o' => Ok(Raid10Layout {
                near: 1,
                far: copies,
                offset: true,
            }),
            _ => Err(bad()),
        }
    }

    /// The layout as `mdadm --examine` prints it for RAID 10: "near=2", "far=2",
    /// "offset=2", "near=2, far=2"; "NO REDUNDANCY" for one copy.
    pub fn name(&self) -> String {
        let mut parts = Vec::new();
        if self.near != 1 {
            parts.push(format!("near={}", self.near));
        }
        if self.far != 1 {
            let word = if self.offset { "offset" } else { "far" };
            parts.push(format!("{word}={}", self.far));
        }
        if self.near * self.far == 1 {
            parts.push("NO REDUNDANCY".to_string());
        }
        parts.join(", ")
    }

    /// Copies of every chunk (near * far).
    pub fn copies(&self) -> usize {
        self.near as usize * self.far as usize
    }

    /// md's layout word: near in bits 0-7, far in bits 8-15, offset in bit 16.
    pub fn md_layout(&self) -> u32 {
        (self.near & 0xff) | ((self.far & 0xff) << 8) | (u32::from(self.offset) << 16)
    }

    /// Decode md's layout word. Bits 17 and 18 (md's "far sets", which mdadm never
    /// creates) are refused.
    pub fn from_md(word: u32) -> Result<Raid10Layout> {
        if word >> 17 != 0 {
            return Err(Error::invalid(format!(
                "RAID 10 layout 0x{word:x} uses md's far-set variant (bit 17/18), which \
                 raidlab does not support"
            )));
        }
        Ok(Raid10Layout {
            near: word & 0xff,
            far: (word >> 8) & 0xff,
            offset: word & (1 << 16) != 0,
        })
    }
}

impl Geometry {
    pub(crate) fn r10(&self) -> Option<R10> {
        match self.layout {
            Layout::Raid10(r) => Some(R10::new(
                r,
                self.raid_disks,
                self.member_bytes / self.chunk_bytes,
            )),
            _ => None,
        }
    }

    /// Every copy of array byte `logical` (md's copy order) and the bytes that
    /// stay contiguous from it on every copy.
    pub(crate) fn raid10_map(&self, r: R10, logical: u64) -> (Vec<Location>, u64) {
        let cb = self.chunk_bytes;
        let size = self.array_bytes();
        let within = logical % cb;
        // Linear position of the first copy when copies are dealt out
        // row by row across the members.
        let first = logical / cb * r.near;
        let mut dev = first % r.disks;
        let row_step = if r.offset { r.far } else { 1 };
        let mut row = first / r.disks * row_step;
        let mut out = Vec::with_capacity((r.near * r.far) as usize);
        for _ in 0..r.near {
            for f in 0..r.far {
                out.push(Location {
                    member: ((dev + f * r.near) % r.disks) as usize,
                    offset: (row + f * r.stride_chunks) * cb + within,
                });
            }
            dev += 1;
            if dev == r.disks {
                // md moves a wrapped near copy down by exactly one chunk,
                // also in offset layouts.
                dev = 0;
                row += 1;
            }
        }
        (out, (cb - within).min(size - logical))
    }

    /// What member `member` holds at `offset` of its data area.
    pub(crate) fn raid10_content_at(&self, r: R10, member: usize, offset: u64) -> Content {
        let cb = self.chunk_bytes;
        let mut chunk = offset / cb;
        // Which far copy this block would be, and the member of copy 0.
        let (f, rest) = if r.offset {
            (chunk % r.far, chunk / r.far)
        } else {
            (chunk / r.stride_chunks, chunk % r.stride_chunks)
        };
        if f >= r.far {
            return Content::Unused;
        }
        chunk = rest;
        let dev = (member as u64 + r.disks - (f * r.near) % r.disks) % r.disks;
        let logical_chunk = (chunk * r.disks + dev) / r.near;
        let logical = logical_chunk * cb + offset % cb;
        if logical >= self.array_bytes() {
            return Content::Unused;
        }
        let here = Location { member, offset };
        if self.mirror_map(logical).0.contains(&here) {
            Content::Data(logical)
        } else {
            Content::Unused
        }
    }

    /// Whether a copy of every chunk survives with the members `gone` lost.
    pub(crate) fn raid10_survives(&self, gone: &[bool]) -> bool {
        // Which members hold a chunk's copies depends only on where its
        // first copy starts, and that start cycles within raid_disks chunks.
        let chunks = self.array_bytes() / self.chunk_bytes;
        (0..chunks.min(self.raid_disks as u64)).all(|c| {
            self.mirror_map(c * self.chunk_bytes)
                .0
                .iter()
                .any(|l| !gone[l.member])
        })
    }
}
