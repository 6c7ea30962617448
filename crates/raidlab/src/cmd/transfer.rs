//! `raidlab export` and `raidlab import`: stream an array's contents out of or into
//! its members. Reading the source and writing the destination overlap (one thread
//! each, two buffers in flight) so a stream runs at the speed of the slower side.

use crate::cli::{ExportArgs, ImportArgs};
use crate::open::open_members;
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
    let devices = open_members(&a.members, OpenMode::ReadOnly)?;
    let asm = Assembly::assemble(devices)?;
    crate::open::warn_set_aside(&asm);
    let started = Started::start(
        asm,
        StartOptions {
            force: a.force,
            ..StartOptions::default()
        },
    )?;
    let (asm, array) = (&started.asm, &started.array);
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
    let unit = unit(asm);
    let mut pos = a.offset;
    let end = a.offset + length;
    pipeline(
        unit,
        move |buf| {
            let n = (end - pos).min(unit as u64) as usize;
            if n > 0 {
                array.read_at(&mut buf[..n], pos)?;
                pos += n as u64;
            }
            Ok(n)
        },
        |data| out.write_all(data).context("cannot write the output"),
    )?;
    Ok(ExitCode::SUCCESS)
}

pub fn import(a: ImportArgs) -> Result<ExitCode> {
    let devices = open_members(&a.members, OpenMode::ReadWrite)?;
    let asm = Assembly::assemble(devices)?;
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
            force: a.force,
            resync_unclean: false,
            stripe_cache: Some(a.stripe.config()),
        },
    )?;
    crate::open::say_started(&started.report, "");
    let unit = unit(&started.asm);
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
