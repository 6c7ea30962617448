//! Files, directories and block devices as targets: O_DIRECT where the file
//! system allows it, a test file made and removed in a directory, a device's
//! contents written only when allowed. It must never write a block device the
//! caller did not allow, or leave a test file it created behind.

use super::{usable, Lanes, OpenOptions, Target, TargetKind};
use raidlab_core::{check_range, Error, ErrorKind, Op, Result, Volume};
use std::fs::File;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex};

static NEXT_TEST_FILE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub(super) fn open_path(spec: &str, path: &Path, opts: OpenOptions) -> Result<Target> {
    let meta = std::fs::metadata(path);
    let (file_path, kind, remove) = match &meta {
        Ok(m) if m.is_dir() => (
            // Unique per open: fio clones and several targets may share a directory.
            path.join(format!(
                "raidlab-bench-{}-{}.tmp",
                std::process::id(),
                NEXT_TEST_FILE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            )),
            TargetKind::Directory,
            true,
        ),
        Ok(m) if m.file_type().is_block_device() => {
            if opts.writes && !opts.allow_device_writes {
                return Err(Error::new(
                    ErrorKind::ReadOnly,
                    Op::Open,
                    "this is a block device and the tests write to it, which destroys its contents: give --write-device to allow that, or benchmark a file on it",
                )
                .on_device(spec));
            }
            (path.to_path_buf(), TargetKind::BlockDevice, false)
        }
        Ok(m) if m.is_file() => (path.to_path_buf(), TargetKind::File, false),
        Ok(_) => {
            return Err(Error::new(
                ErrorKind::Invalid,
                Op::Open,
                "not a file, directory or block device",
            )
            .on_device(spec))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            (path.to_path_buf(), TargetKind::File, false)
        }
        Err(e) => {
            return Err(Error::io(
                Op::Open,
                spec,
                std::io::Error::new(e.kind(), e.to_string()),
            ))
        }
    };
    let name = file_path.display().to_string();
    let mut notes = Vec::new();
    let open = |direct: bool| {
        let mut o = std::fs::OpenOptions::new();
        o.read(true)
            .write(opts.writes || kind != TargetKind::BlockDevice);
        if kind != TargetKind::BlockDevice {
            o.create(true);
        }
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(&file_path)
    };
    let (file, direct) = match open(opts.direct) {
        Ok(f) => (f, opts.direct),
        // tmpfs and some FUSE file systems refuse O_DIRECT with EINVAL.
        Err(e) if opts.direct && e.raw_os_error() == Some(libc::EINVAL) => {
            notes.push(format!(
                "{name}: the file system refuses O_DIRECT, so this target runs through the page cache"
            ));
            (
                open(false).map_err(|e| Error::io(Op::Open, &name, e))?,
                false,
            )
        }
        Err(e) => return Err(Error::io(Op::Open, &name, e)),
    };
    let remove_on_drop = remove.then(|| file_path.clone());
    let mut fresh = false;
    let size = if kind == TargetKind::BlockDevice {
        let mut f = &file;
        std::io::Seek::seek(&mut f, std::io::SeekFrom::End(0))
            .map_err(|e| Error::io(Op::Open, &name, e))?
    } else {
        let have = file
            .metadata()
            .map_err(|e| Error::io(Op::Open, &name, e))?
            .len();
        if have < opts.size {
            fresh = true;
            if let Err(e) = file.set_len(opts.size) {
                if let Some(p) = &remove_on_drop {
                    let _ = std::fs::remove_file(p);
                }
                return Err(Error::io(Op::Write, &name, e).at(0, opts.size));
            }
        }
        have.max(opts.size)
    };
    let file = Arc::new(file);
    let size = usable(&name, size, opts.size)?;
    let identity = match kind {
        TargetKind::File | TargetKind::BlockDevice => raidlab_cache::path_identity(&file_path).ok(),
        _ => None,
    };
    Ok(Target {
        label: spec.to_string(),
        kind,
        volume: Arc::new(RawFile {
            file: file.clone(),
            name,
            size,
        }),
        file: Some(file),
        direct,
        size,
        notes,
        fresh,
        remove_on_drop,
        array: Mutex::new(None),
        identity,
        cache: Mutex::new(None),
        sim: None,
        lanes: Lanes::default(),
    })
}

/// A file or device used as-is: positional reads and writes on the descriptor the
/// target opened (possibly O_DIRECT, so callers pass aligned buffers), no locking
/// (a benchmark may share a file with a fio run on purpose).
#[derive(Debug)]
struct RawFile {
    file: Arc<File>,
    name: String,
    size: u64,
}

impl Volume for RawFile {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Read, self.size, offset, buf.len() as u64)?;
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io(Op::Read, &self.name, e).at(offset, buf.len() as u64))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Write, self.size, offset, buf.len() as u64)?;
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| Error::io(Op::Write, &self.name, e).at(offset, buf.len() as u64))
    }
    fn flush(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io(Op::Flush, &self.name, e))
    }
}
