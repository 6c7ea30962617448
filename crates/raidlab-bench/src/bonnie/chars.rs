//! Bonnie++'s per-character tests: the whole test file written a byte at a time
//! (its "putc" figure), and later read back a byte at a time ("getc"), each
//! byte through a buffered stream, as the original Bonnie did with stdio's
//! putc()/getc(). The stream is std's `BufWriter`/`BufReader` with stdio's
//! buffer size ([`STREAM_BUFFER`]), over the target's volume: a full buffer
//! goes to the target as one aligned request at the next offset, so the test
//! works on every kind of target, O_DIRECT or not.
//!
//! As Bonnie++ does: the slowest chunk's worth of bytes (its chunk size) is the
//! latency; the time includes getting the written data to the target (the
//! stream's last buffer and a flush). It must never touch bytes past the test
//! size.

use super::{Figure, Meter};
use crate::buffer::AlignedBuf;
use crate::engine::Control;
use crate::target::Target;
use raidlab_core::{Error, Op, Result};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::time::Duration;

/// The stream's buffer: glibc's BUFSIZ and std's default capacity, 8 KiB.
pub const STREAM_BUFFER: usize = 8192;

/// The volume as a sequential byte stream from offset 0 up to `size`: what the
/// buffered stream hands its full buffers to, or fills its buffer from.
struct VolumeStream<'a> {
    target: &'a Target,
    /// Aligned bounce buffer, so an O_DIRECT target takes the request.
    bounce: AlignedBuf,
    offset: u64,
    size: u64,
}

impl<'a> VolumeStream<'a> {
    fn new(target: &'a Target, size: u64) -> Self {
        VolumeStream {
            target,
            bounce: AlignedBuf::new(STREAM_BUFFER),
            offset: 0,
            size,
        }
    }

    /// How many bytes the next request carries: what was asked, at most one
    /// buffer, never past the end.
    fn next_len(&self, asked: usize) -> usize {
        let left = usize::try_from(self.size - self.offset).unwrap_or(usize::MAX);
        asked.min(self.bounce.len()).min(left)
    }
}

impl Write for VolumeStream<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.next_len(data.len());
        if n == 0 && !data.is_empty() {
            return Err(io::Error::other(Error::invalid(format!(
                "internal error: the per-character stream wrote past its {} bytes (a bug)",
                self.size
            ))));
        }
        self.bounce.as_mut_slice()[..n].copy_from_slice(&data[..n]);
        self.target
            .volume
            .write_at(&self.bounce.as_slice()[..n], self.offset)
            .map_err(io::Error::other)?;
        self.offset += n as u64;
        Ok(n)
    }

    /// The target's own flush is the caller's: this stream holds nothing.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for VolumeStream<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.next_len(out.len());
        if n == 0 {
            return Ok(0);
        }
        self.target
            .volume
            .read_at(&mut self.bounce.as_mut_slice()[..n], self.offset)
            .map_err(io::Error::other)?;
        out[..n].copy_from_slice(&self.bounce.as_slice()[..n]);
        self.offset += n as u64;
        Ok(n)
    }
}

/// The target's error back out of the stream's `io::Error`.
fn unwrap_io(target: &Target, op: Op, e: io::Error) -> Error {
    if e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
        if let Some(Ok(inner)) = e.into_inner().map(|b| b.downcast::<Error>()) {
            return *inner;
        }
        unreachable!("checked above that the io::Error holds a raidlab Error");
    }
    Error::io(op, target.label.clone(), e)
}

/// Write `size` bytes a byte at a time through the stream ("putc"); the
/// latency is the slowest `chunk` bytes.
pub(super) fn put_char(
    target: &Target,
    size: u64,
    chunk: usize,
    control: &Control,
) -> Result<Figure> {
    let mut w = BufWriter::with_capacity(STREAM_BUFFER, VolumeStream::new(target, size));
    let err = |e| unwrap_io(target, Op::Write, e);
    let mut worst = Duration::ZERO;
    let mut done = 0u64;
    let m = Meter::start(target);
    while done < size && !control.stopped() {
        let t0 = target.now();
        for i in 0..chunk {
            // One byte per call, as putc() stores one byte in stdio's buffer.
            w.write_all(&[(i & 0x7f) as u8]).map_err(err)?;
        }
        worst = worst.max(target.now() - t0);
        done += chunk as u64;
    }
    // The stream's last buffer, then the target's flush: Bonnie++ closes the
    // file (fflush and fsync) before it stops the clock.
    w.flush().map_err(err)?;
    target.volume.flush()?;
    Ok(m.figure(done as f64, worst))
}

/// Read `size` bytes a byte at a time through the stream ("getc"); the latency
/// is the slowest `chunk` bytes.
pub(super) fn get_char(
    target: &Target,
    size: u64,
    chunk: usize,
    control: &Control,
) -> Result<Figure> {
    let mut r = BufReader::with_capacity(STREAM_BUFFER, VolumeStream::new(target, size));
    let err = |e| unwrap_io(target, Op::Read, e);
    // Every byte is used (counted by value), so no byte's read can be left out.
    let mut seen = [0u64; 256];
    let mut worst = Duration::ZERO;
    let mut done = 0u64;
    let mut byte = [0u8];
    let m = Meter::start(target);
    while done < size && !control.stopped() {
        let t0 = target.now();
        for _ in 0..chunk {
            r.read_exact(&mut byte).map_err(err)?;
            seen[usize::from(byte[0])] += 1;
        }
        worst = worst.max(target.now() - t0);
        done += chunk as u64;
    }
    let figure = m.figure(done as f64, worst);
    std::hint::black_box(&seen);
    Ok(figure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::OpenOptions;

    #[test]
    fn writes_and_reads_every_byte_in_order() {
        let opts = OpenOptions {
            size: 64 << 10,
            direct: false,
            writes: true,
            allow_device_writes: false,
        };
        let t = Target::open("mem:64K", opts).unwrap();
        let control = Control::new();
        let size = 40 << 10; // not a whole number of stream buffers
        let w = put_char(&t, size, 4096, &control).unwrap();
        assert!(w.rate > 0.0 && w.max_latency_us > 0.0, "{w:?}");
        let mut back = vec![0u8; size as usize];
        t.volume.read_at(&mut back, 0).unwrap();
        for (i, b) in back.iter().enumerate() {
            assert_eq!(usize::from(*b), (i % 4096) & 0x7f, "byte {i}");
        }
        // Nothing past the test size.
        let mut tail = vec![0u8; 4096];
        t.volume.read_at(&mut tail, size).unwrap();
        assert!(tail.iter().all(|&b| b == 0));
        let r = get_char(&t, size, 4096, &control).unwrap();
        assert!(r.rate > 0.0, "{r:?}");
    }
}
