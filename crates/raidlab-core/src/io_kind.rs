//! The one name for what an I/O operation asks of a volume or device: read,
//! write, flush, trim or write-zeroes.
//!
//! Decides: the set of I/O operation kinds every layer speaks (the engine's
//! member plans, the simulator's device requests, a replayed trace) and how each
//! maps onto the operation an [`Error`](crate::Error) names. It decides nothing
//! about how a kind is carried out; what a layer does with a kind it cannot
//! serve (a simulated disk asked for write-zeroes) is that layer's documented
//! mapping or a clear error, never a panic here.

use crate::error::Op;
use serde::Serialize;

/// What one I/O operation asks for.
///
/// The order (`Read < Write < Flush < Trim < Zero`) is the simulator's old
/// request order, kept so that anything sorting requests sorts as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IoKind {
    Read,
    Write,
    /// Make every completed write durable (a device's cache flush); no range
    /// and no buffer.
    Flush,
    /// The range's contents are no longer needed (discard); no buffer. An SSD
    /// may drop its mapping; what the range reads afterwards is unspecified.
    Trim,
    /// The range reads as zeros afterwards (write-zeroes); no buffer.
    Zero,
}

impl IoKind {
    /// The lowercase word for people and JSON: "read", "write", "flush",
    /// "trim", "zero".
    pub fn name(self) -> &'static str {
        match self {
            IoKind::Read => "read",
            IoKind::Write => "write",
            IoKind::Flush => "flush",
            IoKind::Trim => "trim",
            IoKind::Zero => "zero",
        }
    }
}

impl std::fmt::Display for IoKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The operation an error about an I/O of this kind names. A trim is a
/// discard; write-zeroes is a write (it changes what the range reads), as the
/// NBD client already reports a failed `WRITE_ZEROES`.
impl From<IoKind> for Op {
    fn from(kind: IoKind) -> Op {
        match kind {
            IoKind::Read => Op::Read,
            IoKind::Write | IoKind::Zero => Op::Write,
            IoKind::Flush => Op::Flush,
            IoKind::Trim => Op::Discard,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_serde_and_ops() {
        for (k, name, op) in [
            (IoKind::Read, "read", Op::Read),
            (IoKind::Write, "write", Op::Write),
            (IoKind::Flush, "flush", Op::Flush),
            (IoKind::Trim, "trim", Op::Discard),
            (IoKind::Zero, "zero", Op::Write),
        ] {
            assert_eq!(k.to_string(), name);
            assert_eq!(Op::from(k), op);
        }
    }
}
