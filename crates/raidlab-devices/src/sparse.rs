//! A volume in memory that keeps only the pages written: a large member
//! whose only real writes are a few metadata blocks (`raidlab explain`'s
//! members, whose data I/O a recording executor keeps instead of doing).
//!
//! Decides nothing; like [`crate::MemVolume`], it moves bytes and refuses a
//! range past its end.

use raidlab_core::{check_range, check_range_with, Op, Result, Volume};
use std::collections::BTreeMap;
use std::sync::Mutex;

const PAGE: u64 = 4096;

/// `size` bytes, zero until written, held in 4 KiB pages.
#[derive(Debug)]
pub struct SparseMemVolume {
    name: String,
    size: u64,
    pages: Mutex<BTreeMap<u64, Box<[u8]>>>,
}

impl SparseMemVolume {
    pub fn new(name: impl Into<String>, size: u64) -> SparseMemVolume {
        SparseMemVolume {
            name: name.into(),
            size,
            pages: Mutex::new(BTreeMap::new()),
        }
    }

    /// Bytes held (written pages).
    pub fn held_bytes(&self) -> u64 {
        self.pages.lock().unwrap_or_else(|p| p.into_inner()).len() as u64 * PAGE
    }

    /// Call `f` with each page-sized piece of `[offset, offset + len)`: the
    /// page number, the range within the page, and the range within the
    /// caller's buffer.
    fn pieces(offset: u64, len: u64, mut f: impl FnMut(u64, std::ops::Range<usize>, usize)) {
        let mut at = offset;
        while at < offset + len {
            let page = at / PAGE;
            let within = (at % PAGE) as usize;
            let n = (PAGE as usize - within).min((offset + len - at) as usize);
            f(page, within..within + n, (at - offset) as usize);
            at += n as u64;
        }
    }
}

impl Volume for SparseMemVolume {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Read, self.size, offset, buf.len() as u64)?;
        let pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        Self::pieces(offset, buf.len() as u64, |page, r, at| {
            let out = &mut buf[at..at + r.len()];
            match pages.get(&page) {
                Some(p) => out.copy_from_slice(&p[r]),
                None => out.fill(0),
            }
        });
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Write, self.size, offset, buf.len() as u64)?;
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        Self::pieces(offset, buf.len() as u64, |page, r, at| {
            let p = pages
                .entry(page)
                .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            p[r.clone()].copy_from_slice(&buf[at..at + r.len()]);
        });
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        check_range_with(|| self.name(), Op::Discard, self.size, offset, len)?;
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        Self::pieces(offset, len, |page, r, _| {
            if r.len() == PAGE as usize {
                pages.remove(&page);
            } else if let Some(p) = pages.get_mut(&page) {
                p[r].fill(0);
            }
        });
        Ok(())
    }
    fn discard_zeroes(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_zero_until_written_and_holds_only_pages_written() {
        let v = SparseMemVolume::new("s", 1 << 40);
        v.write_at(&[7u8; 100], (1 << 30) + 4050).unwrap();
        assert_eq!(v.held_bytes(), 2 * PAGE, "a write across a page boundary");
        let mut b = [1u8; 102];
        v.read_at(&mut b, (1 << 30) + 4049).unwrap();
        assert_eq!(b[0], 0);
        assert!(b[1..101].iter().all(|&x| x == 7));
        assert_eq!(b[101], 0);
        v.discard((1 << 30) + 4096, 4096).unwrap();
        assert_eq!(v.held_bytes(), PAGE);
        v.read_at(&mut b, (1 << 30) + 4049).unwrap();
        assert!(b[1..47].iter().all(|&x| x == 7));
        assert!(b[47..].iter().all(|&x| x == 0));
        assert!(v.write_at(&[1], 1 << 40).is_err());
        assert!(v.read_at(&mut [0u8; 2], (1 << 40) - 1).is_err());
    }
}
