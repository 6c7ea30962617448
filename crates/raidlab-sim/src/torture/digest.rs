//! The model's own digest of what the whole array must read as: the same
//! value as [`super::trace::digest`] of those bytes (the length and their
//! CRC-32C), from a CRC kept per 4 KiB block and computed again only for
//! blocks written since. Every restart reads the whole array and digests it
//! for the trace; between two restarts a run writes a few dozen blocks, and
//! the CRC of the whole megabyte each time was a twentieth of a run.
//!
//! It is used only for a read that returned exactly the model's bytes
//! (compared first), so the trace and the run's hash are what they were.

/// Bytes a cached CRC covers.
const BLOCK: usize = 4096;

/// The CRC-32C register after `data` from `reg`, with none of the standard
/// CRC's inversions (the crate's functions invert on the way in and out).
fn register(reg: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!reg, data)
}

/// The register `reg` moved over a [`BLOCK`] of zeros, a linear map: one
/// table lookup per byte of the register instead of 4 KiB of CRC.
fn over_zero_block(reg: u32) -> u32 {
    static TABLE: std::sync::OnceLock<[[u32; 256]; 4]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let zeros = [0u8; BLOCK];
        let basis: Vec<u32> = (0..32).map(|b| register(1 << b, &zeros)).collect();
        let mut t = [[0u32; 256]; 4];
        for (k, row) in t.iter_mut().enumerate() {
            for (v, out) in row.iter_mut().enumerate() {
                *out = (0..8)
                    .filter(|b| v >> b & 1 == 1)
                    .fold(0, |acc, b| acc ^ basis[8 * k + b]);
            }
        }
        t
    });
    (0..4).fold(0, |acc, k| acc ^ t[k][(reg >> (8 * k)) as usize & 0xff])
}

/// Per whole [`BLOCK`] of a buffer, the register after the block from zero
/// (CRC is linear: the register over a block from any start is the start
/// moved over the block's length in zeros, plus this), and whether it is
/// still the buffer's.
#[derive(Default)]
pub(super) struct BlockCrcs {
    crc: Vec<u32>,
    fresh: Vec<bool>,
}

impl BlockCrcs {
    /// For a buffer of `size` zeros: a zero block leaves a zero register
    /// zero, so every block's is known without reading it.
    pub(super) fn reset(&mut self, size: usize) {
        self.crc.clear();
        self.crc.resize(size / BLOCK, 0);
        self.fresh.clear();
        self.fresh.resize(size / BLOCK, true);
    }

    /// Bytes `offset..offset + len` of the buffer changed.
    pub(super) fn changed(&mut self, offset: usize, len: usize) {
        let end = (offset + len).div_ceil(BLOCK).min(self.fresh.len());
        if offset / BLOCK < end {
            self.fresh[offset / BLOCK..end].fill(false);
        }
    }

    /// Every byte may have changed.
    pub(super) fn all_changed(&mut self) {
        self.fresh.fill(false);
    }

    /// [`super::trace::digest`] of `buf`, the buffer these blocks are of.
    pub(super) fn digest(&mut self, buf: &[u8]) -> u64 {
        assert_eq!(buf.len() / BLOCK, self.crc.len(), "the buffer's blocks");
        let mut reg = !0u32;
        for (i, block) in buf.chunks_exact(BLOCK).enumerate() {
            if !self.fresh[i] {
                self.crc[i] = register(0, block);
                self.fresh[i] = true;
            }
            reg = over_zero_block(reg) ^ self.crc[i];
        }
        let tail = &buf[self.crc.len() * BLOCK..];
        let crc = !register(reg, tail);
        (buf.len() as u64) << 32 | u64::from(crc)
    }
}

#[cfg(test)]
mod tests {
    use super::super::trace::digest;
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The blocks' digest is the CRC of the whole, through changes of any
    /// size and alignment, for sizes with and without a partial last block.
    #[test]
    fn equals_the_digest_of_the_whole_through_changes() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for size in [0, 100, BLOCK, 3 * BLOCK, 5 * BLOCK + 777] {
            let mut buf = vec![0u8; size];
            let mut b = BlockCrcs::default();
            b.reset(size);
            assert_eq!(b.digest(&buf), digest(&buf), "size {size}, zeros");
            rng.fill(&mut buf[..]);
            b.all_changed();
            assert_eq!(b.digest(&buf), digest(&buf), "size {size}");
            for _ in 0..40 {
                if size == 0 {
                    break;
                }
                let at = rng.gen_range(0..size);
                let len = rng.gen_range(1..=(size - at).min(2 * BLOCK));
                rng.fill(&mut buf[at..at + len]);
                b.changed(at, len);
                assert_eq!(b.digest(&buf), digest(&buf), "size {size}, {at}+{len}");
            }
            buf.fill(7);
            b.all_changed();
            assert_eq!(b.digest(&buf), digest(&buf), "size {size}, all changed");
        }
    }
}
