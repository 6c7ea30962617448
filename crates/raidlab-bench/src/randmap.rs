//! Random offsets that visit every block of a region once per pass, as fio's
//! random map does by default: a random pick that lands on a block already
//! visited moves on to the next block not yet visited. Without it, a random job
//! of `size` bytes reads some blocks twice and others never, which changes what
//! a cache in front of the device sees.
//!
//! The map is a bitmap with summary levels above it (a bit per 64-bit word of
//! the level below, set when that word is full), so finding the next unvisited
//! block costs a few word reads however full the map is. It costs one bit per
//! block: 32 MiB for 1 TiB in 4 KiB blocks. It never picks outside the region.

use rand::Rng;

#[derive(Debug)]
pub struct RandMap {
    /// `levels[0]`: one bit per block, set once visited. `levels[k + 1]`: one bit
    /// per word of `levels[k]`, set when that word is full. The last level has
    /// one word. Bits past the end of a level are set, so they never look free.
    levels: Vec<Vec<u64>>,
    blocks: u64,
    /// Blocks not yet visited in this pass.
    left: u64,
}

/// `n` bits as words, the bits past `n` set.
fn level(n: u64) -> Vec<u64> {
    let mut words = vec![0u64; n.div_ceil(64) as usize];
    if n % 64 != 0 {
        if let Some(last) = words.last_mut() {
            *last = !0u64 << (n % 64);
        }
    }
    words
}

impl RandMap {
    /// A map of `blocks` blocks (at least one), none visited.
    pub fn new(blocks: u64) -> Self {
        let blocks = blocks.max(1);
        let mut levels = vec![level(blocks)];
        while levels.last().map_or(0, Vec::len) > 1 {
            let n = levels.last().map_or(0, Vec::len) as u64;
            levels.push(level(n));
        }
        RandMap {
            levels,
            blocks,
            left: blocks,
        }
    }

    /// The index of the next block to visit: a random one, or the first
    /// unvisited block after it (wrapping). A new pass starts once all were
    /// visited.
    pub fn take(&mut self, rng: &mut impl Rng) -> u64 {
        if self.left == 0 {
            *self = RandMap::new(self.blocks);
        }
        let pick = rng.gen_range(0..self.blocks);
        // `left > 0`, so some block is free: after `pick`, or from the start.
        let i = self
            .next_free(0, pick)
            .or_else(|| self.next_free(0, 0))
            .unwrap_or(pick);
        self.visit(i);
        i
    }

    /// The first clear bit at index `from` or later in `levels[level]`.
    fn next_free(&self, level: usize, from: u64) -> Option<u64> {
        let words = &self.levels[level];
        let w = (from / 64) as usize;
        if w >= words.len() {
            return None;
        }
        let here = !words[w] & (!0u64 << (from % 64));
        if here != 0 {
            return Some(w as u64 * 64 + u64::from(here.trailing_zeros()));
        }
        // The next word of this level with a clear bit: the next clear bit of
        // the level above, or a short scan at the top (one word there).
        let next = if level + 1 < self.levels.len() {
            self.next_free(level + 1, w as u64 + 1)? as usize
        } else {
            (w + 1..words.len()).find(|&x| words[x] != !0)?
        };
        let free = !words[next];
        (free != 0).then(|| next as u64 * 64 + u64::from(free.trailing_zeros()))
    }

    fn visit(&mut self, mut i: u64) {
        self.left -= 1;
        for words in &mut self.levels {
            let w = (i / 64) as usize;
            words[w] |= 1 << (i % 64);
            if words[w] != !0 {
                break;
            }
            i = w as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn each_pass_visits_every_block_once() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        // Sizes around word and level boundaries.
        for blocks in [1, 2, 63, 64, 65, 4095, 4096, 4097, 300_000] {
            let mut map = RandMap::new(blocks);
            for pass in 0..2 {
                let mut seen = vec![false; blocks as usize];
                for _ in 0..blocks {
                    let i = map.take(&mut rng) as usize;
                    assert!(i < blocks as usize, "{i} outside {blocks} blocks");
                    assert!(!seen[i], "block {i} twice in pass {pass} of {blocks}");
                    seen[i] = true;
                }
            }
        }
    }

    #[test]
    fn picks_are_spread_not_sequential() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut map = RandMap::new(1 << 16);
        let first: Vec<u64> = (0..64).map(|_| map.take(&mut rng)).collect();
        let ascending = first.windows(2).filter(|p| p[1] == p[0] + 1).count();
        assert!(
            ascending < 4,
            "{ascending} of 63 picks follow the one before"
        );
        let lo = first.iter().filter(|&&i| i < 1 << 15).count();
        assert!(
            (16..=48).contains(&lo),
            "{lo} of 64 picks in the lower half"
        );
    }
}
