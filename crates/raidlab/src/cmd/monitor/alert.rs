//! Where an event goes: a line on stdout, the user's program (`PROGRAM EVENT
//! ARRAY [MEMBER]`, as mdadm runs it), a mail through `sendmail -t` for the
//! events mdadm mails, and a syslog datagram on /dev/log (journald reads it).
//! It decides the wording, the mail's headers and each event's syslog
//! priority. It must never stop the monitor: an output that fails is said
//! on stderr and the others still get the event.

use super::config::Config;
use super::events::Event;
use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

pub struct Alerts {
    program: Option<PathBuf>,
    mail: Option<String>,
    mail_from: Option<String>,
    sendmail: PathBuf,
    syslog: Option<PathBuf>,
    host: String,
}

/// The syslog socket: /dev/log, or `$RAIDLAB_SYSLOG_SOCKET` (for tests, and
/// for a syslog daemon listening elsewhere).
fn syslog_socket() -> PathBuf {
    std::env::var_os("RAIDLAB_SYSLOG_SOCKET")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/log"))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The events mdadm mails: failures, missing spares, a degraded array, tests;
/// and a failed cache device (a failure too).
fn mailed(name: &str) -> bool {
    ["Fail", "Test", "Spares", "Degrade"]
        .iter()
        .any(|p| name.starts_with(p))
        || name == "CacheDeviceFailed"
}

/// Syslog severity: critical for what lost redundancy, warning for what is
/// under way or short, notice for the rest.
fn severity(name: &str) -> u8 {
    if name.starts_with("Fail")
        || name == "DegradedArray"
        || name == "DeviceDisappeared"
        || name == "CacheDeviceFailed"
    {
        2
    } else if name.starts_with("Rebuild") && name != "RebuildFinished"
        || name == "SparesMissing"
        || name.starts_with("Cache")
    {
        4
    } else {
        5
    }
}

/// UTC civil time from seconds since the epoch (Howard Hinnant's days-from-
/// civil inverse), so no time zone database is needed.
fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        (rem / 60 % 60) as u32,
        (rem % 60) as u32,
    )
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `2026-12-01T21:40:00Z`.
pub fn timestamp(secs: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// RFC 3164's `Dec  1 21:40:00` (in UTC: the monitor keeps no time zone).
fn syslog_time(secs: u64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (_, mo, d, h, mi, s) = civil(secs);
    format!("{} {d:>2} {h:02}:{mi:02}:{s:02}", MONTHS[(mo - 1) as usize])
}

/// The event in words, as stdout and syslog say it.
pub fn sentence(e: &Event, array: &str) -> String {
    match &e.member {
        Some(m) => format!("{} on array {array}, member {m}", e.name),
        None => format!("{} on array {array}", e.name),
    }
}

impl Alerts {
    pub fn new(c: &Config) -> Alerts {
        Alerts {
            program: c.program.clone(),
            mail: c.mail.clone(),
            mail_from: c.mail_from.clone(),
            sendmail: c.sendmail.clone(),
            syslog: c.syslog.then(syslog_socket),
            host: hostname(),
        }
    }

    /// Send `e` about `array` everywhere asked; `state` is the array's state
    /// in a few lines, for the mail.
    pub fn send(&self, e: &Event, array: &str, state: &str) {
        let secs = now_secs();
        let line = sentence(e, array);
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{} {line}", timestamp(secs));
            let _ = out.flush();
        }
        if let Some(p) = &self.program {
            let mut c = Command::new(p);
            c.arg(&e.name).arg(array);
            if let Some(m) = &e.member {
                c.arg(m);
            }
            // Waited for, as mdadm does: events reach the program in order.
            match c.stdin(Stdio::null()).status() {
                Ok(s) if s.success() => {}
                Ok(s) => eprintln!("raidlab monitor: {} {line}: exited with {s}", p.display()),
                Err(err) => eprintln!("raidlab monitor: cannot run {}: {err}", p.display()),
            }
        }
        if let Some(to) = self.mail.as_deref().filter(|_| mailed(&e.name)) {
            if let Err(err) = self.mail(to, e, array, state) {
                eprintln!("raidlab monitor: cannot mail {} about {line}: {err:#}", to);
            }
        }
        if let Some(sock) = &self.syslog {
            // Facility daemon (3).
            let msg = format!(
                "<{}>{} raidlab-monitor[{}]: {line}",
                3 * 8 + severity(&e.name),
                syslog_time(secs),
                std::process::id()
            );
            let sent = UnixDatagram::unbound().and_then(|s| s.send_to(msg.as_bytes(), sock));
            if let Err(err) = sent {
                eprintln!(
                    "raidlab monitor: cannot log to syslog at {}: {err}",
                    sock.display()
                );
            }
        }
    }

    fn mail(&self, to: &str, e: &Event, array: &str, state: &str) -> anyhow::Result<()> {
        use anyhow::{bail, Context};
        let from = self
            .mail_from
            .clone()
            .unwrap_or_else(|| "raidlab monitoring <root>".into());
        let mut body = format!(
            "From: {from}\nTo: {to}\nSubject: {} event on {array}:{}\n\n",
            e.name, self.host
        );
        body += &format!(
            "raidlab monitor on {} saw a {} event on array {array}.\n\n",
            self.host, e.name
        );
        if let Some(m) = &e.member {
            body += &format!("The member concerned is {m}.\n\n");
        }
        body += &format!("The array now:\n\n{state}\n");
        let mut child = Command::new(&self.sendmail)
            .arg("-t")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot run {} -t", self.sendmail.display()))?;
        child
            .stdin
            .take()
            .context("no pipe to sendmail")?
            .write_all(body.as_bytes())
            .with_context(|| format!("{} did not take the message", self.sendmail.display()))?;
        let st = child.wait()?;
        if !st.success() {
            bail!("{} -t exited with {st}", self.sendmail.display());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_time_matches_known_dates() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(timestamp(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(timestamp(1_795_037_000), "2026-11-18T21:23:20Z");
        assert_eq!(syslog_time(1_795_037_000), "Nov 18 21:23:20");
    }

    #[test]
    fn mail_and_severity_follow_mdadm() {
        for e in [
            "Fail",
            "FailSpare",
            "TestMessage",
            "SparesMissing",
            "DegradedArray",
        ] {
            assert!(mailed(e), "{e}");
        }
        for e in [
            "RebuildStarted",
            "SpareActive",
            "NewArray",
            "DeviceDisappeared",
        ] {
            assert!(!mailed(e), "{e}");
        }
        assert_eq!(severity("Fail"), 2);
        assert!(mailed("CacheDeviceFailed"));
        assert_eq!(severity("CacheDeviceFailed"), 2);
        assert!(!mailed("CacheDirtyAboveTarget"));
        assert_eq!(severity("CacheDirtyAboveTarget"), 4);
        assert_eq!(severity("Rebuild40"), 4);
        assert_eq!(severity("TestMessage"), 5);
    }
}
