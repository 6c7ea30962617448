//! `raidlab export` and `raidlab import`: stream an array's contents out of or into
//! its members. Reading the source and writing the destination overlap (one thread
//! each, two buffers in flight) so a stream runs at the speed of the slower side.

use crate::cli::{ExportArgs, ImportArgs};
use crate::open::open_members_io;
use anyhow::{bail, Context, Result};
use raidlab_core::Volume;
use raidlab_devices::OpenMode;
use raidlab_raid::assemble::Assembly;
use raidlab_raid::lifecycle::{StartOptions, Started};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::sync::mpsc;

/// Bytes per transfer unit: whole stripes, about 8 MiB.
fn unit(asm: &Assembly) -> usize {
    let g = &asm.geometry;
    let stripe = (g.chunk_bytes.max(4096) * g.data_disks().max(1) as u64) as usize;
    ((8 << 20) / stripe).max(1) * stripe
}

/// Run `produce` on a helper thread, handing filled buffers to `consume` on this one.
/// `produce(buf)` fills a buffer and returns how many bytes it holds (0 = done).
fn pipeline(
    unit: usize,
    mut produce: impl FnMut(&mut Vec<u8>) -> Result<usize> + Send,
    mut consume: impl FnMut(&[u8]) -> Result<()>,
) -> Result<u64> {
    let (full_tx, full_rx) = mpsc::sync_channel::<(Vec<u8>, usize)>(1);
    let (empty_tx, empty_rx) = mpsc::channel::<Vec<u8>>();
    for _ in 0..2 {
        empty_tx.send(vec![0u8; unit]).ok();
    }
    std::thread::scope(|s| {
        let producer = s.spawn(move || -> Result<()> {
            while let Ok(mut buf) = empty_rx.recv() {
                let n = produce(&mut buf)?;
                if n == 0 || full_tx.send((buf, n)).is_err() {
                    break;
                }
            }
            Ok(())
        });
        let mut total = 0u64;
        let mut result = Ok(());
        while let Ok((buf, n)) = full_rx.recv() {
            if let Err(e) = consume(&buf[..n]) {
                result = Err(e);
                break;
            }
            total += n as u64;
            if empty_tx.send(buf).is_err() {
                break;
            }
        }
        drop(empty_tx);
        drop(full_rx);
        let produced = producer
            .join()
            .unwrap_or_else(|_| bail!("internal: reader thread panicked"));
        result.and(produced).map(|_| total)
    })
}

pub fn export(a: ExportArgs) -> Result<ExitCode> {
    // The put-back of a backup file writes the members; a plain export
    // never does.
    let mode = if a.backup_file.is_some() {
        OpenMode::ReadWrite
    } else {
        OpenMode::ReadOnly
    };
    if a.backup_file.is_some() {
        if let Some(server) = crate::control::find(&a.array.members)? {
            bail!(
                "--backup-file: the array is served by the server at {}, and putting a backup back writes the members: stop serving it first; nothing was changed",
                server.display()
            );
        }
    }
    let devices = open_members_io(&a.array.members, mode, a.io.mode())?.0;
    let mut asm = crate::open::assemble(devices)?;
    crate::open::warn_set_aside(&asm);
    if let Some(path) = &a.backup_file {
        put_back(&mut asm, path)?;
    }
    let started = Started::start(
        asm,
        StartOptions {
            force: a.array.force,
            ..StartOptions::default()
        },
    )?;
    let array = &started.array;
    let size = array.size();
    if a.offset > size {
        bail!(
            "--offset {} is past the end of the array ({size} bytes)",
            a.offset
        );
    }
    let length = a.length.unwrap_or(size - a.offset);
    if length > size - a.offset {
        bail!(
            "--offset {} plus --length {length} runs past the end of the array ({size} bytes): the array holds {} bytes from that offset",
            a.offset,
            size - a.offset
        );
    }
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(
            std::fs::File::create(p)
                .with_context(|| format!("cannot create output file {}", p.display()))?,
        ),
        // Rust's stdout is line-buffered: it would scan every buffer for newlines.
        // Write to the descriptor itself.
        None => Box::new(std::fs::File::from(
            std::io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .context("cannot use standard output")?,
        )),
    };
    let unit = unit(&started.asm());
    let mut pos = a.offset;
    let end = a.offset + length;
    let salvage = a.ignore_read_errors || a.map_file.is_some();
    let mut lost = Lost::default();
    let lost_ref = &mut lost;
    pipeline(
        unit,
        move |buf| {
            let n = (end - pos).min(unit as u64) as usize;
            if n > 0 {
                if salvage {
                    read_salvaging(array.as_ref(), &mut buf[..n], pos, lost_ref);
                } else {
                    array.read_at(&mut buf[..n], pos)?;
                }
                pos += n as u64;
            }
            Ok(n)
        },
        |data| out.write_all(data).context("cannot write the output"),
    )?;
    if let Some(p) = &a.map_file {
        std::fs::write(p, lost.map_file(a.offset, end))
            .with_context(|| format!("cannot write the map file {}", p.display()))?;
    }
    if lost.ranges.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let total: u64 = lost.ranges.iter().map(|r| r.1).sum();
    eprintln!(
        "raidlab: export: {total} bytes in {} range(s) could not be read from any member or rebuilt from redundancy; zeros were written there:",
        lost.ranges.len()
    );
    for (at, len) in &lost.ranges {
        eprintln!("  array bytes {at}..{} ({len} bytes)", at + len);
    }
    Ok(ExitCode::from(4))
}

/// `export --backup-file`: the stopped 0.90 reshape's window put back from
/// the file at `path` before anything is read (`mdadm --assemble
/// --backup-file`); said on stderr, stdout being the data.
fn put_back(asm: &mut Assembly, path: &std::path::Path) -> Result<()> {
    crate::open::put_back_backup_file(asm, path)?;
    let at = match asm.reshape() {
        Some(Ok(r)) => r.position,
        _ => 0,
    };
    eprintln!(
        "raidlab: export: the backup file {} was put back into the members (the reshape is recorded at array byte {at}; finish it with `raidlab grow --continue --backup-file {}`)",
        path.display(),
        path.display()
    );
    Ok(())
}

/// The array ranges `--ignore-read-errors` could not recover, in order and
/// merged where they touch.
#[derive(Debug, Default, PartialEq, Eq)]
struct Lost {
    ranges: Vec<(u64, u64)>,
}

impl Lost {
    fn add(&mut self, at: u64, len: u64) {
        match self.ranges.last_mut() {
            Some(last) if last.0 + last.1 == at => last.1 += len,
            _ => self.ranges.push((at, len)),
        }
    }

    /// A GNU ddrescue map file of `[start, end)`: `+` for what was read
    /// (from the members or rebuilt), `-` for what was not; positions are
    /// array offsets.
    fn map_file(&self, start: u64, end: u64) -> String {
        let mut s = String::from(
            "# Mapfile. Created by raidlab export --ignore-read-errors\n\
             # current_pos  current_status  current_pass\n",
        );
        s.push_str(&format!("0x{end:08X}     +               1\n"));
        s.push_str("#      pos        size  status\n");
        let mut pos = start;
        let mut line = |at: u64, len: u64, st: char| {
            if len > 0 {
                s.push_str(&format!("0x{at:08X}  0x{len:08X}  {st}\n"));
            }
        };
        for &(at, len) in &self.ranges {
            line(pos, at - pos, '+');
            line(at, len, '-');
            pos = at + len;
        }
        line(pos, end - pos, '+');
        s
    }
}

/// Smallest piece a failing read is cut into: one sector.
const SALVAGE_UNIT: usize = 512;

/// Read `buf` from `pos`; where the array cannot serve a range (the members
/// failed and redundancy could not rebuild it: the array already tried), cut
/// the read in halves down to single sectors, zero what still fails and
/// record it in `lost`.
fn read_salvaging(array: &dyn Volume, buf: &mut [u8], pos: u64, lost: &mut Lost) {
    if array.read_at(buf, pos).is_ok() {
        return;
    }
    if buf.len() <= SALVAGE_UNIT {
        buf.fill(0);
        lost.add(pos, buf.len() as u64);
        return;
    }
    // Halves on sector boundaries.
    let half = (buf.len() / 2).div_ceil(SALVAGE_UNIT) * SALVAGE_UNIT;
    let (a, b) = buf.split_at_mut(half.min(buf.len()));
    read_salvaging(array, a, pos, lost);
    read_salvaging(array, b, pos + half as u64, lost);
}

pub fn import(a: ImportArgs) -> Result<ExitCode> {
    let devices = open_members_io(&a.array.members, OpenMode::ReadWrite, a.io.mode())?.0;
    let asm = crate::open::assemble(devices)?;
    crate::open::warn_set_aside(&asm);
    // Everything that can refuse the import is checked before the start,
    // which writes (logs, the dirty mark): a refusal changes nothing.
    let size = asm.data_bytes();
    if a.offset > size {
        bail!(
            "--offset {} is past the end of the array ({size} bytes)",
            a.offset
        );
    }
    let room = size - a.offset;
    let mut input: Box<dyn Read + Send> = match &a.input {
        Some(p) => {
            let f = std::fs::File::open(p)
                .with_context(|| format!("cannot open input file {}", p.display()))?;
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if f.metadata().map(|m| m.is_file()).unwrap_or(false) && len > room {
                bail!(
                    "{} is {len} bytes but the array holds only {room} bytes from offset {}: nothing was written",
                    p.display(),
                    a.offset
                );
            }
            Box::new(f)
        }
        None => Box::new(std::io::stdin()),
    };
    let started = Started::start(
        asm,
        StartOptions {
            write: true,
            force: a.array.force,
            resync_unclean: false,
            stripe_cache: Some(a.stripe.config()),
            ..StartOptions::default()
        },
    )?;
    crate::open::say_started(&started.report, "");
    let unit = unit(&started.asm());
    let mut pos = a.offset;
    let mut read_total = 0u64;
    let array_ref = &started.array;
    let written = pipeline(
        unit,
        move |buf| {
            let mut n = 0;
            while n < buf.len() {
                match input.read(&mut buf[n..]) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e).context("cannot read the input"),
                }
            }
            read_total += n as u64;
            if read_total > room {
                bail!("the input is longer than the array from offset {} ({room} bytes): the data up to the end of the array was written, the rest was not", a.offset);
            }
            Ok(n)
        },
        |data| {
            array_ref.write_at(data, pos)?;
            pos += data.len() as u64;
            Ok(())
        },
    );
    // Only a complete import over a consistent array leaves it marked clean; after a
    // failure the array stays marked dirty so a later resync repairs parity.
    let written = match written {
        Ok(w) => w,
        Err(e) => {
            started.array.flush()?;
            return Err(e);
        }
    };
    for path in started.stop()? {
        eprintln!("raidlab: {path} failed during the import and is now marked faulty; the array is degraded (`raidlab detail`)");
    }
    eprintln!("raidlab: wrote {written} bytes at offset {}", a.offset);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use raidlab_devices::{FaultVolume, MemVolume};
    use raidlab_layout::{Geometry, Layout, Level};
    use raidlab_raid::Array;
    use std::sync::Arc;

    /// A two-way mirror whose members fail reads in the ranges given.
    fn mirror(bad: [std::ops::Range<u64>; 2]) -> Array {
        let size = 1 << 20;
        let vols: Vec<Option<Arc<dyn Volume>>> = bad
            .into_iter()
            .map(|r| {
                let m = MemVolume::new(size);
                m.write_at(&vec![0x33; size as usize], 0).unwrap();
                let f = FaultVolume::new(m);
                f.fail_reads(r);
                Some(Arc::new(f) as Arc<dyn Volume>)
            })
            .collect();
        let geo = Geometry::new(Level::Raid1, Layout::Plain, 0, 2, size).unwrap();
        Array::new("t", geo, vols).unwrap()
    }

    #[test]
    fn what_redundancy_covers_is_read_and_the_rest_zeroed_and_listed() {
        // Copy 0 fails 0..64K, copy 1 fails 32K..33K and 100K..101K: only
        // 32K..33K is unreadable on both.
        let array = mirror([0..65536, 32768..33792]);
        let mut buf = vec![0xaa; 256 << 10];
        let mut lost = Lost::default();
        read_salvaging(&array, &mut buf, 0, &mut lost);
        assert_eq!(lost.ranges, vec![(32768, 1024)]);
        assert!(buf[32768..33792].iter().all(|&b| b == 0));
        assert!(buf[..32768].iter().all(|&b| b == 0x33));
        assert!(buf[33792..].iter().all(|&b| b == 0x33));
        let map = lost.map_file(0, 256 << 10);
        assert!(map.contains("0x00000000  0x00008000  +\n"), "{map}");
        assert!(map.contains("0x00008000  0x00000400  -\n"), "{map}");
        assert!(map.contains("0x00008400  0x00037C00  +\n"), "{map}");
    }

    #[test]
    fn a_readable_array_loses_nothing() {
        // (A second failing range on the other copy would be lost: the array
        // takes out a member whose repair write does not read back, as md does.)
        let array = mirror([0..4096, 0..0]);
        let mut buf = vec![0u8; 1 << 20];
        let mut lost = Lost::default();
        read_salvaging(&array, &mut buf, 0, &mut lost);
        assert!(lost.ranges.is_empty());
        assert!(buf.iter().all(|&b| b == 0x33));
    }
}
