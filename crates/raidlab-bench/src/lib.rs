//! raidlab-bench: the benchmark harness behind `raidlab bench`.
//!
//! ```text
//!  target  (file / directory / block device with O_DIRECT and aligned buffers,
//!     │     an array given by its members run in-process, memory, throttled memory)
//!     ▼
//!  engine  (threads x queue depth, exactly: io_uring per thread for files and
//!     │     devices, else one blocking worker per queue slot; HDR latency)
//!     ▼
//!  suites  (cdm: CrystalDiskMark 8's test set and profiles)
//!     ▼
//!  schema  (one result type, "raidlab-bench/1", that every exporter reads)
//! ```
//!
//! What it must never do: write to a block device the caller did not explicitly
//! allow, leave a test file it created behind, panic on bad input or a failing
//! device (every failure is an error naming the target, offset and operation), or
//! let the harness itself be the bottleneck it is measuring (its ceiling is
//! documented in docs/benchmarks.md).

pub mod bonnie;
pub mod buffer;
pub mod cdm;
pub mod engine;
pub mod fio;
pub mod iozone;
pub mod randmap;
pub mod replay;
pub mod rusage;
pub mod schema;
pub mod seeds;
pub mod sim;
pub mod table;
pub mod target;
mod uring;

pub use engine::{Access, Control, DataFill, Dir, EngineKind, Limit, Measured, Rewrite, Workload};
pub use schema::{BenchReport, Host, Row, RunConditions};
pub use target::{OpenOptions, Target};
