//! md's metadata 0.90 superblock (`mdp_super_t`): reading it (here) and
//! writing it (`write`, as md rebuilds it on every update).
//!
//! 4096 bytes at sector `(device_sectors & !127) - 128` (64 KiB aligned, 64 to
//! 128 KiB from the end; the data starts at sector 0). 1024 32-bit words in the
//! byte order of the host that wrote it: a little-endian host writes
//! little-endian words, a big-endian one (old PowerPC, SPARC, MIPS NAS units)
//! big-endian ones; the magic tells which. The 64-bit event counters are two
//! words, high word first on big-endian hosts, low word first on little-endian
//! ones, so each is one 64-bit integer in the superblock's byte order.
//!
//! | word | field | | word | field |
//! |---|---|---|---|---|
//! | 0 | md_magic 0xa92b4efc | | 32 | utime |
//! | 1 | major_version 0 | | 33 | state (bit 0 clean, 8 bitmap present) |
//! | 2 | minor_version 90 (91 during a reshape) | | 34..37 | active, working, failed, spare disks |
//! | 3 | patch_version | | 38 | sb_csum |
//! | 5 | set_uuid0 | | 39..40 | events (u64) |
//! | 6 | ctime | | 41..42 | cp_events (u64) |
//! | 7 | level | | 43 | recovery_cp (sectors) |
//! | 8 | size (KiB used per member) | | 44..45 | reshape_position (u64, minor 91) |
//! | 9 | nr_disks | | 46..49 | new_level, delta_disks, new_layout, new_chunk |
//! | 10 | raid_disks | | 64 | layout |
//! | 11 | md_minor | | 65 | chunk_size (bytes) |
//! | 12 | not_persistent | | 128 + 32 i | disks\[i\]: number, major, minor, raid_disk, state |
//! | 13..15 | set_uuid1..3 | | 992 | this_disk (same five words) |
//!
//! The checksum is the sum of the 1024 words (as the writing host read them)
//! with `sb_csum` taken as zero, in 64 bits, folded once to 32 bits.
//!
//! [`Sb090::to_v1`] gives the same facts as a v1 [`Superblock`] in memory
//! (roles from the disk descriptors, sizes in sectors) so that assembly and
//! reading need no second path; such a superblock keeps the 0.90 original,
//! and [`Superblock::write_to`] writes it back as 0.90 ([`Sb090::from_v1`]).

use crate::superblock::{feature, Superblock, MAX_SECTOR, MD_SB_MAGIC, ROLE_FAULTY, ROLE_SPARE};
use raidlab_core::{Error, Volume};
use serde_json::{json, Value};

/// Bytes of the superblock.
pub const SB_BYTES: usize = 4096;
/// Disk descriptors in the table.
pub const DISKS: usize = 27;
/// Sectors reserved at the end of the device (64 KiB).
const RESERVED_SECTORS: u64 = 128;
/// Where md keeps a 0.90 internal bitmap: right after the 4 KiB superblock
/// (md's `bitmap_info.default_offset`, sectors from the superblock), in the
/// rest of the reserved 64 KiB (60 KiB: mdadm's `add_internal_bitmap0`).
pub const BITMAP_OFFSET_SECTORS: i32 = (SB_BYTES / 512) as i32;
/// Sectors of the 0.90 bitmap area (60 KiB).
pub const BITMAP_ROOM_SECTORS: u64 = RESERVED_SECTORS - (SB_BYTES / 512) as u64;
/// `state` bit: an internal bitmap follows the superblock.
pub(crate) const SB_BITMAP_PRESENT: u32 = 1 << 8;

/// Disk descriptor state bits.
pub mod disk_state {
    pub const FAULTY: u32 = 1;
    pub const ACTIVE: u32 = 2;
    pub const SYNC: u32 = 4;
    pub const REMOVED: u32 = 8;
    pub const WRITE_MOSTLY: u32 = 1 << 9;
    pub const FAILFAST: u32 = 1 << 10;
}

/// One `mdp_disk_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disk090 {
    pub number: u32,
    pub major: u32,
    pub minor: u32,
    pub raid_disk: u32,
    pub state: u32,
}

/// A decoded 0.90 superblock: its words (in value, whatever the byte order on
/// disk) and the byte order it was written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sb090 {
    pub big_endian: bool,
    words: Vec<u32>,
    /// The devices an assembly has in service, set before it writes, so the
    /// disk table lists them all (None: the table read, plus this device).
    pub in_service: Option<InService>,
}

mod write;
pub use write::InService;

/// The sector of the 0.90 superblock on a device of `device_sectors` (md's
/// `MD_NEW_SIZE_SECTORS`); `None` when the device is smaller than 64 KiB.
pub fn super_offset(device_sectors: u64) -> Option<u64> {
    (device_sectors >= RESERVED_SECTORS)
        .then(|| (device_sectors & !(RESERVED_SECTORS - 1)) - RESERVED_SECTORS)
}

fn invalid(field: &str, found: impl std::fmt::Display, expected: impl std::fmt::Display) -> Error {
    crate::le::invalid("0.90 superblock", field, found, expected)
}

impl Sb090 {
    /// Decode and check 4096 bytes. Never panics.
    pub fn parse(bytes: &[u8]) -> Result<Sb090, Error> {
        if bytes.len() < SB_BYTES {
            return Err(invalid(
                "(length)",
                format!("{} bytes", bytes.len()),
                format!("{SB_BYTES} bytes"),
            ));
        }
        let le = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let big_endian = if le == MD_SB_MAGIC {
            false
        } else if le.swap_bytes() == MD_SB_MAGIC {
            true
        } else {
            return Err(invalid(
                "md_magic",
                format!("{le:#010x}"),
                format!("{MD_SB_MAGIC:#010x} in either byte order"),
            ));
        };
        let words: Vec<u32> = bytes[..SB_BYTES]
            .chunks_exact(4)
            .map(|c| {
                let a = [c[0], c[1], c[2], c[3]];
                if big_endian {
                    u32::from_be_bytes(a)
                } else {
                    u32::from_le_bytes(a)
                }
            })
            .collect();
        let sb = Sb090 {
            big_endian,
            words,
            in_service: None,
        };
        if sb.w(1) != 0 {
            return Err(invalid("major_version", sb.w(1), 0));
        }
        if !matches!(sb.w(2), 90 | 91) {
            return Err(invalid("minor_version", sb.w(2), "90 or 91"));
        }
        let stored = sb.w(38);
        let computed = sb.checksum();
        // PLANTED BUG (tests only, `planted.rs`): a checksum mismatch let by.
        if stored != computed && !planted!(TornSuperblockTrusted) {
            return Err(invalid(
                "sb_csum",
                format!("{stored:#x}"),
                format!("{computed:#x} (checksum mismatch: the superblock is corrupt)"),
            ));
        }
        let raid_disks = sb.raid_disks();
        if raid_disks == 0 || raid_disks as usize > DISKS {
            return Err(invalid("raid_disks", raid_disks, format!("1..={DISKS}")));
        }
        if sb.this_disk().number as usize >= DISKS {
            return Err(invalid(
                "this_disk.number",
                sb.this_disk().number,
                format!("less than {DISKS}"),
            ));
        }
        if matches!(sb.level(), 0 | 4 | 5 | 6 | 10) && sb.chunk_bytes() < 4096 {
            return Err(invalid(
                "chunk_size",
                sb.chunk_bytes(),
                "at least 4096 bytes for a striped level",
            ));
        }
        Ok(sb)
    }

    fn w(&self, i: usize) -> u32 {
        self.words.get(i).copied().unwrap_or(0)
    }

    /// A 64-bit counter stored as two words at `i` in the writer's order.
    fn w64(&self, i: usize) -> u64 {
        let (a, b) = (u64::from(self.w(i)), u64::from(self.w(i + 1)));
        if self.big_endian {
            a << 32 | b
        } else {
            b << 32 | a
        }
    }

    /// md's `calc_sb0_csum`.
    pub fn checksum(&self) -> u32 {
        let sum: u64 = self
            .words
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 38)
            .map(|(_, &w)| u64::from(w))
            .sum();
        ((sum & 0xffff_ffff) + (sum >> 32)) as u32
    }

    pub fn minor_version(&self) -> u32 {
        self.w(2)
    }
    pub fn uuid_words(&self) -> [u32; 4] {
        [self.w(5), self.w(13), self.w(14), self.w(15)]
    }
    pub fn ctime(&self) -> u32 {
        self.w(6)
    }
    pub fn level(&self) -> i32 {
        self.w(7) as i32
    }
    /// KiB of each member the array uses.
    pub fn size_kib(&self) -> u32 {
        self.w(8)
    }
    pub fn nr_disks(&self) -> u32 {
        self.w(9)
    }
    pub fn raid_disks(&self) -> u32 {
        self.w(10)
    }
    pub fn md_minor(&self) -> u32 {
        self.w(11)
    }
    pub fn utime(&self) -> u32 {
        self.w(32)
    }
    pub fn state(&self) -> u32 {
        self.w(33)
    }
    pub fn is_clean(&self) -> bool {
        self.state() & 1 != 0
    }
    pub fn events(&self) -> u64 {
        self.w64(39)
    }
    pub fn layout(&self) -> u32 {
        self.w(64)
    }
    pub fn chunk_bytes(&self) -> u32 {
        self.w(65)
    }
    fn disk_at(&self, word: usize) -> Disk090 {
        Disk090 {
            number: self.w(word),
            major: self.w(word + 1),
            minor: self.w(word + 2),
            raid_disk: self.w(word + 3),
            state: self.w(word + 4),
        }
    }
    /// `disks[i]`.
    pub fn disk(&self, i: usize) -> Disk090 {
        self.disk_at(128 + 32 * i.min(DISKS - 1))
    }
    pub fn this_disk(&self) -> Disk090 {
        self.disk_at(992)
    }

    /// The same facts as a v1 superblock in memory, for assembly and reading
    /// (see the module doc); `super_offset` is where this one was found.
    pub fn to_v1(&self, super_offset: u64) -> Superblock {
        let mut set_uuid = [0u8; 16];
        for (i, w) in self.uuid_words().iter().enumerate() {
            set_uuid[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
        }
        let this = self.this_disk();
        let mut device_uuid = set_uuid;
        device_uuid[12..].copy_from_slice(&this.number.to_be_bytes());
        let reshaping = self.minor_version() >= 91 && self.w64(44) != u64::MAX;
        // While a shrink runs, `raid_disks` is already the new count, but the
        // member leaving still holds its slot in the old geometry (md keeps
        // its raid_disk as the descriptor says): slots reach the larger count.
        let slots = if reshaping {
            let delta = i64::from(self.w(47) as i32);
            (i64::from(self.raid_disks()) - delta.min(0)).min(DISKS as i64) as u32
        } else {
            self.raid_disks()
        };
        let dev_roles = (0..DISKS)
            .map(|i| {
                let d = self.disk(i);
                if d.state & disk_state::FAULTY != 0 {
                    ROLE_FAULTY
                } else if d.state & disk_state::ACTIVE != 0
                    && d.state & disk_state::SYNC != 0
                    && d.raid_disk < slots
                {
                    d.raid_disk as u16
                } else {
                    ROLE_SPARE
                }
            })
            .collect();
        // md (super_90_validate): clean, or the checkpoint when the events
        // match, else from the start.
        let resync_offset = if self.is_clean() {
            MAX_SECTOR
        } else if self.w64(39) == self.w64(41) {
            u64::from(self.w(43))
        } else {
            0
        };
        // md's internal bitmap for 0.90 has no offset field: the state bit
        // says it is there, always right after the superblock.
        let bitmap = self.state() & SB_BITMAP_PRESENT != 0;
        let mut feature_map = 0;
        if reshaping {
            feature_map |= feature::RESHAPE_ACTIVE;
        }
        if bitmap {
            feature_map |= feature::BITMAP_OFFSET;
        }
        Superblock {
            feature_map,
            set_uuid,
            set_name: String::new(),
            ctime: u64::from(self.ctime()),
            level: self.level(),
            layout: self.layout(),
            size: u64::from(self.size_kib()) * 2,
            chunksize: self.chunk_bytes() / 512,
            raid_disks: self.raid_disks(),
            bitmap_offset: if bitmap { BITMAP_OFFSET_SECTORS } else { 0 },
            new_level: if reshaping { self.w(46) as i32 } else { 0 },
            reshape_position: if reshaping { self.w64(44) } else { 0 },
            delta_disks: if reshaping { self.w(47) as i32 } else { 0 },
            new_layout: if reshaping { self.w(48) } else { 0 },
            new_chunk: if reshaping { self.w(49) / 512 } else { 0 },
            new_offset: 0,
            data_offset: 0,
            data_size: super_offset,
            super_offset,
            recovery_offset: 0,
            dev_number: this.number,
            cnt_corrected_read: 0,
            device_uuid,
            devflags: 0,
            bblog_shift: 0,
            bblog_size: 0,
            bblog_offset: 0,
            utime: u64::from(self.utime()),
            events: self.events(),
            resync_offset,
            max_dev: DISKS as u32,
            dev_roles,
            v0_90: Some(Box::new(self.clone())),
        }
    }

    /// `mdadm --examine`'s (label, value) lines for 0.90 (mdadm 4.x
    /// `examine_super0`), without the disk table ([`Sb090::disk_table`]).
    pub fn examine_lines(&self) -> Vec<(String, String)> {
        use crate::superblock::examine::{ctime_utc, human_size, layout_name, level_name};
        let mut v: Vec<(String, String)> = Vec::new();
        let mut add = |l: &str, val: String| v.push((l.to_string(), val));
        add("Magic", format!("{MD_SB_MAGIC:08x}"));
        add(
            "Version",
            format!("{}.{:02}.{:02}", self.w(1), self.w(2), self.w(3)),
        );
        let u = self.uuid_words();
        add(
            "UUID",
            format!("{:08x}:{:08x}:{:08x}:{:08x}", u[0], u[1], u[2], u[3]),
        );
        if self.w(12) != 0 {
            add("Eedk", "not persistent".into());
        }
        add("Creation Time", ctime_utc(u64::from(self.ctime())));
        let level = self.level();
        add(
            "Raid Level",
            level_name(level).unwrap_or("-unknown-").into(),
        );
        if level > 0 {
            let size = self.size_kib();
            add(
                "Used Dev Size",
                format!("{size}{}", human_size(u64::from(size) << 10)),
            );
            let rd = u64::from(self.raid_disks());
            let (ddsks, denom) = match level {
                1 => (1, 1),
                4 | 5 => (rd.saturating_sub(1), 1),
                6 => (rd.saturating_sub(2), 1),
                10 => (
                    rd,
                    u64::from((self.layout() & 255) * ((self.layout() >> 8) & 255)),
                ),
                _ => (0, 1),
            };
            if ddsks != 0 && denom != 0 {
                let asize = (u64::from(size) << 10) * ddsks / denom;
                add(
                    "Array Size",
                    format!("{}{}", asize >> 10, human_size(asize)),
                );
            }
        }
        add("Raid Devices", self.raid_disks().to_string());
        add("Total Devices", self.nr_disks().to_string());
        add("Preferred Minor", self.md_minor().to_string());
        if self.minor_version() > 90 && self.w64(44) != u64::MAX {
            let pos = self.w64(44);
            add(
                "Reshape pos'n",
                format!("{}{}", pos / 2, human_size(pos.wrapping_shl(9))),
            );
            let (new_level, delta) = (self.w(46) as i32, self.w(47) as i32);
            let (new_layout, new_chunk) = (self.w(48), self.w(49));
            if delta != 0 {
                add(
                    "Delta Devices",
                    format!(
                        "{delta} ({}->{})",
                        i64::from(self.raid_disks()) - i64::from(delta),
                        self.raid_disks()
                    ),
                );
            }
            if new_level != level {
                add(
                    "New Level",
                    level_name(new_level).unwrap_or("-unknown-").into(),
                );
            }
            if new_layout != self.layout() {
                // mdadm's examine_super0 spells a RAID 10 layout out in full
                // (both counts), unlike v1's.
                let name = match level {
                    5 | 6 => layout_name(level, new_layout, 0),
                    10 => Some(format!(
                        "near={}, {}={}",
                        new_layout & 255,
                        if new_layout & 0x1_0000 != 0 {
                            "offset"
                        } else {
                            "far"
                        },
                        (new_layout >> 8) & 255
                    )),
                    _ => None,
                };
                if let Some(n) = name {
                    add("New Layout", n);
                }
            }
            if new_chunk != self.chunk_bytes() {
                // In bytes, no unit: mdadm prints 0.90's field as it is.
                add("New Chunksize", new_chunk.to_string());
            }
        }
        add("Update Time", ctime_utc(u64::from(self.utime())));
        add(
            "State",
            if self.is_clean() { "clean" } else { "active" }.into(),
        );
        if self.state() & (1 << 8) != 0 {
            add("Internal Bitmap", "present".into());
        }
        add("Active Devices", self.w(34).to_string());
        add("Working Devices", self.w(35).to_string());
        add("Failed Devices", self.w(36).to_string());
        add("Spare Devices", self.w(37).to_string());
        add("Checksum", format!("{:x} - correct", self.w(38)));
        add("Events", self.events().to_string());
        if matches!(level, 5 | 6 | 10) {
            if let Some(l) = layout_name(level, self.layout(), 0) {
                add("Layout", l);
            }
        }
        match level {
            0 | 4 | 5 | 6 | 10 => add("Chunk Size", format!("{}K", self.chunk_bytes() / 1024)),
            -1 => add("Rounding", format!("{}K", self.chunk_bytes() / 1024)),
            _ => {}
        }
        v
    }

    /// mdadm's disk table: `this` then `disks[0..raid_disks + spare_disks]`.
    pub fn disk_table(&self) -> Vec<(String, Disk090)> {
        let n = (self.raid_disks() as usize + self.w(37) as usize).min(DISKS);
        std::iter::once(("this".to_string(), self.this_disk()))
            .chain((0..n).map(|d| (d.to_string(), self.disk(d))))
            .collect()
    }

    /// A descriptor's state words as mdadm prints them.
    pub fn state_words(state: u32) -> String {
        let mut s = Vec::new();
        let base = state & !(disk_state::WRITE_MOSTLY | disk_state::FAILFAST);
        for (bit, word) in [
            (disk_state::FAULTY, "faulty"),
            (disk_state::ACTIVE, "active"),
            (disk_state::SYNC, "sync"),
            (disk_state::REMOVED, "removed"),
            (disk_state::WRITE_MOSTLY, "write-mostly"),
            (disk_state::FAILFAST, "failfast"),
        ] {
            if state & bit != 0 {
                s.push(word);
            }
        }
        if base == 0 {
            s.push("spare");
        }
        s.join(" ")
    }

    /// The text of `mdadm --examine` (labels right-aligned as mdadm does), the
    /// disk table included.
    pub fn examine_text(&self) -> String {
        let mut out: String = self
            .examine_lines()
            .into_iter()
            .map(|(l, v)| format!("{l:>15} : {v}\n"))
            .collect();
        out.push_str("\n      Number   Major   Minor   RaidDevice State\n");
        for (i, (name, d)) in self.disk_table().into_iter().enumerate() {
            out.push_str(&format!(
                "{name:>4} {:5}   {:5}    {:5}    {:5}      {}\n",
                d.number,
                d.major,
                d.minor,
                d.raid_disk,
                Self::state_words(d.state)
            ));
            if i == 0 {
                out.push('\n');
            }
        }
        out
    }

    /// The examine report as JSON (mdadm's labels in snake_case); `reshape`
    /// as v1's ([`Superblock::reshape_json`]), from the same fields.
    pub fn examine_json(&self, super_offset: u64) -> Value {
        let disks: Vec<Value> = self
            .disk_table()
            .into_iter()
            .map(|(slot, d)| {
                json!({
                    "slot": slot,
                    "number": d.number,
                    "major": d.major,
                    "minor": d.minor,
                    "raid_disk": d.raid_disk,
                    "state": Self::state_words(d.state),
                })
            })
            .collect();
        let u = self.uuid_words();
        json!({
            "magic": format!("{MD_SB_MAGIC:08x}"),
            "version": format!("{}.{:02}.{:02}", self.w(1), self.w(2), self.w(3)),
            "byte_order": if self.big_endian { "big-endian" } else { "little-endian" },
            "array_uuid": format!("{:08x}:{:08x}:{:08x}:{:08x}", u[0], u[1], u[2], u[3]),
            "creation_time": self.ctime(),
            "level": crate::superblock::examine::level_name(self.level()),
            "level_number": self.level(),
            "used_dev_size_kib": self.size_kib(),
            "raid_devices": self.raid_disks(),
            "total_devices": self.nr_disks(),
            "preferred_minor": self.md_minor(),
            "update_time": self.utime(),
            "state": if self.is_clean() { "clean" } else { "active" },
            "active_devices": self.w(34),
            "working_devices": self.w(35),
            "failed_devices": self.w(36),
            "spare_devices": self.w(37),
            "checksum": format!("{:x}", self.w(38)),
            "events": self.events(),
            "layout": crate::superblock::examine::layout_name(self.level(), self.layout(), 0),
            "chunk_size_kib": self.chunk_bytes() / 1024,
            "super_offset": super_offset,
            "data_offset": 0,
            "device_number": self.this_disk().number,
            "raid_disk": self.this_disk().raid_disk,
            "disks": disks,
            "reshape": self.to_v1(super_offset).reshape_json(),
        })
    }
}

/// Read the 0.90 superblock of `vol`, as a v1 [`Superblock`] in memory (see
/// the module doc). `Ok(None)` when the magic is not there in either order.
pub fn read_from(vol: &dyn Volume) -> Result<Option<Superblock>, Error> {
    let name = vol.name();
    let Some(at_sector) = super_offset(vol.size() / 512) else {
        return Ok(None);
    };
    let at = at_sector * 512;
    let mut buf = vec![0u8; SB_BYTES];
    vol.read_at(&mut buf, at)?;
    let magic = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if magic != MD_SB_MAGIC && magic.swap_bytes() != MD_SB_MAGIC {
        return Ok(None);
    }
    let ctx = |e: Error| e.on_device(name.clone()).at(at, SB_BYTES as u64);
    let sb = Sb090::parse(&buf).map_err(ctx)?;
    let v1 = sb.to_v1(at_sector);
    if v1.size > at_sector {
        return Err(ctx(invalid(
            "size",
            format!("{} KiB", sb.size_kib()),
            format!("at most the {} KiB before the superblock", at_sector / 2),
        )));
    }
    Ok(Some(v1))
}

#[cfg(test)]
mod tests;
