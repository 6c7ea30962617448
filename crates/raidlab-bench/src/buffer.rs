//! I/O buffers aligned for O_DIRECT, built without `unsafe`: a `Vec` one alignment
//! larger than needed, used from its first aligned byte. The `Vec` never grows, so
//! the address handed to the kernel (io_uring) stays put for the buffer's life.

/// The alignment every buffer gets: a page, which satisfies O_DIRECT on every
/// Linux file system and block device (logical blocks are at most 4 KiB).
pub const ALIGN: usize = 4096;

/// A zero-initialised byte buffer whose first byte sits on a [`ALIGN`] boundary.
#[derive(Debug)]
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    pub fn new(len: usize) -> Self {
        let raw = vec![0u8; len + ALIGN];
        let start = raw.as_ptr().align_offset(ALIGN).min(ALIGN);
        AlignedBuf { raw, start, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_sized() {
        for len in [512, 4096, 1 << 20, 3 * 4096] {
            let mut b = AlignedBuf::new(len);
            assert_eq!(b.as_slice().as_ptr() as usize % ALIGN, 0);
            assert_eq!(b.as_mut_slice().len(), len);
            assert!(b.as_slice().iter().all(|&x| x == 0));
        }
    }
}
