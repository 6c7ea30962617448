//! A volume in memory: the reference store for tests and the in-memory model that
//! randomised workloads are checked against.
//!
//! Its buffer is zero-filled at creation, as a new disk reads. Harnesses make
//! and drop thousands of small volumes (the torture harness several per run,
//! 0.4 to 3 MiB each, of which they touch a few hundred KiB): zeroing each
//! whole, and the kernel faulting in the pages of a heap that malloc grew and
//! trimmed again, was a fifth of such a run. So a dropped volume's buffer is
//! zeroed again only where it was written and kept for the next volume of
//! its size, and a write-zeroes or discard zeroes only what was written.

use raidlab_core::{check_range_with, Op, Result, Volume};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

/// The granule of the written-block map: a bit a block, so a 2 MiB volume's
/// map is 64 bytes, and zeroing after a small write stays small.
const BLOCK: usize = 4096;

/// Bytes of zeroed buffers kept for new volumes, all sizes together; the
/// oldest go first past it. Enough for a few runs' members on each test
/// thread, little beside a process that makes volumes.
const SPARE_BYTES: usize = 64 << 20;

/// Buffers larger than this are freed, not kept: a benchmark's volume of
/// gigabytes would be zeroed again at its drop for a reuse that never comes.
const SPARE_LARGEST: usize = 16 << 20;

/// Zeroed buffers of dropped volumes, oldest first.
static SPARE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A zero-filled byte array behaving like a disk.
#[derive(Debug)]
pub struct MemVolume {
    id: usize,
    /// `data`'s length, which never changes: asked on every request of a
    /// wrapper's range check, without taking the lock.
    size: u64,
    store: RwLock<Store>,
}

#[derive(Debug)]
struct Store {
    data: Vec<u8>,
    /// A bit per [`BLOCK`] of `data`: set when a write may have left a
    /// non-zero byte there. A clear bit promises the block reads as zeros.
    written: Vec<u64>,
}

impl Store {
    fn blocks(&self, offset: usize, len: usize) -> std::ops::Range<usize> {
        offset / BLOCK..(offset + len).div_ceil(BLOCK)
    }

    fn mark(&mut self, offset: usize, len: usize) {
        for b in self.blocks(offset, len) {
            self.written[b / 64] |= 1 << (b % 64);
        }
    }

    fn is_written(&self, b: usize) -> bool {
        self.written[b / 64] & (1 << (b % 64)) != 0
    }

    /// `buf.len()` bytes at `offset` into `buf`. Blocks never written are
    /// zeros: filling those is half the memory traffic of copying them, and
    /// about two fifths of what a torture run reads (scrubs and whole-array
    /// reads over space its workload never wrote) is such.
    fn read(&self, buf: &mut [u8], offset: usize) {
        let mut pos = 0;
        while pos < buf.len() {
            let at = offset + pos;
            let written = self.is_written(at / BLOCK);
            // The run of blocks alike from here.
            let mut end = ((at / BLOCK + 1) * BLOCK - offset).min(buf.len());
            while end < buf.len() && self.is_written((offset + end) / BLOCK) == written {
                end = ((offset + end) / BLOCK * BLOCK + BLOCK - offset).min(buf.len());
            }
            if written {
                buf[pos..end].copy_from_slice(&self.data[at..offset + end]);
            } else {
                buf[pos..end].fill(0);
            }
            pos = end;
        }
    }

    /// Zero `offset..offset + len`: only blocks a write touched can hold
    /// anything else, and a block zeroed whole reads as zeros again.
    fn zero(&mut self, offset: usize, len: usize) {
        let end = offset + len;
        for b in self.blocks(offset, len) {
            if !self.is_written(b) {
                continue;
            }
            let block = b * BLOCK..((b + 1) * BLOCK).min(self.data.len());
            let (lo, hi) = (block.start.max(offset), block.end.min(end));
            self.data[lo..hi].fill(0);
            if (lo, hi) == (block.start, block.end) {
                self.written[b / 64] &= !(1 << (b % 64));
            }
        }
    }
}

/// A zeroed buffer of `size` bytes, a kept one if there is one.
fn zeroed(size: usize) -> Vec<u8> {
    let mut spare = SPARE.lock().unwrap_or_else(|p| p.into_inner());
    match spare.iter().rposition(|b| b.len() == size) {
        Some(i) => spare.remove(i),
        None => vec![0; size],
    }
}

impl MemVolume {
    pub fn new(size: u64) -> Self {
        let bytes = size as usize;
        MemVolume {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            size,
            store: RwLock::new(Store {
                data: zeroed(bytes),
                written: vec![0; bytes.div_ceil(BLOCK).div_ceil(64)],
            }),
        }
    }

    /// A copy of the whole contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.read_store().data.clone()
    }

    fn read_store(&self) -> std::sync::RwLockReadGuard<'_, Store> {
        self.store.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_store(&self) -> std::sync::RwLockWriteGuard<'_, Store> {
        self.store.write().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for MemVolume {
    fn drop(&mut self) {
        let store = self.store.get_mut().unwrap_or_else(|p| p.into_inner());
        let len = store.data.len();
        if len == 0 || len > SPARE_LARGEST {
            return;
        }
        store.zero(0, len);
        let data = std::mem::take(&mut store.data);
        let mut spare = SPARE.lock().unwrap_or_else(|p| p.into_inner());
        spare.push(data);
        let mut kept: usize = spare.iter().map(Vec::len).sum();
        while kept > SPARE_BYTES {
            kept -= spare.remove(0).len();
        }
    }
}

impl Volume for MemVolume {
    fn name(&self) -> String {
        format!("memory#{}", self.id)
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let store = self.read_store();
        // The name is made only for an error: formatting it on every
        // request was an allocation per member I/O of the torture harness.
        check_range_with(
            || self.name(),
            Op::Read,
            self.size,
            offset,
            buf.len() as u64,
        )?;
        store.read(buf, offset as usize);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut store = self.write_store();
        // The name is made only for an error: formatting it on every
        // request was an allocation per member I/O of the torture harness.
        check_range_with(
            || self.name(),
            Op::Write,
            self.size,
            offset,
            buf.len() as u64,
        )?;
        let o = offset as usize;
        store.data[o..o + buf.len()].copy_from_slice(buf);
        store.mark(o, buf.len());
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        let mut store = self.write_store();
        check_range_with(|| self.name(), Op::Discard, self.size, offset, len)?;
        store.zero(offset as usize, len as usize);
        Ok(())
    }
    fn discard_zeroes(&self) -> bool {
        true
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        let mut store = self.write_store();
        check_range_with(|| self.name(), Op::Write, self.size, offset, len)?;
        store.zero(offset as usize, len as usize);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_and_refuses_out_of_range() {
        let v = MemVolume::new(8192);
        v.write_at(&[7u8; 100], 4000).unwrap();
        let mut b = [0u8; 102];
        v.read_at(&mut b, 3999).unwrap();
        assert_eq!(b[0], 0);
        assert!(b[1..101].iter().all(|&x| x == 7));
        assert_eq!(b[101], 0);
        assert!(v.write_at(&[1], 8192).is_err());
        assert!(v.read_at(&mut [0u8; 2], 8191).is_err());
    }

    /// Write-zeroes and discard zero every byte asked, in blocks written
    /// whole or in part, and a block zeroed in part still counts as written.
    #[test]
    fn zeroing_clears_what_was_written_and_only_that() {
        let size = 5 * BLOCK + 100;
        let v = MemVolume::new(size as u64);
        let mut want = vec![0u8; size];
        let put = |v: &MemVolume, want: &mut [u8], byte: u8, at: usize, len: usize| {
            v.write_at(&vec![byte; len], at as u64).unwrap();
            want[at..at + len].fill(byte);
        };
        put(&v, &mut want, 1, 10, 3 * BLOCK);
        put(&v, &mut want, 2, size - 50, 50);
        v.write_zeroes(BLOCK as u64 + 7, BLOCK as u64).unwrap();
        want[BLOCK + 7..2 * BLOCK + 7].fill(0);
        v.discard(0, 20).unwrap();
        want[..20].fill(0);
        assert_eq!(v.snapshot(), want);
        // The block zeroed from byte 7 on is still written before it.
        v.write_zeroes(BLOCK as u64, 7).unwrap();
        want[BLOCK..BLOCK + 7].fill(0);
        put(&v, &mut want, 3, 2 * BLOCK + 1, 1);
        assert_eq!(v.snapshot(), want);
        // Block 1 zeroed whole, then blocks 1 to 3: each by its own bit.
        v.write_zeroes(BLOCK as u64, BLOCK as u64).unwrap();
        v.write_zeroes(BLOCK as u64, 3 * BLOCK as u64).unwrap();
        want[BLOCK..4 * BLOCK].fill(0);
        assert_eq!(v.snapshot(), want);
        v.write_zeroes(0, size as u64).unwrap();
        assert!(v.snapshot().iter().all(|&b| b == 0));
    }

    /// Reads across runs of written and never-written blocks, at any
    /// alignment, return what the buffer holds (a kept buffer's first read
    /// included: its leftovers are zeroed).
    #[test]
    fn reads_match_the_contents_across_written_and_clean_blocks() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let size = 9 * BLOCK + 300;
        let v = MemVolume::new(size as u64);
        for _ in 0..6 {
            let at = rng.gen_range(0..size);
            let len = rng.gen_range(1..=(size - at).min(2 * BLOCK));
            let byte = rng.gen_range(1..=255u8);
            v.write_at(&vec![byte; len], at as u64).unwrap();
        }
        let want = v.snapshot();
        for _ in 0..500 {
            let at = rng.gen_range(0..size);
            let len = rng.gen_range(0..=size - at);
            let mut got = vec![0xa5u8; len];
            v.read_at(&mut got, at as u64).unwrap();
            assert_eq!(got, want[at..at + len], "{at}+{len}");
        }
    }

    /// A buffer kept from a dropped volume reads as zeros in the next one,
    /// wherever the first was written.
    #[test]
    fn a_new_volume_reads_zeros_after_one_of_its_size_was_dropped() {
        // A size no other test uses, so the buffer kept is this one's.
        let size = 3 * BLOCK + 512 + 17;
        for round in 0..3u8 {
            let v = MemVolume::new(size as u64);
            assert!(v.snapshot().iter().all(|&b| b == 0), "round {round}");
            v.write_at(&vec![round + 1; size - 3], 1).unwrap();
            v.write_zeroes(BLOCK as u64, 10).unwrap();
        }
    }
}
