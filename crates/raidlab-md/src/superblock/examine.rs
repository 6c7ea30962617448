//! `mdadm --examine` style output for a v1 superblock (1.0, 1.1, 1.2): the same labels, order and
//! value formatting as mdadm 4.x (`examine_super1`), as (label, value) pairs, as
//! text and as JSON.
//!
//! Level and layout names are formatted here (private, no dependency on
//! raidlab-layout) from the tables mdadm prints with. Times are printed in UTC
//! (mdadm uses the local time zone: run it with `TZ=UTC` to compare).

use super::*;
use serde_json::{json, Value};

pub(crate) fn level_name(level: i32) -> Option<&'static str> {
    Some(match level {
        -5 => "faulty",
        -4 => "multipath",
        -1 => "linear",
        0 => "raid0",
        1 => "raid1",
        4 => "raid4",
        5 => "raid5",
        6 => "raid6",
        10 => "raid10",
        _ => return None,
    })
}

fn raid5_layout_name(layout: u32) -> Option<&'static str> {
    Some(match layout {
        0 => "left-asymmetric",
        1 => "right-asymmetric",
        2 => "left-symmetric",
        3 => "right-symmetric",
        4 => "parity-first",
        5 => "parity-last",
        _ => return None,
    })
}

fn raid6_layout_name(layout: u32) -> Option<&'static str> {
    Some(match layout {
        0..=5 => return raid5_layout_name(layout),
        8 => "ddf-zero-restart",
        9 => "ddf-N-restart",
        10 => "ddf-N-continue",
        16 => "left-asymmetric-6",
        17 => "right-asymmetric-6",
        18 => "left-symmetric-6",
        19 => "right-symmetric-6",
        20 => "parity-first-6",
        _ => return None,
    })
}

/// raid10 layout as mdadm prints it: `near=2`, `far=2`, `offset=2`, `near=2, far=2`.
fn raid10_layout_name(layout: u32) -> String {
    let near = layout & 0xff;
    let far = (layout >> 8) & 0xff;
    let far_word = if layout & 0x1_0000 != 0 {
        "offset"
    } else {
        "far"
    };
    let mut parts = Vec::new();
    if near != 1 {
        parts.push(format!("near={near}"));
    }
    if far != 1 {
        parts.push(format!("{far_word}={far}"));
    }
    if near * far == 1 {
        return "NO REDUNDANCY".into();
    }
    parts.join(", ")
}

/// The layout name mdadm prints for `level`, or `None` for levels that print no
/// layout line (raid1, raid4, raid0 without the RAID0_LAYOUT feature, ...).
pub fn layout_name(level: i32, layout: u32, feature_map: u32) -> Option<String> {
    let unknown = || "-unknown-".to_string();
    match level {
        0 if feature_map & feature::RAID0_LAYOUT != 0 => Some(match layout {
            1 => "original".into(),
            2 => "alternate".into(),
            0 => "dangerous".into(),
            _ => unknown(),
        }),
        5 => Some(raid5_layout_name(layout).map_or_else(unknown, str::to_string)),
        6 => Some(raid6_layout_name(layout).map_or_else(unknown, str::to_string)),
        10 => Some(raid10_layout_name(layout)),
        _ => None,
    }
}

/// mdadm's `human_size`: "" below 5000 KiB, else " (x.xx MiB y.yy MB)" (GiB/GB from
/// 2 GiB, TiB/TB from 2 TiB), rounded to hundredths.
pub(crate) fn human_size(bytes: u64) -> String {
    let b = i128::from(bytes);
    let fmt = |c: i128| format!("{}.{:02}", c / 100, c % 100);
    if b < 5000 * 1024 {
        String::new()
    } else if b < 2 << 30 {
        let cmib = (b * 200 / (1 << 20) + 1) / 2;
        let cmb = (b / (1_000_000 / 200) + 1) / 2;
        format!(" ({} MiB {} MB)", fmt(cmib), fmt(cmb))
    } else if b < 2 << 40 {
        let cgib = (b * 200 / (1 << 30) + 1) / 2;
        let cgb = (b / (1_000_000_000 / 200) + 1) / 2;
        format!(" ({} GiB {} GB)", fmt(cgib), fmt(cgb))
    } else {
        let ctib = (b * 200 / (1 << 40) + 1) / 2;
        let ctb = (b / (1_000_000_000_000 / 200) + 1) / 2;
        format!(" ({} TiB {} TB)", fmt(ctib), fmt(ctb))
    }
}

/// `ctime(3)` without the newline, in UTC: `Thu Jan  1 00:00:00 1970`.
pub(crate) fn ctime_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WD: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MO: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        WD[days.rem_euclid(7) as usize],
        MO[(month - 1) as usize],
        day,
        h,
        m,
        s,
        year
    )
}

/// A UUID as mdadm prints it: `xxxxxxxx:xxxxxxxx:xxxxxxxx:xxxxxxxx`.
pub fn format_uuid(u: &[u8; 16]) -> String {
    u.chunks(4)
        .map(|c| c.iter().map(|b| format!("{b:02x}")).collect::<String>())
        .collect::<Vec<_>>()
        .join(":")
}

impl Superblock {
    /// The `sb_csum` [`Superblock::to_bytes`] writes.
    pub fn sb_csum(&self) -> u32 {
        Self::checksum(&self.to_bytes())
    }

    /// mdadm's "Unused Space" (before, after) in sectors, `None` when mdadm prints
    /// no such line. The space taken by an internal bitmap is not known from the
    /// superblock alone and is not subtracted.
    pub fn unused_space(&self, device_size_sectors: u64) -> Option<(u64, u64)> {
        let used = if self.level <= 0 {
            self.data_size
        } else {
            self.size
        };
        if self.data_offset < self.super_offset {
            // v1.0: the metadata after the data; the room up to the first of
            // the bad block log, the bitmap or PPL and the superblock.
            let so = i128::from(self.super_offset);
            let mut end = so;
            if self.bblog_offset != 0 && self.bblog_size != 0 {
                end = end.min(so + i128::from(self.bblog_offset));
            }
            let mut meta = 0i128;
            if self.feature_map & feature::BITMAP_OFFSET != 0 {
                meta += i128::from(self.bitmap_offset);
            } else if self.feature_map & (feature::PPL | feature::MULTIPLE_PPLS) != 0 {
                meta += i128::from(self.ppl_offset());
            }
            end = end.min(so + meta);
            let data_end = i128::from(self.data_offset) + i128::from(used);
            let after = if data_end < end {
                (end - data_end) as u64
            } else {
                0
            };
            let before = self.data_offset;
            let after = if before == 0 && after == 0 { 1 } else { after };
            return (after != 1 && self.feature_map & feature::NEW_OFFSET == 0)
                .then_some((before, after));
        }
        let mut earliest = self.super_offset.wrapping_add(72);
        if self.feature_map & (feature::PPL | feature::MULTIPLE_PPLS) != 0
            && self.feature_map & feature::BITMAP_OFFSET == 0
            && self.ppl_offset() > 0
        {
            earliest = earliest.max(self.ppl_offset() as u64 + u64::from(self.ppl_size()));
        }
        if self.bblog_offset != 0 && self.bblog_size != 0 {
            let bbend = self
                .super_offset
                .wrapping_add(self.bblog_offset as i64 as u64)
                .wrapping_add(u64::from(self.bblog_size));
            earliest = earliest.max(bbend);
        }
        let before = self.data_offset.saturating_sub(earliest);
        let mut after = device_size_sectors
            .wrapping_sub(used)
            .wrapping_sub(self.data_offset);
        if before == 0 && after == 0 {
            after = 1;
        }
        if self.role() == Role::Journal {
            after = device_size_sectors.wrapping_sub(self.data_offset) % 8;
        }
        (after != 1 && self.feature_map & feature::NEW_OFFSET == 0).then_some((before, after))
    }

    /// The `Device Role` value as mdadm prints it (mdadm prints `spare` for a faulty
    /// device too, and treats a `dev_number` outside `dev_roles` as faulty).
    pub fn device_role_string(&self) -> String {
        let role = self
            .dev_roles
            .get(self.dev_number as usize)
            .copied()
            .unwrap_or(ROLE_FAULTY);
        if role >= ROLE_FAULTY {
            "spare".into()
        } else if role == ROLE_JOURNAL {
            "Journal".into()
        } else if self.feature_map & feature::REPLACEMENT != 0 {
            format!("Replacement device {role}")
        } else {
            format!("Active device {role}")
        }
    }

    /// (label, value) pairs in `mdadm --examine`'s order, labels and formatting
    /// (mdadm 4.x, v1 metadata). `device_size_sectors` is the member's size, needed
    /// for "Unused Space". Not printed: mdadm's "(local to host ...)" note, the
    /// cluster name and mdadm's section-separating blank lines.
    pub fn examine_lines(&self, device_size_sectors: u64) -> Vec<(String, String)> {
        if let Some(v0) = &self.v0_90 {
            return v0.examine_lines();
        }
        let mut v: Vec<(String, String)> = Vec::new();
        let mut add = |l: &str, val: String| v.push((l.to_string(), val));
        let fm = self.feature_map;
        add("Magic", format!("{MD_SB_MAGIC:08x}"));
        add("Version", self.version().name().to_string());
        add("Feature Map", format!("{fm:#x}"));
        add("Array UUID", format_uuid(&self.set_uuid));
        add("Name", self.set_name.clone());
        add("Creation Time", ctime_utc(self.ctime & 0xff_ffff_ffff));
        add(
            "Raid Level",
            level_name(self.level).unwrap_or("-unknown-").into(),
        );
        add("Raid Devices", self.raid_disks.to_string());
        add(
            "Avail Dev Size",
            format!(
                "{} sectors{}",
                self.data_size,
                human_size(self.data_size.wrapping_shl(9))
            ),
        );
        if self.level > 0 {
            let (ddsks, denom): (u64, u64) = match self.level {
                1 => (1, 1),
                4 | 5 => (u64::from(self.raid_disks.saturating_sub(1)), 1),
                6 => (u64::from(self.raid_disks.saturating_sub(2)), 1),
                10 => (
                    u64::from(self.raid_disks),
                    u64::from((self.layout & 0xff) * ((self.layout >> 8) & 0xff)),
                ),
                _ => (0, 1),
            };
            if ddsks != 0 && denom != 0 {
                let asize = (u128::from(self.size) << 9) * u128::from(ddsks) / u128::from(denom);
                let asize = asize.min(u128::from(u64::MAX)) as u64;
                add(
                    "Array Size",
                    format!("{} KiB{}", asize >> 10, human_size(asize)),
                );
            }
            if self.size != self.data_size {
                add(
                    "Used Dev Size",
                    format!(
                        "{} sectors{}",
                        self.size,
                        human_size(self.size.wrapping_shl(9))
                    ),
                );
            }
        }
        if self.data_offset != 0 {
            add("Data Offset", format!("{} sectors", self.data_offset));
        }
        if self.new_offset != 0 && fm & feature::NEW_OFFSET != 0 {
            let o = self.data_offset.wrapping_add(self.new_offset as i64 as u64);
            add("New Offset", format!("{o} sectors"));
        }
        add("Super Offset", format!("{} sectors", self.super_offset));
        if fm & feature::RECOVERY_OFFSET != 0 {
            add(
                "Recovery Offset",
                format!("{} sectors", self.recovery_offset),
            );
        }
        if let Some((before, after)) = self.unused_space(device_size_sectors) {
            add(
                "Unused Space",
                format!("before={before} sectors, after={after} sectors"),
            );
        }
        add(
            "State",
            if self.is_clean() { "clean" } else { "active" }.into(),
        );
        add("Device UUID", format_uuid(&self.device_uuid));
        if fm & feature::BITMAP_OFFSET != 0 {
            add(
                "Internal Bitmap",
                format!("{} sectors from superblock", self.bitmap_offset),
            );
        } else if fm & (feature::PPL | feature::MULTIPLE_PPLS) != 0 {
            add(
                "PPL",
                format!(
                    "{} sectors at offset {} sectors from superblock",
                    self.ppl_size(),
                    self.ppl_offset() as u16
                ),
            );
        }
        if fm & feature::RESHAPE_ACTIVE != 0 {
            add(
                "Reshape pos'n",
                format!(
                    "{}{}",
                    self.reshape_position / 2,
                    human_size(self.reshape_position.wrapping_shl(9))
                ),
            );
            if self.delta_disks != 0 {
                add(
                    "Delta Devices",
                    format!(
                        "{} ({}->{})",
                        self.delta_disks,
                        i64::from(self.raid_disks) - i64::from(self.delta_disks),
                        self.raid_disks
                    ),
                );
            }
            if self.new_level != self.level {
                add(
                    "New Level",
                    level_name(self.new_level).unwrap_or("-unknown-").into(),
                );
            }
            if self.new_layout != self.layout {
                if let Some(n) = layout_name(self.level, self.new_layout, 0) {
                    add("New Layout", n);
                }
            }
            if self.new_chunk != self.chunksize {
                add("New Chunksize", format!("{}K", self.new_chunk / 2));
            }
        }
        if self.devflags != 0 {
            let mut f = Vec::new();
            if self.devflags & devflag::WRITE_MOSTLY != 0 {
                f.push("write-mostly");
            }
            if self.devflags & devflag::FAIL_FAST != 0 {
                f.push("failfast");
            }
            add("Flags", f.join(" "));
        }
        add("Update Time", ctime_utc(self.utime & 0xff_ffff_ffff));
        if self.bblog_size != 0 && self.bblog_offset != 0 {
            let mut s = format!(
                "{} entries available at offset {} sectors",
                u32::from(self.bblog_size) * 512 / 8,
                self.bblog_offset
            );
            if fm & feature::BAD_BLOCKS != 0 {
                s.push_str(" - bad blocks present.");
            }
            add("Bad Block Log", s);
        }
        add("Checksum", format!("{:x} - correct", self.sb_csum()));
        add("Events", self.events.to_string());
        if let Some(l) = layout_name(self.level, self.layout, fm) {
            add("Layout", l);
        }
        match self.level {
            0 | 4 | 5 | 6 | 10 => add("Chunk Size", format!("{}K", self.chunksize / 2)),
            -1 => add("Rounding", format!("{}K", self.chunksize / 2)),
            _ => {}
        }
        add("Device Role", self.device_role_string());
        add(
            "Array State",
            format!(
                "{} ('A' == active, '.' == missing, 'R' == replacing)",
                self.array_state_string()
            ),
        );
        v
    }

    /// [`Superblock::examine_lines`] laid out as mdadm prints them
    /// (labels right-aligned as mdadm does, one per line, without mdadm's blank
    /// lines).
    pub fn examine_text(&self, device_size_sectors: u64) -> String {
        if let Some(v0) = &self.v0_90 {
            return v0.examine_text();
        }
        self.examine_lines(device_size_sectors)
            .into_iter()
            .map(|(l, v)| {
                // mdadm indents these two one column less than the rest.
                let w = if l == "Device Role" || l == "Array State" {
                    14
                } else {
                    15
                };
                format!("{l:>w$} : {v}\n")
            })
            .collect()
    }

    /// The examine report as JSON: mdadm's labels in snake_case, numbers as numbers
    /// (sectors unless the key says otherwise); `reshape` is the recorded
    /// reshape ([`Superblock::reshape_json`]), `null` when none.
    pub fn examine_json(&self, device_size_sectors: u64) -> Value {
        if let Some(v0) = &self.v0_90 {
            return v0.examine_json(self.super_offset);
        }
        let unused = self.unused_space(device_size_sectors);
        json!({
            "magic": format!("{MD_SB_MAGIC:08x}"),
            "version": self.version().name(),
            "feature_map": self.feature_map,
            "array_uuid": format_uuid(&self.set_uuid),
            "name": self.set_name,
            "creation_time": self.ctime & 0xff_ffff_ffff,
            "level": level_name(self.level),
            "level_number": self.level,
            "level_known": self.level_known(),
            "raid_devices": self.raid_disks,
            "avail_dev_size": self.data_size,
            "used_dev_size": self.size,
            "data_offset": self.data_offset,
            "data_size": self.data_size,
            "super_offset": self.super_offset,
            "unused_space_before": unused.map(|u| u.0),
            "unused_space_after": unused.map(|u| u.1),
            "state": if self.is_clean() { "clean" } else { "active" },
            "resync_offset": self.resync_offset,
            "device_uuid": format_uuid(&self.device_uuid),
            "update_time": self.utime & 0xff_ffff_ffff,
            "bad_block_log_sectors": self.bblog_size,
            "bad_block_log_offset": self.bblog_offset,
            "checksum": format!("{:x}", self.sb_csum()),
            "checksum_state": "correct",
            "events": self.events,
            "layout": layout_name(self.level, self.layout, self.feature_map),
            "layout_number": self.layout,
            "chunk_size": self.chunksize,
            "chunk_size_kib": self.chunksize / 2,
            "dev_number": self.dev_number,
            "device_role": self.device_role_string(),
            "role": self.role(),
            "array_state": self.array_state_string(),
            "max_dev": self.max_dev,
            "dev_roles": self.dev_roles,
            "reshape": self.reshape_json(),
        })
    }

    /// The reshape this superblock records, as examine's JSON `reshape`
    /// object; `null` when none is recorded (RESHAPE_ACTIVE clear). The same
    /// facts as the text's reshape lines, every one always present so a
    /// reader need not know which ones mdadm leaves out when unchanged.
    pub fn reshape_json(&self) -> Value {
        if self.feature_map & feature::RESHAPE_ACTIVE == 0 {
            return Value::Null;
        }
        // md's rule when it loads the superblock: a shrink always walks
        // backwards, a reshape over the same members when the v1 flag says
        // so, a grow never (0.90 has no flag: its shrinks go backwards).
        let backwards = self.delta_disks < 0
            || (self.delta_disks == 0 && self.feature_map & feature::RESHAPE_BACKWARDS != 0);
        let new_data_offset = (self.feature_map & feature::NEW_OFFSET != 0)
            .then(|| self.data_offset.wrapping_add(self.new_offset as i64 as u64));
        json!({
            "position_sectors": self.reshape_position,
            "direction": if backwards { "backwards" } else { "forwards" },
            "delta_devices": self.delta_disks,
            "raid_devices_before": i64::from(self.raid_disks) - i64::from(self.delta_disks),
            "raid_devices_after": self.raid_disks,
            "new_level": level_name(self.new_level),
            "new_level_number": self.new_level,
            // Named by the level it belongs to (mdadm's text names it by the
            // old level, which leaves a 5 -> 6 conversion's layout unknown).
            "new_layout": layout_name(self.new_level, self.new_layout, 0),
            "new_layout_number": self.new_layout,
            "new_chunk_sectors": self.new_chunk,
            "new_chunk_kib": self.new_chunk / 2,
            "new_data_offset_sectors": new_data_offset,
        })
    }
}
