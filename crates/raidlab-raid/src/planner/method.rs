//! How a write to one column segment of a parity row keeps its parity
//! right: read-modify-write, reconstruct-write, or neither (a missing
//! member either way would read, so the row is rebuilt first).
//!
//! It decides that choice and the member reads it costs, for the planner
//! (which then builds the plan) and for the count of a write's reads
//! (`count`, which must agree with the plan without building it). It must
//! never build plan steps or look at which members they are.

/// The method a parity segment's write takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ParityWrite {
    /// Read the untouched data chunks; parity computed afresh.
    Reconstruct,
    /// Read the touched data chunks and the parities present; the change
    /// folded into parity.
    ReadModify,
    /// Neither method has all its reads: what is left is read, the missing
    /// chunks rebuilt, then fresh parity.
    Rebuild,
}

/// A segment as the choice sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Segment {
    /// Data chunks in the row.
    pub data: usize,
    /// Data chunks the write touches in this segment.
    pub touched: usize,
    /// Parity members present (P, and Q on RAID 6).
    pub parities: usize,
    /// Every read read-modify-write needs is possible.
    pub rmw_ok: bool,
    /// Every read reconstruct-write needs is possible.
    pub rcw_ok: bool,
}

impl Segment {
    /// The method with the fewer member reads; reconstruct-write on a tie
    /// (its parity does not depend on the old parity being right).
    pub fn method(&self) -> ParityWrite {
        if self.rcw_ok && (!self.rmw_ok || self.rcw_reads() <= self.rmw_reads()) {
            ParityWrite::Reconstruct
        } else if self.rmw_ok {
            ParityWrite::ReadModify
        } else {
            ParityWrite::Rebuild
        }
    }

    /// The member reads of the chosen method, where it is one of the two
    /// (a rebuild's reads depend on which members are missing).
    pub fn reads(&self) -> Option<usize> {
        match self.method() {
            ParityWrite::Reconstruct => Some(self.rcw_reads()),
            ParityWrite::ReadModify => Some(self.rmw_reads()),
            ParityWrite::Rebuild => None,
        }
    }

    fn rcw_reads(&self) -> usize {
        self.data - self.touched
    }

    fn rmw_reads(&self) -> usize {
        self.touched + self.parities
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(data: usize, touched: usize, parities: usize) -> Segment {
        Segment {
            data,
            touched,
            parities,
            rmw_ok: true,
            rcw_ok: true,
        }
    }

    #[test]
    fn fewer_reads_win_and_a_tie_reconstructs() {
        // RAID 5 of 5 (4 data): one chunk touched, rmw reads 2, rcw 3.
        assert_eq!(seg(4, 1, 1).method(), ParityWrite::ReadModify);
        assert_eq!(seg(4, 1, 1).reads(), Some(2));
        // Two touched: rmw 3, rcw 2.
        assert_eq!(seg(4, 2, 1).method(), ParityWrite::Reconstruct);
        // RAID 5 of 3 (2 data), one touched: rcw reads 1, rmw 2.
        assert_eq!(seg(2, 1, 1).reads(), Some(1));
        // A tie (RAID 6 of 6, 4 data, one touched: rmw 3, rcw 3).
        assert_eq!(seg(4, 1, 2).method(), ParityWrite::Reconstruct);
        // A whole row reads nothing.
        assert_eq!(seg(4, 4, 2).reads(), Some(0));
    }

    #[test]
    fn a_method_missing_its_reads_is_not_chosen() {
        let mut s = seg(4, 2, 1);
        s.rcw_ok = false;
        assert_eq!(s.method(), ParityWrite::ReadModify);
        s.rmw_ok = false;
        assert_eq!(s.method(), ParityWrite::Rebuild);
        assert_eq!(s.reads(), None);
        let mut s = seg(4, 1, 1);
        s.rmw_ok = false;
        assert_eq!(s.method(), ParityWrite::Reconstruct);
    }
}
