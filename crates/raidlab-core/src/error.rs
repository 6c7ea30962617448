//! Errors with context: which device, which operation, which byte range, and the
//! underlying cause. Messages are written for a person at a terminal.

use std::fmt;

/// What kind of failure this is, so callers can react (retry, degrade, refuse)
/// without parsing messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The device returned an I/O error.
    Io,
    /// The request lies (partly) outside the device.
    OutOfRange,
    /// The operation is not supported by this volume.
    Unsupported,
    /// Input (arguments, on-disk metadata, files) is malformed or inconsistent.
    Invalid,
    /// Another process holds the device.
    Busy,
    /// The volume is read-only.
    ReadOnly,
    /// Too many members are missing or failed for the level to serve the request.
    Unrecoverable,
    /// Stopped on request (Ctrl-C); progress was saved where the operation can
    /// resume.
    Interrupted,
    /// Refused before anything was done, because doing it would lose data or
    /// leave the array unable to serve it (not an I/O failure).
    Refused,
}

/// The operation that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Open,
    Read,
    Write,
    Flush,
    Discard,
    Lock,
    Parse,
    Plan,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Open => "open",
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Discard => "discard",
            Op::Lock => "lock",
            Op::Parse => "parse",
            Op::Plan => "plan",
        })
    }
}

/// A raidlab library error: a kind, the device and operation it concerns, the byte
/// range if any, a human message and the underlying cause.
#[derive(Debug)]
pub struct Error {
    pub kind: ErrorKind,
    pub op: Op,
    pub device: Option<String>,
    pub range: Option<(u64, u64)>,
    pub message: String,
    pub source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, op: Op, message: impl Into<String>) -> Self {
        Error {
            kind,
            op,
            device: None,
            range: None,
            message: message.into(),
            source: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, Op::Parse, message)
    }

    pub fn io(op: Op, device: impl Into<String>, source: std::io::Error) -> Self {
        let message = source.to_string();
        Error {
            kind: ErrorKind::Io,
            op,
            device: Some(device.into()),
            range: None,
            message,
            source: Some(Box::new(source)),
        }
    }

    /// Attach the device name unless one is already set (the innermost device is the
    /// most useful one to a person).
    pub fn on_device(mut self, device: impl Into<String>) -> Self {
        if self.device.is_none() {
            self.device = Some(device.into());
        }
        self
    }

    /// The same error without its underlying cause, for a second place that
    /// must report it (an error is not `Clone`: its cause may not be).
    pub fn copy(&self) -> Self {
        Error {
            device: self.device.clone(),
            range: self.range,
            ..Self::new(self.kind, self.op, self.message.clone())
        }
    }

    /// Attach the byte range `[offset, offset + len)` unless one is already set.
    pub fn at(mut self, offset: u64, len: u64) -> Self {
        if self.range.is_none() {
            self.range = Some((offset, len));
        }
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Bad input reads best as "device: what is wrong"; failed operations as
        // "read failed on device at offset ...: cause".
        if matches!(
            self.kind,
            ErrorKind::Invalid | ErrorKind::Unrecoverable | ErrorKind::Refused
        ) && matches!(self.op, Op::Parse | Op::Plan | Op::Open)
        {
            if let Some(dev) = &self.device {
                write!(f, "{dev}: ")?;
            }
            if let Some((off, len)) = self.range {
                write!(f, "at offset {off} (length {len}): ")?;
            }
            return f.write_str(&self.message);
        }
        // A refusal or a requested stop is not a failed operation: say so.
        let lead = match self.kind {
            ErrorKind::Refused => Some("refused"),
            ErrorKind::Interrupted => Some("stopped"),
            _ => None,
        };
        if let Some(lead) = lead {
            f.write_str(lead)?;
            if let Some(dev) = &self.device {
                write!(f, " on {dev}")?;
            }
            return write!(f, ": {}", self.message);
        }
        write!(f, "{} failed", self.op)?;
        if let Some(dev) = &self.device {
            write!(f, " on {dev}")?;
        }
        if let Some((off, len)) = self.range {
            write!(f, " at offset {off} (length {len})")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e.as_ref() as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_reads_as_device_then_problem() {
        let e = Error::invalid("no superblock").on_device("/tmp/m1");
        assert_eq!(e.to_string(), "/tmp/m1: no superblock");
    }

    #[test]
    fn display_names_device_range_and_cause() {
        let e = Error::io(Op::Read, "/tmp/m0", std::io::Error::other("boom")).at(4096, 512);
        assert_eq!(
            e.to_string(),
            "read failed on /tmp/m0 at offset 4096 (length 512): boom"
        );
        // The first context wins: an outer layer must not overwrite the inner device.
        let e = e.on_device("array").at(0, 1);
        assert_eq!(e.device.as_deref(), Some("/tmp/m0"));
        assert_eq!(e.range, Some((4096, 512)));
    }
}
