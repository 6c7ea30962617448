//! Buffers of held runs written out, kept for the next runs held. A small
//! write held was an allocation and a free of its size each time, and in
//! glibc's allocator one of a page or more also sweeps the small free lists.
//!
//! Decides only which buffers are kept (a bounded number of small ones). It
//! must never hand out a buffer with bytes in it: what a run holds is what
//! its writes put there, never what an earlier run left.

use std::sync::Mutex;

#[derive(Debug, Default)]
pub(super) struct Spare {
    bufs: Mutex<Vec<Vec<u8>>>,
}

impl Spare {
    /// Buffers kept at most, and the largest kept: idle buffers hold at most
    /// 16 MiB, for the small runs that come by the thousand; a larger run is
    /// rare and allocated as it comes.
    const COUNT: usize = 256;
    const LARGEST: usize = 64 << 10;

    /// An empty buffer.
    pub(super) fn take(&self) -> Vec<u8> {
        self.bufs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_default()
    }

    /// Keep the buffers of `runs` (written out) for later runs, emptied.
    pub(super) fn give(&self, runs: Vec<(usize, Vec<u8>)>) {
        let mut bufs = self.bufs.lock().unwrap_or_else(|p| p.into_inner());
        for (_, mut d) in runs {
            if bufs.len() < Self::COUNT && d.capacity() <= Self::LARGEST {
                d.clear();
                bufs.push(d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_empty_and_bounded() {
        let s = Spare::default();
        let runs: Vec<(usize, Vec<u8>)> = (0..Spare::COUNT + 10)
            .map(|i| (i, vec![7u8; 4096]))
            .chain([(0, vec![1u8; Spare::LARGEST + 1])])
            .collect();
        s.give(runs);
        assert_eq!(s.bufs.lock().map(|b| b.len()).unwrap_or(0), Spare::COUNT);
        for _ in 0..Spare::COUNT {
            let b = s.take();
            assert!(b.is_empty() && b.capacity() >= 4096);
        }
        assert_eq!(s.take().capacity(), 0, "none left: a new one");
    }
}
