//! Counting what a simulated array asked of its members.
//!
//! Decides nothing: it records member operations (kind, member, offset, length) as
//! they are issued, so tests can compare them with what the real engine does, and
//! sums them for reports.

use raidlab_core::IoKind;

/// One member operation as issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberIo {
    pub kind: IoKind,
    pub member: usize,
    pub offset: u64,
    pub len: u64,
}

/// Member operations issued, counted per kind and (when asked) kept one by one.
#[derive(Debug, Clone, Default)]
pub struct OpLog {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Every operation in issue order, when `keep` is set.
    pub ops: Vec<MemberIo>,
    pub keep: bool,
}

impl OpLog {
    pub fn record(&mut self, io: MemberIo) {
        match io.kind {
            IoKind::Read => {
                self.reads += 1;
                self.read_bytes += io.len;
            }
            // A device serves write-zeroes as a write (see `device::Request`).
            IoKind::Write | IoKind::Zero => {
                self.writes += 1;
                self.write_bytes += io.len;
            }
            IoKind::Flush | IoKind::Trim => {}
        }
        if self.keep {
            self.ops.push(io);
        }
    }
}
