//! raidlab-nbd: serves any raidlab [`Volume`](raidlab_core::Volume) to standard NBD
//! clients (nbd-client, qemu, libnbd's tools, fio's nbd engine).
//!
//! - [`proto`]: the wire format as constants and pure parse/encode functions.
//! - [`server`]: one connection over any `Read` + `Write` byte stream (a socket,
//!   or bytes in memory for tests and fuzzing): the fixed newstyle handshake
//!   (`OPT_GO`, `OPT_INFO`, `OPT_LIST`, `OPT_ABORT`, `OPT_EXPORT_NAME`, structured
//!   replies), then `READ`, `WRITE`, `FLUSH`, `TRIM`, `WRITE_ZEROES`, `DISC`, with
//!   FUA, many requests in flight served in parallel, and limits on connections
//!   and in-flight bytes.
//! - `splice`: read replies on plain sockets sent from the volume's files to the
//!   socket through a pipe, without copying the data in user space.
//! - [`listen`]: accept loops for Unix and TCP sockets with a clean drain on stop.
//! - [`tls`]: STARTTLS with rustls: X.509 certificates, optional client
//!   certificate verification, and a mode that refuses clients that do not
//!   upgrade.
//!
//! Threads, not async: every [`Volume`](raidlab_core::Volume) call blocks (positional
//! file I/O, the array's executor runs member I/O on its own threads), so an async
//! runtime would have to move each request to a blocking pool anyway. A reader
//! thread plus a small worker pool per connection gives the same parallelism with
//! no runtime and keeps the server a plain function of a byte stream.
//!
//! This crate must never touch bytes of a volume outside a request's range, never
//! trust a length from the wire before checking it against a limit, and never
//! panic on any input: a malformed stream ends in a protocol error reply or a
//! clean disconnect.

pub mod client;
pub mod listen;
pub mod proto;
pub mod server;
mod splice;
pub mod tls;

pub use server::{
    CommandStats, Export, ExportStats, Handshake, LatencyHistogram, Limits, Negotiated, Outcome,
    Server, StatsReader,
};
