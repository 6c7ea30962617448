//! The management verbs on an array a server is serving: the command side
//! (send the request to the server's control socket, show its progress, print
//! its answer) and the server side (carry the request out on the running
//! array with `raidlab_raid::live`). Same verbs, same flags and the same output
//! as offline; what differs is said in the output (rebuilds run in the server
//! and continue if the command is interrupted).

use crate::cli::{AddArgs, FailArgs, MembersJson, RemoveArgs, ReplaceArgs, RunArgs, ScrubArgs};
use crate::cmd::cache_live::{self, ManagedCache};
use crate::cmd::grow::ServedGrow;
use crate::cmd::info::{render_detail, ServedInfo};
use crate::cmd::manage::{bar, scrub_text};
use crate::control::{self, Command, Reply, Request};
use anyhow::{anyhow, Result};
use raidlab_devices::OpenMode;
use raidlab_raid::live::LiveArray;
use raidlab_raid::recovery::{Progress, RunOptions};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

// The server side: carrying a request out on the running array.
mod served;

pub use served::{monitor, serve_control, Managed};

/// Send `cmd`, show progress bars for what the server reports, print its
/// output; its exit status becomes ours.
fn run(server: &Path, members: &[std::path::PathBuf], cmd: Command) -> Result<ExitCode> {
    show(|progress| control::call(server, members, cmd, progress))
}

/// Make a request with `call`, showing progress bars for what the server
/// reports, and print its output; its exit status becomes ours.
pub fn show(call: impl FnOnce(&mut dyn FnMut(&Reply)) -> Result<(String, u8)>) -> Result<ExitCode> {
    // One bar per kind of run reported (a RAID 6 may rebuild two roles).
    type Bar = Box<dyn FnMut(Progress)>;
    let mut bars: Vec<(String, Bar)> = Vec::new();
    let (stdout, exit) = call(&mut |r| {
        if let Reply::Progress { what, done, total } = r {
            if bars.last().map(|(w, _)| w != what).unwrap_or(true) {
                bars.push((what.clone(), Box::new(bar(what))));
            }
            if let Some((_, b)) = bars.last_mut() {
                b(Progress {
                    done: *done,
                    total: *total,
                });
            }
        }
    })?;
    out!("{stdout}");
    Ok(ExitCode::from(exit))
}

/// `grow` of a served array: the reshape runs in the server (and goes on if
/// this command is interrupted); its progress is shown here.
pub fn grow(server: &Path, members: &[std::path::PathBuf], cmd: Command) -> Result<ExitCode> {
    run(server, members, cmd)
}

pub fn detail(server: &Path, a: &MembersJson) -> Result<ExitCode> {
    run(server, &a.members, Command::Detail { json: a.json })
}

pub fn fail(server: &Path, a: FailArgs) -> Result<ExitCode> {
    let member = control::absolute(&a.member).display().to_string();
    run(
        server,
        &a.members,
        Command::Fail {
            member,
            wait: !a.no_rebuild,
            max_rate: a.run.max_rate,
        },
    )
}

pub fn remove(server: &Path, a: RemoveArgs) -> Result<ExitCode> {
    let member = control::absolute(&a.member).display().to_string();
    run(server, &a.members, Command::Remove { member })
}

pub fn add(server: &Path, a: &AddArgs) -> Result<ExitCode> {
    let new = control::absolute(&a.new).display().to_string();
    run(
        server,
        &a.members,
        Command::Add {
            new,
            force: a.force,
            rebuild: !a.no_rebuild,
            max_rate: a.run.max_rate,
            re_add: a.re_add,
        },
    )
}

pub fn replace(server: &Path, a: &ReplaceArgs) -> Result<ExitCode> {
    run(
        server,
        &a.members,
        Command::Replace {
            old: control::absolute(&a.old).display().to_string(),
            new: control::absolute(&a.with).display().to_string(),
            force: a.force,
            rebuild: !a.no_rebuild,
            max_rate: a.run.max_rate,
        },
    )
}

pub fn rebuild(server: &Path, a: &RunArgs) -> Result<ExitCode> {
    run(
        server,
        &a.members,
        Command::Rebuild {
            max_rate: a.run.max_rate,
            json: a.run.json,
        },
    )
}

pub fn scrub(server: &Path, a: &ScrubArgs, repair: bool) -> Result<ExitCode> {
    run(
        server,
        &a.members,
        Command::Check {
            repair,
            json: a.run.json,
            max_rate: a.run.max_rate,
        },
    )
}

/// `raidlab stop`: ask the server to stop, then wait until it has (its
/// control socket goes away), so the members are free when this returns.
pub fn stop(a: MembersJson) -> Result<ExitCode> {
    let Some(server) = control::find(&a.members)? else {
        anyhow::bail!("no running server (`raidlab serve`) serves this array: nothing to stop");
    };
    run(&server, &a.members, Command::Stop)?;
    let t = std::time::Instant::now();
    while server.exists() && UnixStream::connect(&server).is_ok() {
        if t.elapsed() > Duration::from_secs(600) {
            anyhow::bail!("the server has not stopped after 10 minutes");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    outln!("raidlab: stopped; the array is flushed and marked clean");
    Ok(ExitCode::SUCCESS)
}
