//! A new member's superblock as mdadm writes one: its data offset and size
//! by mdadm's rules for each metadata version, and the fields of a new array.

use super::*;

/// mdadm's `choose_bm_space`: sectors reserved after the superblock for a bitmap,
/// reserved even when no bitmap is created (so one can be added later).
fn choose_bm_space(dev_sectors: u64) -> u64 {
    if dev_sectors < 128 {
        0
    } else if dev_sectors - 128 >= 200 * 1024 * 1024 * 2 {
        256
    } else if dev_sectors - 8 > 8 * 1024 * 1024 * 2 {
        128
    } else {
        8
    }
}

/// The data offset (bytes) mdadm 4.x chooses for a v1.2 member of `member_bytes`
/// with no explicit `--data-offset`, for a given chunk size in KiB (0 for raid1,
/// which has no chunk; mdadm's default chunk is 512).
///
/// The rule, in 512-byte sectors, with `dev` the member size:
/// 1. `bm` = bitmap space: 0 below 64 KiB, 8 (4 KiB) up to 8 GiB, 128 (64 KiB) up to
///    200 GiB, 256 (128 KiB) above;
/// 2. `headroom` (room to reshape) starts at 128 MiB (262144 sectors) and is halved
///    while `headroom * 1024 > dev` (aiming at ~0.1% of the device), but for chunked
///    levels never below `4 * chunk` (it stops halving once `headroom / 2 <
///    4 * chunk_kib` sectors);
/// 3. `data_offset = round_up(24 + bm + headroom, 2048)`, a multiple of 1 MiB.
///
/// So big members (> 128 GiB) get 264192 sectors (129 MiB); a 64 MiB member with a
/// 512K chunk gets 2 MiB; with a 64K chunk 1 MiB. Source: mdadm `super1.c`,
/// `validate_geometry1` and `choose_bm_space`. mdadm takes the offset from the first
/// member listed and uses it for all members. The result may not fit a tiny member;
/// callers check.
pub fn mdadm_data_offset(member_bytes: u64, chunk_kib: u32) -> u64 {
    let dev = member_bytes / 512;
    let bm = choose_bm_space(dev);
    let mut headroom: u64 = 128 * 1024 * 2;
    while (headroom << 10) > dev && (chunk_kib == 0 || headroom / 2 >= u64::from(chunk_kib) * 4) {
        headroom >>= 1;
    }
    let sectors = (24 + bm + headroom).div_ceil(2048) * 2048;
    sectors * 512
}

/// [`mdadm_data_offset`] with mdadm's default chunk (512 KiB) — what `mdadm --create`
/// picks for raid0/4/5/6/10 with no `--chunk` and no `--data-offset`. For raid1 use
/// `mdadm_data_offset(bytes, 0)`; with an explicit chunk, pass it.
pub fn default_data_offset(member_bytes: u64) -> u64 {
    mdadm_data_offset(member_bytes, 512)
}

/// [`mdadm_data_offset`] for a metadata version: 0 for 1.0 (the data starts at
/// the start of the member), mdadm's rule for 1.1 and 1.2 (the same for both:
/// room for the superblock, the bitmap and reshape headroom, rounded to 1 MiB).
pub fn mdadm_data_offset_for(version: MetadataVersion, member_bytes: u64, chunk_kib: u32) -> u64 {
    match version {
        MetadataVersion::V1_0 | MetadataVersion::V0_90 => 0,
        MetadataVersion::V1_1 | MetadataVersion::V1_2 => mdadm_data_offset(member_bytes, chunk_kib),
    }
}

/// [`default_member_sectors`] for a metadata version. For 1.0 (mdadm's
/// `validate_geometry1`): the device rounded down to 4 KiB less 8 KiB for the
/// superblock, 4 KiB for the bad block log and the bitmap space, then rounded
/// as for 1.2.
pub fn default_member_sectors_for(
    version: MetadataVersion,
    device_bytes: u64,
    data_offset_bytes: u64,
    level: i32,
    chunk_sectors: u32,
) -> u64 {
    match version {
        MetadataVersion::V0_90 => {
            // mdadm's avail_size0: everything before the superblock.
            let avail = crate::sb090::super_offset(device_bytes / 512).unwrap_or(0);
            default_member_sectors(avail * 512, 0, level, chunk_sectors)
        }
        MetadataVersion::V1_0 => {
            let dev = device_bytes / 512;
            let overhead = 16 + 8 + choose_bm_space(dev);
            let free = (dev & !7).saturating_sub(overhead);
            default_member_sectors(free * 512, 0, level, chunk_sectors)
        }
        MetadataVersion::V1_1 | MetadataVersion::V1_2 => {
            default_member_sectors(device_bytes, data_offset_bytes, level, chunk_sectors)
        }
    }
}

/// The per-member `size` (sectors) mdadm chooses when no `--size` is given: the
/// space after the data offset, in whole KiB, rounded down to a whole chunk (or to
/// 64 KiB for raid1). Use the smallest member.
pub fn default_member_sectors(
    device_bytes: u64,
    data_offset_bytes: u64,
    level: i32,
    chunk_sectors: u32,
) -> u64 {
    let free_kib = (device_bytes / 512).saturating_sub(data_offset_bytes / 512) / 2;
    let chunk_kib = u64::from(chunk_sectors / 2);
    let mut kib = if level_is_striped(level) && chunk_kib > 0 {
        free_kib - free_kib % chunk_kib
    } else {
        free_kib
    };
    if level == 1 {
        kib &= !63;
    }
    kib * 2
}

/// What `mdadm --create` is told about the array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewArray {
    pub uuid: [u8; 16],
    /// Array name; stored truncated to 31 bytes as mdadm does (e.g. `host:name`).
    pub name: String,
    pub level: i32,
    pub layout: u32,
    pub chunk_sectors: u32,
    pub raid_disks: u32,
    /// Sectors of each member used by the array (`size`).
    pub member_sectors: u64,
    /// Sectors from the start of each member to its data.
    pub data_offset_sectors: u64,
    /// Devices including spares: the roles table covers at least this many.
    pub total_devices: u32,
    /// Created clean (`--assume-clean`): `resync_offset` = MaxSector, else 0.
    pub clean: bool,
}

/// The superblock `mdadm --create` writes for one member. `role` is a slot number
/// or [`ROLE_SPARE`]; `dev_roles` holds slot `n` for device `n < raid_disks` and
/// spare for the rest (mdadm numbers devices in slot order, spares after), with
/// this member's own entry set to `role`.
///
/// As mdadm: `events` 0 (the kernel bumps it when it first starts the array),
/// `ctime` = `utime` = `now_secs`, `feature_map` 0, no bitmap, `max_dev` =
/// `(round_up(256 + 2 * total_devices, 512) - 256) / 2` (128 for up to 128 devices),
/// `data_size` = `device_sectors - data_offset`, and mdadm's default bad block log:
/// 8 sectors (512 entries) right after the space reserved for a bitmap (offset
/// `8 + bm_space` sectors from the superblock, see [`mdadm_data_offset`]) when it fits
/// before the data, else the 8 sectors just before the data. The log area itself is
/// not written: md reads it only once `feature::BAD_BLOCKS` is set, which it sets
/// itself after writing the log.
pub fn new_member(
    array: &NewArray,
    dev_number: u32,
    role: u16,
    device_uuid: [u8; 16],
    device_sectors: u64,
    now_secs: u64,
) -> Superblock {
    new_member_at(
        array,
        MetadataVersion::V1_2,
        dev_number,
        role,
        device_uuid,
        device_sectors,
        now_secs,
    )
}

/// [`new_member`] for any of metadata 1.0, 1.1 and 1.2, placed as mdadm's
/// `write_init_super1` places it:
/// - 1.1 and 1.2: the superblock at sector 0 or 8, `data_size` =
///   `device_sectors` less `data_offset`, the bad block log after the bitmap
///   space (or just before the data);
/// - 1.0: the superblock at `(device_sectors - 16) & !7`, data from sector 0
///   (`array.data_offset_sectors` should be 0), and before the superblock the
///   bitmap space (`choose_bm_space(size)`) plus an 8-sector bad block log at
///   -8, taken from the room left after `size` when there is less;
///   `data_size` is what remains before them;
/// - 0.90: the superblock 64 KiB aligned 64 to 128 KiB from the end, data
///   from sector 0 up to it, 27 device slots, no bad-block log; written as
///   0.90 by [`Superblock::write_to`].
pub fn new_member_at(
    array: &NewArray,
    version: MetadataVersion,
    dev_number: u32,
    role: u16,
    device_uuid: [u8; 16],
    device_sectors: u64,
    now_secs: u64,
) -> Superblock {
    let total = array
        .total_devices
        .max(array.raid_disks)
        .max(dev_number.saturating_add(1))
        .min(MAX_DEV_LIMIT);
    let sb_bytes = (HEADER_LEN as u64 + 2 * u64::from(total)).div_ceil(512) * 512;
    let max_dev = (((sb_bytes - HEADER_LEN as u64) / 2) as u32).min(MAX_DEV_LIMIT);
    let mut dev_roles: Vec<u16> = (0..max_dev)
        .map(|i| {
            if i < array.raid_disks {
                i as u16
            } else {
                ROLE_SPARE
            }
        })
        .collect();
    if let Some(r) = dev_roles.get_mut(dev_number as usize) {
        *r = role;
    }
    let mut name = array.name.clone();
    while name.len() > 31 {
        name.pop();
    }
    let data_offset = array.data_offset_sectors;
    let bm_space = choose_bm_space(array.member_sectors);
    let (super_offset, data_size, bblog_size, bblog_offset) = match version {
        MetadataVersion::V0_90 => {
            // Data from sector 0 up to the superblock, no bad-block log.
            let sb = crate::sb090::super_offset(device_sectors).unwrap_or(0);
            (sb, sb, 0, 0)
        }
        MetadataVersion::V1_0 => {
            let version = MetadataVersion::V1_0;
            let sb = version.super_offset(device_sectors).unwrap_or(0);
            let mut room = bm_space + 8;
            if sb < array.member_sectors.saturating_add(room) {
                room = sb.saturating_sub(array.member_sectors);
            }
            let data_size = sb.saturating_sub(room).saturating_sub(data_offset);
            let (bbs, bbo) = if room >= 8 { (8, -8) } else { (0, 0) };
            (sb, data_size, bbs, bbo)
        }
        MetadataVersion::V1_1 | MetadataVersion::V1_2 => {
            let sbo = version.super_offset(device_sectors).unwrap_or(0);
            let (bbs, bbo) = if data_offset >= sbo + 8 + bm_space + 8 {
                (8, (8 + bm_space) as i32)
            } else if data_offset >= sbo + 16 {
                (8, (data_offset - 8 - sbo) as i32)
            } else {
                (0, 0)
            };
            (sbo, device_sectors.saturating_sub(data_offset), bbs, bbo)
        }
    };
    let v0_90 = (version == MetadataVersion::V0_90).then(|| Box::new(crate::sb090::Sb090::blank()));
    let (max_dev, device_uuid) = if v0_90.is_some() {
        // 0.90 has 27 descriptors and no device UUID: it is the array's
        // with the device number last, as reading one gives it.
        let mut u = array.uuid;
        u[12..].copy_from_slice(&dev_number.to_be_bytes());
        dev_roles.resize(crate::sb090::DISKS, ROLE_SPARE);
        (crate::sb090::DISKS as u32, u)
    } else {
        (max_dev, device_uuid)
    };
    Superblock {
        feature_map: 0,
        set_uuid: array.uuid,
        set_name: name,
        ctime: now_secs & 0xff_ffff_ffff,
        level: array.level,
        layout: array.layout,
        size: array.member_sectors,
        chunksize: array.chunk_sectors,
        raid_disks: array.raid_disks,
        bitmap_offset: 0,
        new_level: 0,
        reshape_position: 0,
        delta_disks: 0,
        new_layout: 0,
        new_chunk: 0,
        new_offset: 0,
        data_offset,
        data_size,
        super_offset,
        recovery_offset: 0,
        dev_number,
        cnt_corrected_read: 0,
        device_uuid,
        devflags: 0,
        bblog_shift: 0,
        bblog_size,
        bblog_offset,
        utime: now_secs & 0xff_ffff_ffff,
        events: 0,
        resync_offset: if array.clean { MAX_SECTOR } else { 0 },
        max_dev,
        dev_roles,
        v0_90,
    }
}
