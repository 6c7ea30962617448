//! The buffers a torture run reads into and writes from, kept from request
//! to request and from run to run on a thread, and the reads that use them.
//! Every restart reads the whole array: a fresh zeroed buffer each time
//! (and one per write) was malloc's memset and the kernel's page faults on
//! a heap grown and trimmed again, about a tenth of a run.
//!
//! It decides nothing a run does or checks: a read buffer is zeroed before
//! every read, as a fresh one was, so a read that succeeds without filling
//! it shows zeros there as before, never the bytes of an earlier read.

use super::run::{Outcome, Rig};
use super::trace::digest;
use raidlab_core::Volume;
use std::cell::RefCell;

#[derive(Default)]
pub(super) struct Buffers {
    read: Vec<u8>,
    data: Vec<u8>,
}

thread_local! {
    /// The last run's buffers on this thread (read, data), for the next run.
    static SPARE: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

impl Buffers {
    pub(super) fn new() -> Buffers {
        let (read, data) = SPARE.try_with(|s| s.take()).unwrap_or_default();
        Buffers { read, data }
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        let kept = (
            std::mem::take(&mut self.read),
            std::mem::take(&mut self.data),
        );
        let _ = SPARE.try_with(|s| s.replace(kept));
    }
}

impl Rig {
    /// A buffer of `len` bytes for a write's data, which the caller fills
    /// whole; give it back with [`Rig::give_data`].
    pub(super) fn take_data(&mut self, len: usize) -> Vec<u8> {
        let mut b = std::mem::take(&mut self.bufs.data);
        // Only what was never part of it is zeroed: the caller overwrites
        // every byte.
        b.truncate(len);
        b.resize(len, 0);
        b
    }

    pub(super) fn give_data(&mut self, b: Vec<u8>) {
        self.bufs.data = b;
    }

    /// `len` bytes at `offset` of what the workload writes to (the cache
    /// tier in front, or the array), and how the read went; give the buffer
    /// back with [`Rig::give_read`].
    pub(super) fn read_front(
        &mut self,
        offset: u64,
        len: usize,
    ) -> (Vec<u8>, raidlab_core::Result<()>) {
        let mut got = std::mem::take(&mut self.bufs.read);
        got.clear();
        got.resize(len, 0);
        let r = match self.front() {
            Some(v) => v.read_at(&mut got, offset),
            None => self.array().read_at(&mut got, offset),
        };
        (got, r)
    }

    pub(super) fn give_read(&mut self, b: Vec<u8>) {
        if b.capacity() >= self.bufs.read.capacity() {
            self.bufs.read = b;
        }
    }

    pub(super) fn read_range(&mut self, strict: bool, off: usize, len: usize) -> Outcome {
        let (got, r) = self.read_front(off as u64, len);
        let out = self.judge_read(strict, off, &got, r);
        self.give_read(got);
        out
    }

    pub(super) fn judge_read(
        &mut self,
        strict: bool,
        off: usize,
        got: &[u8],
        r: raidlab_core::Result<()>,
    ) -> Outcome {
        let len = got.len();
        self.counts.reads += 1;
        let same = r.is_ok() && *got == self.model.current[off..off + len];
        let said = match &r {
            Err(e) => e.to_string(),
            // The model's bytes exactly, the whole array: its digest is the
            // model's, kept per block.
            Ok(()) if same && len == self.model.size() => format!("{:016x}", self.model.digest()),
            Ok(()) => format!("{:016x}", digest(got)),
        };
        self.note(format!("read {off}+{len}: {said}"));
        match r {
            Ok(()) if same => Ok(()),
            Ok(()) => match self.model.first_difference(got, off) {
                None => Ok(()),
                Some(i) => Err(format!(
                    "read {off}+{len} returned wrong data at array byte {} (got {:#04x}, want {:#04x}){}",
                    off + i,
                    got[i],
                    self.model.current[off + i],
                    if strict { "" } else { " beyond the level's tolerance: silently wrong data" }
                )),
            },
            Err(e) if strict => Err(format!(
                "read {off}+{len} failed within the level's tolerance: {e}"
            )),
            Err(_) => Ok(()),
        }
    }
}
