//! Writing metadata 0.90: the v1 superblock raidlab keeps in memory turned
//! back into md's `mdp_super_t`, the way the kernel rebuilds it on every
//! superblock update (`super_90_sync`): the header from the array's state, and
//! the disk table from the devices the array has now.
//!
//! It decides the bytes of one 0.90 superblock and nothing else; it must never
//! write anything but the 4 KiB at the member's 0.90 place, and never write a
//! superblock md could not take: a member size or chunk that 0.90's 32-bit
//! fields cannot hold, more than 27 devices, or an internal bitmap anywhere
//! but right after the superblock (where md keeps a 0.90 bitmap; the state
//! bit says it is there) are refused before anything is written.
//!
//! Byte order: the host's own, as md writes it (an x86 kernel takes only
//! little-endian 0.90 superblocks, so an array read from a big-endian NAS is
//! written back little-endian for the machine that repairs it).
//!
//! What 0.90 cannot record, and how it is written instead (as md does):
//! - a member being rebuilt is a spare on disk (no recovery offset field): a
//!   stopped rebuild starts over;
//! - device numbers of the members (`major`/`minor` of each descriptor) are
//!   kept from the superblock that was read, and 0 for a device raidlab adds:
//!   md records the numbers it sees when it next assembles the array.

use super::{
    disk_state, Disk090, Sb090, BITMAP_OFFSET_SECTORS, DISKS, SB_BITMAP_PRESENT, SB_BYTES,
};
use crate::superblock::{feature, Superblock, MAX_SECTOR, MD_SB_MAGIC, ROLE_FAULTY, ROLE_SPARE};
use raidlab_core::{Error, ErrorKind, Op};

/// `state` bit: the array was stopped cleanly.
const SB_CLEAN: u32 = 1;

/// The devices an assembly has in service, for the disk table (md writes
/// the table from its member devices, not from an older table).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InService {
    /// Device numbers (descriptor indices) of every live member.
    pub numbers: Vec<u32>,
    /// Those being rebuilt or replacing another: spares on disk.
    pub rebuilding: Vec<u32>,
}

fn unsupported(msg: String) -> Error {
    Error::new(ErrorKind::Unsupported, Op::Write, msg)
}

impl Sb090 {
    /// An empty 0.90 superblock in the host's byte order (no device table),
    /// the template [`Sb090::from_v1`] fills for a new array.
    pub fn blank() -> Sb090 {
        let mut words = vec![0u32; SB_BYTES / 4];
        words[0] = MD_SB_MAGIC;
        words[2] = 90;
        Sb090 {
            big_endian: cfg!(target_endian = "big"),
            words,
            in_service: None,
        }
    }

    /// Whether descriptor `i` of this (read) table names a device at all:
    /// md zeroes the descriptors it has no device for.
    fn descriptor_used(&self, i: usize) -> bool {
        let d = self.disk(i);
        d.state & disk_state::REMOVED == 0
            && (d.state != 0 || d.number != 0 || d.major != 0 || d.minor != 0)
    }

    /// The 0.90 superblock holding the facts of `sb` (a v1 superblock in
    /// memory whose [`Superblock::v0_90`] is the superblock read or the
    /// [`Sb090::blank`] template), in the host's byte order, checksummed.
    pub fn from_v1(sb: &Superblock) -> Result<Sb090, Error> {
        let template = sb.v0_90.as_deref().cloned().unwrap_or_else(Sb090::blank);
        let bitmap = sb.feature_map & feature::BITMAP_OFFSET != 0;
        if bitmap && sb.bitmap_offset != BITMAP_OFFSET_SECTORS {
            return Err(unsupported(format!(
                "a bitmap {} sectors from the superblock: metadata 0.90 keeps its bitmap right after the superblock ({BITMAP_OFFSET_SECTORS} sectors)",
                sb.bitmap_offset
            )));
        }
        let kib = sb.size / 2;
        let size_kib = u32::try_from(kib).map_err(|_| {
            unsupported(format!(
                "{kib} KiB per member does not fit metadata 0.90's 32-bit size field (at most 4 TiB per member): use metadata 1.x"
            ))
        })?;
        let chunk_bytes = u64::from(sb.chunksize) * 512;
        let chunk = u32::try_from(chunk_bytes).map_err(|_| {
            unsupported(format!(
                "a chunk of {chunk_bytes} bytes does not fit metadata 0.90's chunk field"
            ))
        })?;
        if sb.raid_disks as usize > DISKS || sb.dev_number as usize >= DISKS {
            return Err(unsupported(format!(
                "metadata 0.90 records at most {DISKS} devices (raid_disks {}, device number {})",
                sb.raid_disks, sb.dev_number
            )));
        }
        let mut w = vec![0u32; SB_BYTES / 4];
        w[0] = MD_SB_MAGIC;
        w[3] = template.w(3); // patch_version
        for (i, at) in [5usize, 13, 14, 15].into_iter().enumerate() {
            let b = &sb.set_uuid[4 * i..4 * i + 4];
            w[at] = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        }
        w[6] = u32::try_from(sb.ctime & 0xff_ffff_ffff).unwrap_or(u32::MAX);
        w[7] = sb.level as u32;
        w[8] = size_kib;
        w[10] = sb.raid_disks;
        w[11] = template.md_minor();
        w[32] = u32::try_from(sb.utime & 0xff_ffff_ffff).unwrap_or(u32::MAX);
        let little = !cfg!(target_endian = "big");
        let put64 = |w: &mut [u32], at: usize, v: u64| {
            let (lo, hi) = (v as u32, (v >> 32) as u32);
            if little {
                (w[at], w[at + 1]) = (lo, hi);
            } else {
                (w[at], w[at + 1]) = (hi, lo);
            }
        };
        put64(&mut w, 39, sb.events);
        let reshaping = sb.feature_map & feature::RESHAPE_ACTIVE != 0;
        if reshaping {
            w[2] = 91;
            put64(&mut w, 44, sb.reshape_position);
            w[46] = sb.new_level as u32;
            w[47] = sb.delta_disks as u32;
            w[48] = sb.new_layout;
            w[49] = sb.new_chunk.saturating_mul(512);
        } else {
            w[2] = 90;
        }
        // Clean: state bit and the checkpoint "all" (MaxSector as md's
        // 32-bit field holds it); a checkpoint part-way holds when its
        // events equal the superblock's; dirty (writes in flight) records
        // neither, which reads back as "resync from the start".
        match sb.resync_offset {
            MAX_SECTOR => {
                w[33] = SB_CLEAN;
                w[43] = u32::MAX;
                put64(&mut w, 41, sb.events);
            }
            0 => {}
            at => {
                if let Ok(at) = u32::try_from(at) {
                    w[43] = at;
                    put64(&mut w, 41, sb.events);
                }
            }
        }
        if bitmap {
            w[33] |= SB_BITMAP_PRESENT;
        }
        w[64] = sb.layout;
        w[65] = chunk;
        let table = disk_table(sb, &template);
        let (mut nr, mut active, mut working, mut failed, mut spare) = (0, 0, 0, 0, 0);
        for (i, d) in table.iter().enumerate() {
            let Some(d) = d else { continue };
            let at = 128 + 32 * i;
            w[at..at + 5].copy_from_slice(&[d.number, d.major, d.minor, d.raid_disk, d.state]);
            if d.state & disk_state::REMOVED != 0 {
                failed += 1;
                continue;
            }
            nr += 1;
            if d.state & disk_state::FAULTY != 0 {
                failed += 1;
            } else if d.state & disk_state::ACTIVE != 0 {
                active += 1;
                working += 1;
            } else {
                spare += 1;
                working += 1;
            }
        }
        w[9] = nr;
        (w[34], w[35], w[36], w[37]) = (active, working, failed, spare);
        let me = 128 + 32 * sb.dev_number as usize;
        w.copy_within(me..me + 32, 992);
        let mut out = Sb090 {
            big_endian: !little,
            words: w,
            in_service: None,
        };
        out.words[38] = out.checksum();
        Ok(out)
    }

    /// The 4096 bytes, each word in this superblock's byte order.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.words
            .iter()
            .flat_map(|w| {
                if self.big_endian {
                    w.to_be_bytes()
                } else {
                    w.to_le_bytes()
                }
            })
            .collect()
    }
}

/// The descriptor of every device number, as md writes it: members in a
/// slot active and in sync (rebuilding ones as spares), faulty ones faulty,
/// spares as spares, and a slot no device holds "removed, faulty".
fn disk_table(sb: &Superblock, template: &Sb090) -> Vec<Option<Disk090>> {
    let service = template.in_service.as_ref();
    let present = |i: usize| {
        i == sb.dev_number as usize
            || match service {
                Some(s) => s.numbers.contains(&(i as u32)),
                None => template.descriptor_used(i),
            }
    };
    let rebuilding = |i: usize| {
        let own = i == sb.dev_number as usize
            && sb.feature_map & (feature::RECOVERY_OFFSET | feature::REPLACEMENT) != 0
            && sb.recovery_offset != MAX_SECTOR;
        own || service.is_some_and(|s| s.rebuilding.contains(&(i as u32)))
    };
    // A shrink that is running keeps its leaving member in its old slot
    // (md writes it active there until the reshape is done).
    let slots = if sb.feature_map & feature::RESHAPE_ACTIVE != 0 && sb.delta_disks < 0 {
        sb.raid_disks.saturating_add(sb.delta_disks.unsigned_abs())
    } else {
        sb.raid_disks
    };
    let mut table: Vec<Option<Disk090>> = (0..DISKS)
        .map(|i| {
            let role = sb.dev_roles.get(i).copied().unwrap_or(ROLE_SPARE);
            let old = template.disk(i);
            let desc = |raid_disk: u32, state: u32| Disk090 {
                number: i as u32,
                major: old.major,
                minor: old.minor,
                raid_disk,
                state,
            };
            match role {
                ROLE_FAULTY => Some(desc(i as u32, disk_state::FAULTY)),
                ROLE_SPARE => present(i).then(|| desc(i as u32, 0)),
                r if u32::from(r) < slots && !rebuilding(i) => {
                    Some(desc(u32::from(r), disk_state::ACTIVE | disk_state::SYNC))
                }
                // Rebuilding, or beyond the slots (journal, reshape): a spare.
                _ => present(i).then(|| desc(i as u32, 0)),
            }
        })
        .collect();
    let slots = (sb.raid_disks as usize).min(DISKS);
    for (slot, d) in table.iter_mut().enumerate().take(slots) {
        if d.is_none() {
            *d = Some(Disk090 {
                number: slot as u32,
                major: 0,
                minor: 0,
                raid_disk: slot as u32,
                state: disk_state::REMOVED | disk_state::FAULTY,
            });
        }
    }
    table
}
