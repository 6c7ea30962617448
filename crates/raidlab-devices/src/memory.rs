//! A volume in memory: the reference store for tests and the in-memory model that
//! randomised workloads are checked against.

use raidlab_core::{check_range_with, Op, Result, Volume};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::RwLock;

static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

/// A zero-filled byte array behaving like a disk.
#[derive(Debug)]
pub struct MemVolume {
    id: usize,
    /// `data`'s length, which never changes: asked on every request of a
    /// wrapper's range check, without taking the lock.
    size: u64,
    data: RwLock<Vec<u8>>,
}

impl MemVolume {
    pub fn new(size: u64) -> Self {
        MemVolume {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            size,
            data: RwLock::new(vec![0; size as usize]),
        }
    }

    /// A copy of the whole contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.read().unwrap_or_else(|p| p.into_inner()).clone()
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
        let data = self.data.read().unwrap_or_else(|p| p.into_inner());
        // The name is made only for an error: formatting it on every
        // request was an allocation per member I/O of the torture harness.
        check_range_with(
            || self.name(),
            Op::Read,
            data.len() as u64,
            offset,
            buf.len() as u64,
        )?;
        let o = offset as usize;
        buf.copy_from_slice(&data[o..o + buf.len()]);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut data = self.data.write().unwrap_or_else(|p| p.into_inner());
        // The name is made only for an error: formatting it on every
        // request was an allocation per member I/O of the torture harness.
        check_range_with(
            || self.name(),
            Op::Write,
            data.len() as u64,
            offset,
            buf.len() as u64,
        )?;
        let o = offset as usize;
        data[o..o + buf.len()].copy_from_slice(buf);
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        let mut data = self.data.write().unwrap_or_else(|p| p.into_inner());
        check_range_with(|| self.name(), Op::Discard, data.len() as u64, offset, len)?;
        data[offset as usize..(offset + len) as usize].fill(0);
        Ok(())
    }
    fn discard_zeroes(&self) -> bool {
        true
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        let mut data = self.data.write().unwrap_or_else(|p| p.into_inner());
        check_range_with(|| self.name(), Op::Write, data.len() as u64, offset, len)?;
        data[offset as usize..(offset + len) as usize].fill(0);
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
}
