//! Partitions inside whole-disk images, read without root and without loop
//! devices: the MBR (with logical partitions in extended ones) and GPT tables,
//! and member names of the form `IMAGE@N` that open partition `N` of `IMAGE` as
//! a [`SliceVolume`] over the image file.
//!
//! Numbering is Linux's, so `disk.img@5` is what Linux calls `sda5`:
//! - MBR: primary slots are 1 to 4 (an empty slot keeps its number); logical
//!   partitions are 5, 6, ... in the order of the extended partition's chain
//!   (every data entry of each EBR, then on to the next EBR);
//! - GPT: entry `i` of the table (from 0) is partition `i + 1`; unused entries
//!   keep their numbers.
//!
//! Why not a crate: `mbrman` 0.5 computes EBR positions in unchecked `u32`
//! arithmetic (a garbage chain overflows, which panics in a build with overflow
//! checks), and `gpt` 4.1 asserts that entries are 128 bytes and allocates the
//! entry array at whatever size the header claims. Tables come from dead
//! machines here, so this module reads them itself: every length is checked
//! before it is used, nothing it is given can make it panic (property-tested
//! below on mutated tables), and it reads at most a few MiB.
//!
//! A table that cannot be read (bad GPT checksums on both copies, an EBR chain
//! that loops) is an error. A partition that points outside the image or
//! overlaps another is listed with its `problem`; opening it is refused with
//! that reason, while its sound neighbours still open (a truncated image keeps
//! its first partitions).

use crate::direct::IoMode;
use crate::file::{FileVolume, OpenMode};
use raidlab_core::{Error, ErrorKind, Op, Result, SliceVolume, Volume};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod gpt;
use gpt::read_gpt;

/// MBR partition types that hold logical partitions.
const MBR_EXTENDED: [u8; 3] = [0x05, 0x0f, 0x85];
/// MBR type of the protective entry in front of a GPT.
const MBR_PROTECTIVE: u8 = 0xee;
/// Most EBRs followed in one extended partition (Linux stops at 256 partitions).
const MAX_EBRS: usize = 256;
/// Largest GPT entry array read (4 MiB: 32768 entries of 128 bytes).
const MAX_GPT_ENTRIES_BYTES: u64 = 4 << 20;

/// Which kind of table an image holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Mbr,
    Gpt,
}

impl std::fmt::Display for Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scheme::Mbr => "MBR",
            Scheme::Gpt => "GPT",
        })
    }
}

/// One partition as Linux would see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// Linux's number (`sda5` is 5).
    pub number: u32,
    /// Byte offset of the partition in the image.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// The type: `0xfd` for MBR, the type GUID for GPT.
    pub kind: String,
    /// GPT partition name (empty for MBR).
    pub label: String,
    /// An MBR extended partition (a container; it holds no data of its own).
    pub extended: bool,
    /// Why the partition cannot be opened (outside the image, overlapping).
    pub problem: Option<String>,
}

impl Partition {
    /// A readable name of the type, where it is a well-known one.
    pub fn kind_name(&self) -> Option<&'static str> {
        Some(match self.kind.as_str() {
            "0xfd" => "Linux raid autodetect",
            "0xda" => "Non-FS data",
            "0x83" => "Linux",
            "0x82" => "Linux swap",
            "0x8e" => "Linux LVM",
            "0x05" | "0x0f" | "0x85" => "Extended",
            "A19D880F-05FC-4D3B-A006-743F0F84911E" => "Linux RAID",
            "0FC63DAF-8483-4772-8E79-3D69D8477DE4" => "Linux filesystem",
            "E6D6D379-F507-44C2-A23C-238F2A3DF928" => "Linux LVM",
            "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F" => "Linux swap",
            "C12A7328-F81F-11D2-BA4B-00A0C93EC93B" => "EFI System",
            _ => return None,
        })
    }
}

/// The partitions of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionTable {
    pub scheme: Scheme,
    /// The logical sector size the table counts in (512, or 4096 for a GPT
    /// written for 4 KiB sectors).
    pub sector_size: u64,
    /// In Linux's number order.
    pub partitions: Vec<Partition>,
}

impl PartitionTable {
    /// Read the table of `vol`. `Ok(None)` when there is none (no 0x55AA
    /// signature in the first sector, or boot flags no MBR has: md members,
    /// file systems and blank images). Never panics, whatever the bytes.
    pub fn read(vol: &dyn Volume) -> Result<Option<PartitionTable>> {
        let name = vol.name();
        read_table(vol).map_err(|e| e.on_device(name))
    }

    /// Partition `number`, or an error that says which partitions exist.
    pub fn get(&self, number: u32) -> Option<&Partition> {
        self.partitions.iter().find(|p| p.number == number)
    }

    fn numbers(&self) -> String {
        let n: Vec<String> = self
            .partitions
            .iter()
            .filter(|p| !p.extended)
            .map(|p| p.number.to_string())
            .collect();
        if n.is_empty() {
            "none".to_string()
        } else {
            n.join(", ")
        }
    }
}

fn read_table(vol: &dyn Volume) -> Result<Option<PartitionTable>> {
    let size = vol.size();
    if size < 512 {
        return Ok(None);
    }
    let mut mbr = [0u8; 512];
    vol.read_at(&mut mbr, 0)?;
    if mbr[510..512] != [0x55, 0xaa] {
        return Ok(None);
    }
    let entries: Vec<MbrEntry> = (0..4).map(|i| MbrEntry::at(&mbr, 446 + 16 * i)).collect();
    // Linux's msdos parser refuses a sector whose boot flags are not 0 or 0x80:
    // such a sector is a boot record or data, not a partition table.
    if entries.iter().any(|e| e.boot != 0 && e.boot != 0x80) {
        return Ok(None);
    }
    if entries.iter().any(|e| e.kind == MBR_PROTECTIVE) {
        return read_gpt(vol).map(Some);
    }
    read_mbr(vol, &entries).map(Some)
}

#[derive(Debug, Clone, Copy)]
struct MbrEntry {
    boot: u8,
    kind: u8,
    /// In sectors, relative to whatever the entry is relative to.
    start: u64,
    sectors: u64,
}

impl MbrEntry {
    fn at(b: &[u8], at: usize) -> MbrEntry {
        MbrEntry {
            boot: b[at],
            kind: b[at + 4],
            start: u64::from(le32(b, at + 8)),
            sectors: u64::from(le32(b, at + 12)),
        }
    }
    fn is_extended(&self) -> bool {
        MBR_EXTENDED.contains(&self.kind)
    }
}

fn read_mbr(vol: &dyn Volume, entries: &[MbrEntry]) -> Result<PartitionTable> {
    const SS: u64 = 512;
    let mut parts = Vec::new();
    let mut extended = None;
    for (i, e) in entries.iter().enumerate() {
        if e.sectors == 0 {
            continue;
        }
        parts.push(Partition {
            number: i as u32 + 1,
            start: e.start * SS,
            len: e.sectors * SS,
            kind: format!("{:#04x}", e.kind),
            label: String::new(),
            extended: e.is_extended(),
            problem: None,
        });
        if e.is_extended() && extended.is_none() {
            extended = Some(*e);
        }
    }
    if let Some(ext) = extended {
        read_logical(vol, ext, &mut parts)?;
    }
    Ok(finish(vol.size(), Scheme::Mbr, SS, parts))
}

/// Follow the EBR chain of the extended partition `ext` as Linux's
/// `parse_extended` does: every data entry of an EBR is a logical partition
/// relative to that EBR; the first extended entry points at the next EBR,
/// relative to the start of `ext`.
fn read_logical(vol: &dyn Volume, ext: MbrEntry, parts: &mut Vec<Partition>) -> Result<()> {
    const SS: u64 = 512;
    let mut number = 5u32;
    let mut this = ext.start;
    let mut seen = Vec::new();
    for _ in 0..MAX_EBRS {
        if seen.contains(&this) {
            return Err(table_error(
                this * SS,
                format!(
                    "the extended partition's chain of EBRs loops back to sector {this}: the table is damaged"
                ),
            ));
        }
        seen.push(this);
        let Some(off) = this.checked_mul(SS).filter(|o| o + SS <= vol.size()) else {
            return Err(table_error(
                this.saturating_mul(SS),
                format!(
                    "an EBR at sector {this} lies past the end of the image ({} bytes): the image is truncated or the table is damaged",
                    vol.size()
                ),
            ));
        };
        let mut b = [0u8; 512];
        vol.read_at(&mut b, off)?;
        if b[510..512] != [0x55, 0xaa] {
            // Linux stops at a sector without the signature.
            return Ok(());
        }
        let entries: Vec<MbrEntry> = (0..4).map(|i| MbrEntry::at(&b, 446 + 16 * i)).collect();
        for e in entries
            .iter()
            .filter(|e| e.sectors != 0 && !e.is_extended())
        {
            parts.push(Partition {
                number,
                start: (this + e.start) * SS,
                len: e.sectors * SS,
                kind: format!("{:#04x}", e.kind),
                label: String::new(),
                extended: false,
                problem: None,
            });
            number += 1;
        }
        match entries.iter().find(|e| e.sectors != 0 && e.is_extended()) {
            Some(next) => this = ext.start + next.start,
            None => return Ok(()),
        }
    }
    Err(table_error(
        ext.start * SS,
        format!("the extended partition chains more than {MAX_EBRS} EBRs: the table is damaged"),
    ))
}

/// Note partitions outside the image and overlapping ones, in number order.
fn finish(size: u64, scheme: Scheme, ss: u64, mut parts: Vec<Partition>) -> PartitionTable {
    for p in parts.iter_mut().filter(|p| p.problem.is_none()) {
        match p.start.checked_add(p.len) {
            Some(end) if end <= size => {}
            _ => {
                p.problem = Some(format!(
                    "it ends at byte {}, past the end of the image ({size} bytes): the image is truncated or the table is damaged",
                    u128::from(p.start) + u128::from(p.len)
                ))
            }
        }
    }
    // Overlaps among data partitions (an extended partition contains its
    // logical ones by design): sort by start and compare with the furthest end.
    let mut order: Vec<usize> = (0..parts.len())
        .filter(|&i| !parts[i].extended && parts[i].len > 0)
        .collect();
    order.sort_by_key(|&i| parts[i].start);
    let mut furthest: Option<usize> = None;
    let mut clashes = Vec::new();
    for &i in &order {
        if let Some(f) = furthest {
            let f_end = u128::from(parts[f].start) + u128::from(parts[f].len);
            if u128::from(parts[i].start) < f_end {
                clashes.push((i, f));
            }
        }
        let end = u128::from(parts[i].start) + u128::from(parts[i].len);
        if furthest.map_or(true, |f| {
            end > u128::from(parts[f].start) + u128::from(parts[f].len)
        }) {
            furthest = Some(i);
        }
    }
    for (i, f) in clashes {
        let (a, b) = (parts[i].number, parts[f].number);
        for (k, other) in [(i, b), (f, a)] {
            if parts[k].problem.is_none() {
                parts[k].problem = Some(format!(
                    "it overlaps partition {other}: the table is damaged"
                ));
            }
        }
    }
    parts.sort_by_key(|p| p.number);
    PartitionTable {
        scheme,
        sector_size: ss,
        partitions: parts,
    }
}

fn table_error(offset: u64, msg: impl Into<String>) -> Error {
    Error::new(
        ErrorKind::Invalid,
        Op::Parse,
        format!("partition table: {}", msg.into()),
    )
    .at(offset, 512)
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from(le32(b, at)) | u64::from(le32(b, at + 4)) << 32
}

fn crc32(b: &[u8]) -> u32 {
    crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC).checksum(b)
}

/// A GUID as text, with the first three fields stored little-endian.
pub fn format_guid(g: &[u8; 16]) -> String {
    format!(
        "{:02X}{:02X}{:02X}{:02X}-{:02X}{:02X}-{:02X}{:02X}-{:02X}{:02X}-{:02X}{:02X}{:02X}{:02X}{:02X}{:02X}",
        g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12], g[13],
        g[14], g[15]
    )
}

/// Whether bytes `start..start + len` of the regular file at `path` are all
/// holes (read as zeros without storing anything), by `SEEK_DATA`. `false`
/// when that cannot be told (not a regular file, no `SEEK_DATA`).
pub fn range_is_holes(path: &Path, start: u64, len: u64) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(off) = libc::off_t::try_from(start) else {
        return false;
    };
    // SAFETY: lseek on a file descriptor we own; no memory is touched.
    let next = unsafe { libc::lseek(f.as_raw_fd(), off, libc::SEEK_DATA) };
    if next < 0 {
        // ENXIO: no data at or after `start`.
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO);
    }
    next as u64 >= start.saturating_add(len)
}

// ---------------------------------------------------------------------------------
// Member names.
// ---------------------------------------------------------------------------------

/// What a member name means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberPath {
    /// A file or block device, as named.
    Whole(PathBuf),
    /// Partition `number` of the image at `image` (`IMAGE@N`).
    Partition { image: PathBuf, number: u32 },
}

impl MemberPath {
    /// Read a member name. A name that exists as it is is always that file, even
    /// with an `@` in it (`backup@2` stays a file if there is one). Otherwise a
    /// name ending in `@N` (N a decimal number from 1) whose part before the
    /// last `@` exists names partition N of that image; anything else is a plain
    /// path (and opening it says it does not exist).
    pub fn parse(p: &Path) -> MemberPath {
        if std::fs::symlink_metadata(p).is_ok() {
            return MemberPath::Whole(p.to_path_buf());
        }
        use std::os::unix::ffi::OsStrExt;
        let bytes = p.as_os_str().as_bytes();
        if let Some(at) = bytes.iter().rposition(|&b| b == b'@') {
            let (image, num) = (&bytes[..at], &bytes[at + 1..]);
            let digits = !num.is_empty() && num.len() <= 9 && num.iter().all(u8::is_ascii_digit);
            if digits && !image.is_empty() {
                let number: u32 = std::str::from_utf8(num)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                let image = PathBuf::from(std::ffi::OsStr::from_bytes(image));
                if number > 0 && std::fs::symlink_metadata(&image).is_ok() {
                    return MemberPath::Partition { image, number };
                }
            }
        }
        MemberPath::Whole(p.to_path_buf())
    }
}

/// Opens member names (files, block devices, `IMAGE@N` partitions) for one
/// command. Partitions of one image share one open image (one lock), and a
/// device named twice (`disk.img@1` twice, or `disk.img` and `disk.img@1`) is
/// refused rather than used twice.
#[derive(Debug)]
pub struct MemberOpener {
    mode: OpenMode,
    /// The I/O mode asked for (`None`: each member's default).
    io: Option<IoMode>,
    /// Each member opened, as named, with the I/O mode it got (a partition
    /// the mode of its image).
    io_modes: Vec<(String, IoMode)>,
    images: Vec<OpenImage>,
    /// (canonical path, partition number or 0 for the whole device, as named).
    named: Vec<(PathBuf, u32, String)>,
    /// Partitions opened: (name as given, image path, byte start, length).
    windows: Vec<(PathBuf, PathBuf, u64, u64)>,
}

#[derive(Debug)]
struct OpenImage {
    canonical: PathBuf,
    volume: Arc<FileVolume>,
    table: Option<PartitionTable>,
}

impl MemberOpener {
    pub fn new(mode: OpenMode) -> MemberOpener {
        MemberOpener {
            mode,
            io: None,
            io_modes: Vec::new(),
            images: Vec::new(),
            named: Vec::new(),
            windows: Vec::new(),
        }
    }

    /// Open members with I/O mode `io` (`None`: direct for block devices,
    /// buffered for files; see [`IoMode::default_for`]).
    pub fn with_io(mut self, io: Option<IoMode>) -> MemberOpener {
        self.io = io;
        self
    }

    /// Each member opened so far, as named, with the I/O mode it got.
    pub fn io_modes(&self) -> &[(String, IoMode)] {
        &self.io_modes
    }

    /// Where a partition opened as `p` lies: (image, byte start, length).
    pub fn window(&self, p: &Path) -> Option<(&Path, u64, u64)> {
        self.windows
            .iter()
            .find(|w| w.0 == p)
            .map(|w| (w.1.as_path(), w.2, w.3))
    }

    /// Open `p` as a member volume (see [`MemberPath::parse`] for the names).
    pub fn open(&mut self, p: &Path) -> Result<Arc<dyn Volume>> {
        let shown = p.display().to_string();
        match MemberPath::parse(p) {
            MemberPath::Whole(path) => {
                self.claim(&path, 0, &shown)?;
                let v = FileVolume::open_io(&path, self.mode, self.io)?;
                self.io_modes.push((shown, v.io_mode()));
                Ok(Arc::new(v))
            }
            MemberPath::Partition { image, number } => {
                self.claim(&image, number, &shown)?;
                let img = self.image(&image)?;
                let table = img.table.as_ref().ok_or_else(|| {
                    Error::new(
                        ErrorKind::Invalid,
                        Op::Open,
                        format!(
                            "{shown} names partition {number}, but {} has no partition table (no MBR or GPT): name the image itself",
                            image.display()
                        ),
                    )
                })?;
                let part = table.get(number).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Invalid,
                        Op::Open,
                        format!(
                            "{} has no partition {number} (its {} table has partitions: {})",
                            image.display(),
                            table.scheme,
                            table.numbers()
                        ),
                    )
                })?;
                if part.extended {
                    return Err(Error::new(
                        ErrorKind::Invalid,
                        Op::Open,
                        format!(
                            "{shown} is an extended partition, a container of the logical partitions (5 and up): name one of those"
                        ),
                    ));
                }
                if let Some(why) = &part.problem {
                    return Err(Error::new(
                        ErrorKind::Invalid,
                        Op::Open,
                        format!("cannot use {shown}: {why}"),
                    )
                    .at(part.start, part.len));
                }
                let (start, len) = (part.start, part.len);
                let io = img.volume.io_mode();
                let vol = SliceVolume::named(img.volume.clone(), start, len, shown.clone())?;
                self.io_modes.push((shown, io));
                self.windows.push((p.to_path_buf(), image, start, len));
                Ok(Arc::new(vol))
            }
        }
    }

    fn claim(&mut self, path: &Path, number: u32, shown: &str) -> Result<()> {
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        for (c, n, earlier) in &self.named {
            if *c == canonical && (*n == number || *n == 0 || number == 0) {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    Op::Open,
                    format!(
                        "{shown} and {earlier} are the same device (or one contains the other): name each member once"
                    ),
                ));
            }
        }
        self.named.push((canonical, number, shown.to_string()));
        Ok(())
    }

    fn image(&mut self, image: &Path) -> Result<&OpenImage> {
        let canonical = std::fs::canonicalize(image).unwrap_or_else(|_| image.to_path_buf());
        let i = match self.images.iter().position(|i| i.canonical == canonical) {
            Some(i) => i,
            None => {
                let volume = Arc::new(FileVolume::open_io(image, self.mode, self.io)?);
                let table = PartitionTable::read(volume.as_ref())?;
                self.images.push(OpenImage {
                    canonical,
                    volume,
                    table,
                });
                self.images.len() - 1
            }
        };
        Ok(&self.images[i])
    }
}

#[cfg(test)]
mod tests;
