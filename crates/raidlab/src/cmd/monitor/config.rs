//! What `raidlab monitor` watches and where it reports, from the command line
//! and the TOML file together (flags win). Decides what counts as naming
//! nothing and refuses it before anything runs; it must never open a member
//! or a socket.

use crate::cli::MonitorArgs;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    scan: bool,
    delay: Option<f64>,
    program: Option<PathBuf>,
    mail: Option<String>,
    mail_from: Option<String>,
    sendmail: Option<PathBuf>,
    #[serde(default)]
    syslog: bool,
    increment: Option<u8>,
    #[serde(default)]
    array: Vec<FileArray>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileArray {
    name: Option<String>,
    members: Vec<PathBuf>,
    spares: Option<usize>,
}

/// An array named to the monitor.
#[derive(Debug, Clone)]
pub struct Named {
    pub name: Option<String>,
    pub members: Vec<PathBuf>,
    /// SparesMissing when the array has fewer.
    pub spares: Option<usize>,
}

#[derive(Debug)]
pub struct Config {
    pub arrays: Vec<Named>,
    pub scan: bool,
    pub delay: Duration,
    pub oneshot: bool,
    pub test: bool,
    pub program: Option<PathBuf>,
    pub mail: Option<String>,
    pub mail_from: Option<String>,
    pub sendmail: PathBuf,
    pub syslog: bool,
    pub increment: u8,
}

fn read(path: &Path) -> Result<File> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the monitor configuration {}", path.display()))?;
    let file: File = toml::from_str(&text)
        .with_context(|| format!("the monitor configuration {} is not valid", path.display()))?;
    // Relative member paths mean what they say next to the file, not in
    // whatever directory the service happens to start in.
    let base = path.parent().unwrap_or(Path::new("."));
    let mut file = file;
    for a in &mut file.array {
        if a.members.is_empty() {
            bail!(
                "{}: an [[array]]{} has no members: name the array's member files or devices",
                path.display(),
                a.name
                    .as_deref()
                    .map(|n| format!(" ({n:?})"))
                    .unwrap_or_default()
            );
        }
        for m in &mut a.members {
            if m.is_relative() {
                *m = base.join(&*m);
            }
        }
    }
    if !file.scan && file.array.is_empty() {
        bail!(
            "{} names nothing to watch: give at least one [[array]] with members, or scan = true \
             to watch every array `raidlab serve` serves",
            path.display()
        );
    }
    Ok(file)
}

pub fn from_args(a: MonitorArgs) -> Result<Config> {
    let file = match &a.config {
        Some(p) => read(p)?,
        None => File::default(),
    };
    let mut arrays: Vec<Named> = file
        .array
        .into_iter()
        .map(|f| Named {
            name: f.name,
            members: f.members,
            spares: f.spares,
        })
        .collect();
    if !a.members.is_empty() {
        arrays.push(Named {
            name: None,
            members: a.members,
            spares: None,
        });
    }
    let delay = match a.delay.or(file.delay) {
        Some(d) if d.is_finite() && d > 0.0 => d,
        Some(d) => bail!("delay = {d} in the configuration: give seconds above 0"),
        None => 60.0,
    };
    let increment = a.increment.or(file.increment).unwrap_or(20);
    if !(1..=99).contains(&increment) {
        bail!("increment = {increment} in the configuration: give a percentage from 1 to 99");
    }
    let sendmail = a
        .sendmail
        .or(file.sendmail)
        .or_else(|| std::env::var_os("RAIDLAB_SENDMAIL").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/sendmail"));
    Ok(Config {
        // mdadm --scan's rule: with nothing named, watch what runs.
        scan: a.scan || file.scan || arrays.is_empty(),
        arrays,
        delay: Duration::from_secs_f64(delay),
        oneshot: a.oneshot,
        test: a.test,
        program: a.program.or(file.program),
        mail: a.mail.or(file.mail),
        mail_from: a.mail_from.or(file.mail_from),
        sendmail,
        syslog: a.syslog || file.syslog,
        increment,
    })
}
