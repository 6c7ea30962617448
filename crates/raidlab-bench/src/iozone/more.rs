//! IOzone's seven tests past the engine's six: backward read, record rewrite,
//! stride read, and the stdio tests (fwrite, re-fwrite, fread, re-fread). Each
//! is one stream of records in an order the engine does not have, so they run
//! here, one request at a time as IOzone runs them, on the target's volume and
//! timed by the target's clock. It decides each test's order of records and
//! what a stdio stream does with them; it must never touch bytes past the file
//! size it was given.

use crate::buffer::AlignedBuf;
use crate::target::Target;
use raidlab_core::{Error, Result, Volume};
use rand::{RngCore, SeedableRng};

/// IOzone's default stride for the stride read test: 17 records (`-j`).
pub const STRIDE_RECORDS: u64 = 17;

/// The C library's stdio buffer for a file: one block of the file's
/// `st_blksize`, 4 KiB on the common Linux file systems (glibc's
/// `_IO_file_doallocate` sizes it so).
pub const STDIO_BUFFER: usize = 4096;

/// Run test `name` of [`super::MORE_TESTS`] on the file's first `file` bytes in
/// records of `rec`; its KiB/s.
pub(super) fn run(
    target: &Target,
    name: &str,
    file: u64,
    rec: u64,
    include_flush: bool,
) -> Result<f64> {
    let v = target.volume.as_ref();
    let n = file / rec;
    let mut record = AlignedBuf::new(rec as usize);
    rand_chacha::ChaCha8Rng::seed_from_u64(n ^ rec).fill_bytes(record.as_mut_slice());
    let started = target.now();
    let write = match name {
        "bkwd read" => {
            for i in (0..n).rev() {
                v.read_at(record.as_mut_slice(), i * rec)?;
            }
            false
        }
        "record rewrite" => {
            for _ in 0..n {
                v.write_at(record.as_slice(), 0)?;
            }
            true
        }
        "stride read" => {
            for i in 0..n {
                v.read_at(record.as_mut_slice(), (i * STRIDE_RECORDS % n) * rec)?;
            }
            false
        }
        "fwrite" | "re-fwrite" => {
            let mut s = Stdio::new();
            for _ in 0..n {
                s.fwrite(v, record.as_slice())?;
            }
            s.fflush(v)?;
            true
        }
        "fread" | "re-fread" => {
            let mut s = Stdio::new();
            for _ in 0..n {
                s.fread(v, record.as_mut_slice(), file)?;
            }
            false
        }
        _ => return Err(Error::invalid(format!("no IOzone test called {name:?}"))),
    };
    if include_flush && write {
        v.flush()?;
    }
    let secs = (target.now() - started).as_secs_f64().max(1e-9);
    Ok((n * rec) as f64 / 1024.0 / secs)
}

/// A stdio stream from the file's start, as fwrite/fread see it: records pass
/// through one [`STDIO_BUFFER`] of user space (a copy each), and the file sees
/// whole buffers, except that records of whole buffers go straight through
/// when the buffer is empty, as glibc's fwrite and fread do.
struct Stdio {
    buf: AlignedBuf,
    /// Bytes in `buf`: waiting to be written, or read ahead and not yet taken
    /// (from `taken`).
    fill: usize,
    taken: usize,
    /// The file offset of the buffer's first byte.
    at: u64,
}

impl Stdio {
    fn new() -> Stdio {
        Stdio {
            buf: AlignedBuf::new(STDIO_BUFFER),
            fill: 0,
            taken: 0,
            at: 0,
        }
    }

    fn fwrite(&mut self, v: &dyn Volume, data: &[u8]) -> Result<()> {
        if self.fill == 0 && data.len() % STDIO_BUFFER == 0 {
            v.write_at(data, self.at)?;
            self.at += data.len() as u64;
            return Ok(());
        }
        let mut from = 0;
        while from < data.len() {
            let n = (STDIO_BUFFER - self.fill).min(data.len() - from);
            self.buf.as_mut_slice()[self.fill..self.fill + n]
                .copy_from_slice(&data[from..from + n]);
            self.fill += n;
            from += n;
            if self.fill == STDIO_BUFFER {
                self.fflush(v)?;
            }
        }
        Ok(())
    }

    fn fflush(&mut self, v: &dyn Volume) -> Result<()> {
        if self.fill > 0 {
            v.write_at(&self.buf.as_slice()[..self.fill], self.at)?;
            self.at += self.fill as u64;
            self.fill = 0;
        }
        Ok(())
    }

    /// Read the next `out.len()` bytes of a file of `size` bytes.
    fn fread(&mut self, v: &dyn Volume, out: &mut [u8], size: u64) -> Result<()> {
        if self.taken == self.fill && out.len() % STDIO_BUFFER == 0 {
            v.read_at(out, self.at)?;
            self.at += out.len() as u64;
            return Ok(());
        }
        let mut to = 0;
        while to < out.len() {
            if self.taken == self.fill {
                let n = (size - self.at).min(STDIO_BUFFER as u64) as usize;
                if n == 0 {
                    return Err(Error::invalid("fread past the end of the test file"));
                }
                v.read_at(&mut self.buf.as_mut_slice()[..n], self.at)?;
                self.at += n as u64;
                self.fill = n;
                self.taken = 0;
            }
            let n = (self.fill - self.taken).min(out.len() - to);
            out[to..to + n].copy_from_slice(&self.buf.as_slice()[self.taken..self.taken + n]);
            self.taken += n;
            to += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raidlab_devices::MemVolume;

    #[test]
    fn stdio_streams_move_every_byte_in_order_whatever_the_record() {
        let size = 64 << 10;
        for rec in [512usize, 1000, 4096, 8192] {
            let v = MemVolume::new(size as u64);
            let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
            let mut w = Stdio::new();
            for chunk in data.chunks(rec) {
                w.fwrite(&v, chunk).unwrap();
            }
            w.fflush(&v).unwrap();
            assert!(v.snapshot() == data, "fwrite of {rec}-byte records");
            let mut r = Stdio::new();
            let mut back = vec![0u8; size];
            for chunk in back.chunks_mut(rec) {
                r.fread(&v, chunk, size as u64).unwrap();
            }
            assert!(back == data, "fread of {rec}-byte records");
        }
    }

    #[test]
    fn stride_visits_every_record_once_when_the_count_is_a_power_of_two() {
        let n = 64u64;
        let mut seen: Vec<u64> = (0..n).map(|i| i * STRIDE_RECORDS % n).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..n).collect::<Vec<_>>());
    }
}
