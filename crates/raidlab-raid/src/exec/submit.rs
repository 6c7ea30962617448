//! How this process submits member I/O: through io_uring (a step's requests
//! to direct members sent together, no thread per request) or through the
//! I/O thread pool. Chosen once, at start, from what was asked
//! (`--member-io`) and what the kernel allows (a probe), and shown by
//! `detail` and `serve` with the reason when io_uring is not used.
//!
//! Decides only that choice; it never carries out a request itself.

use raidlab_core::{Error, ErrorKind, Op, Result};
use std::sync::OnceLock;

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemberIo {
    /// io_uring where the kernel allows it, threads otherwise.
    #[default]
    Auto,
    /// io_uring, or an error at start naming why not.
    Uring,
    /// The I/O thread pool.
    Threads,
}

impl MemberIo {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberIo::Auto => "auto",
            MemberIo::Uring => "uring",
            MemberIo::Threads => "threads",
        }
    }
}

impl std::str::FromStr for MemberIo {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(MemberIo::Auto),
            "uring" | "io_uring" | "io-uring" => Ok(MemberIo::Uring),
            "threads" => Ok(MemberIo::Threads),
            _ => Err(format!(
                "unknown member I/O submission {s:?}: say \"auto\", \"uring\" or \"threads\""
            )),
        }
    }
}

/// The submission in use and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    /// Steps on direct members go through io_uring (which ones: the
    /// executor's `uring` module).
    pub uring: bool,
    pub asked: MemberIo,
    /// Why not io_uring, when auto found it unavailable.
    pub unavailable: Option<String>,
}

impl Submission {
    /// The thread pool, as asked for.
    pub fn threads() -> Submission {
        Submission {
            uring: false,
            asked: MemberIo::Threads,
            unavailable: None,
        }
    }

    /// io_uring, without a probe: for tests and benchmarks that probed
    /// already (a ring that cannot be set up at run time still falls back
    /// to blocking calls, request by request).
    pub fn uring() -> Submission {
        Submission {
            uring: true,
            asked: MemberIo::Uring,
            unavailable: None,
        }
    }

    /// What `detail` and `serve` say: `io_uring`, `threads (asked for)`,
    /// `threads (io_uring unavailable: REASON)`.
    pub fn describe(&self) -> String {
        match (self.uring, &self.unavailable) {
            (true, _) => "io_uring".into(),
            (false, Some(why)) => format!("threads (io_uring unavailable: {why})"),
            (false, None) => "threads (asked for with --member-io threads)".into(),
        }
    }
}

/// The submission `asked` gives here, probing the kernel unless threads were
/// asked for. io_uring asked for and unavailable is an error saying why and
/// what to do.
pub fn choose(asked: MemberIo) -> Result<Submission> {
    choose_with(asked, raidlab_devices::uring::probe)
}

/// [`choose`] with the probe given (a test's, to see the fallback).
pub fn choose_with(
    asked: MemberIo,
    probe: impl FnOnce() -> std::result::Result<(), String>,
) -> Result<Submission> {
    if asked == MemberIo::Threads {
        return Ok(Submission::threads());
    }
    match probe() {
        Ok(()) => Ok(Submission {
            uring: true,
            asked,
            unavailable: None,
        }),
        Err(why) if asked == MemberIo::Auto => Ok(Submission {
            uring: false,
            asked,
            unavailable: Some(why),
        }),
        Err(why) => Err(Error::new(
            ErrorKind::Unsupported,
            Op::Open,
            format!("io_uring was asked for (--member-io uring) and is unavailable here: {why}; use --member-io threads (or auto, which falls back by itself)"),
        )),
    }
}

static CHOSEN: OnceLock<Submission> = OnceLock::new();

/// Make the process's choice from `asked` (at start, before any array is
/// opened); a second call keeps the first choice and returns it.
pub fn set(asked: MemberIo) -> Result<&'static Submission> {
    if let Some(s) = CHOSEN.get() {
        return Ok(s);
    }
    let s = choose(asked)?;
    Ok(CHOSEN.get_or_init(|| s))
}

/// The process's choice (made as `auto` on first use if no one chose).
pub fn current() -> &'static Submission {
    CHOSEN.get_or_init(|| {
        choose(MemberIo::Auto).unwrap_or_else(|e| Submission {
            uring: false,
            asked: MemberIo::Auto,
            unavailable: Some(e.to_string()),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_falls_back_with_the_reason_and_uring_refuses() {
        let s = choose_with(MemberIo::Auto, || Err("io_uring_setup failed: x".into())).unwrap();
        assert!(!s.uring);
        assert_eq!(
            s.describe(),
            "threads (io_uring unavailable: io_uring_setup failed: x)"
        );
        let e = choose_with(MemberIo::Uring, || Err("nope".into())).unwrap_err();
        assert!(e.to_string().contains("--member-io threads"), "{e}");
        assert!(e.to_string().contains("nope"), "{e}");
        let t = choose_with(MemberIo::Threads, || panic!("threads never probe")).unwrap();
        assert!(!t.uring);
        assert!(choose_with(MemberIo::Auto, || Ok(())).unwrap().uring);
        for m in [MemberIo::Auto, MemberIo::Uring, MemberIo::Threads] {
            assert_eq!(m.as_str().parse::<MemberIo>(), Ok(m));
        }
        assert!("fast".parse::<MemberIo>().is_err());
    }
}
