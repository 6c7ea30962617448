//! A volume that is only a size: for engines that plan and record member I/O
//! without doing it (`raidlab explain`, the simulator).
//!
//! Decides nothing. Any read or write reaching it is a bug of whoever built the
//! stack (the recording executor never touches members), and says so in an error.

use raidlab_core::{Error, Result, Volume};

/// `size` bytes that cannot be read or written.
#[derive(Debug, Clone)]
pub struct SizeOnly {
    name: String,
    size: u64,
}

impl SizeOnly {
    pub fn new(name: impl Into<String>, size: u64) -> SizeOnly {
        SizeOnly {
            name: name.into(),
            size,
        }
    }
}

impl Volume for SizeOnly {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn block_size(&self) -> u32 {
        512
    }
    fn read_at(&self, _: &mut [u8], offset: u64) -> Result<()> {
        Err(Error::invalid(format!(
            "internal: {} has no data (a size-only member), yet was read at byte {offset}",
            self.name
        )))
    }
    fn write_at(&self, _: &[u8], offset: u64) -> Result<()> {
        Err(Error::invalid(format!(
            "internal: {} has no data (a size-only member), yet was written at byte {offset}",
            self.name
        )))
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
}
