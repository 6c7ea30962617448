//! Helpers shared by the CLI's integration tests.
#![allow(dead_code)]

pub mod fio;
pub mod served_grow;
pub mod verbs;

use raidlab_devices::{FaultVolume, FileVolume, OpenMode, PowerCutPolicy};
use raidlab_raid::assemble::{Assembly, Device};
use std::path::Path;
use std::sync::Arc;

type Faulty = Arc<FaultVolume<FileVolume>>;

/// Open `paths` behind volatile-cache fault volumes (so a power cut decides what
/// reaches the files) and assemble them.
fn open_faulty(paths: &[String], what: &str) -> Result<(Vec<Faulty>, Assembly), String> {
    let mut faults = Vec::new();
    for m in paths {
        let f = FileVolume::open(Path::new(m), OpenMode::ReadWrite)
            .map_err(|e| format!("{what}: open: {e}"))?;
        faults.push(Arc::new(FaultVolume::with_volatile_cache(f)));
    }
    let devices = faults
        .iter()
        .zip(paths)
        .map(|(f, m)| Device {
            path: m.clone(),
            volume: f.clone(),
        })
        .collect();
    let asm = Assembly::assemble(devices).map_err(|e| format!("{what}: assemble: {e}"))?;
    Ok((faults, asm))
}

/// Cut the power on every device: those `lose` says lose every unflushed write,
/// the others keep theirs.
fn power_cut(faults: &[Faulty], lose: impl Fn(usize) -> bool, what: &str) -> Result<(), String> {
    for (i, f) in faults.iter().enumerate() {
        let policy = if lose(i) {
            PowerCutPolicy::DropAll
        } else {
            PowerCutPolicy::KeepAll
        };
        f.power_cut_with(policy)
            .map_err(|e| format!("{what}: power cut: {e}"))?;
    }
    Ok(())
}

/// A crash in the middle of a logged write, made on raidlab's members with its
/// own engine: the array is opened (logs started, superblocks marked active), `data` is written at `at`, then the power goes: the partial parity log
/// was already durable, the data member keeps its write and the parity member
/// loses its parity update. Parity is now stale for those rows; only a replay
/// of the log makes it right again.
pub fn ppl_crash(members: &[String], at: u64, data: &[u8]) -> Result<(), String> {
    use raidlab_core::Volume;
    let err = |what: &str, e: &dyn std::fmt::Display| format!("pplcrash: {what}: {e}");
    let (faults, mut asm) = open_faulty(members, "pplcrash")?;
    asm.start_ppl().map_err(|e| err("start the logs", &e))?;
    asm.mark_dirty().map_err(|e| err("mark dirty", &e))?;
    let array = asm.array().map_err(|e| err("array", &e))?;
    if !array.has_ppl() {
        return Err("pplcrash: the array does not keep a partial parity log".into());
    }
    array.write_at(data, at).map_err(|e| err("write", &e))?;
    let g = asm.geometry;
    let parity = g.stripe(at / (g.chunk_bytes * g.data_disks() as u64)).p;
    power_cut(&faults, |role| role == parity, "pplcrash")?;
    drop(array);
    drop(asm);
    Ok(())
}

/// A crash in the middle of a journaled write, made with raidlab's engine: the
/// array (members then the journal device, last) is opened with its journal
/// started, `data` is written at `at`, then the power goes: the journal and the
/// data members keep their writes, the stripe's parity members (P, and Q for
/// RAID 6) lose theirs. Parity is now stale for those rows; only a replay of
/// the journal makes it right again.
pub fn journal_crash(devices: &[String], at: u64, data: &[u8]) -> Result<(), String> {
    journal_crash_in(devices, at, data, false)
}

/// [`journal_crash`] in md's write-back mode: `data` is written at `at` and
/// flushed, so it is acknowledged while only the journal holds it (a
/// write-back flush touches no member), then the power goes and every member
/// loses whatever it had not flushed; the journal keeps its writes. The data
/// is now nowhere but in the journal: only a replay of its data-only stripes
/// brings it back.
pub fn journal_crash_write_back(devices: &[String], at: u64, data: &[u8]) -> Result<(), String> {
    journal_crash_in(devices, at, data, true)
}

fn journal_crash_in(
    devices: &[String],
    at: u64,
    data: &[u8],
    write_back: bool,
) -> Result<(), String> {
    use raidlab_core::Volume;
    let err = |what: &str, e: &dyn std::fmt::Display| format!("journalcrash: {what}: {e}");
    let (faults, mut asm) = open_faulty(devices, "journalcrash")?;
    if write_back {
        // Write-back holds stripes in the stripe cache, which only an array
        // started for writing has: start it as `raidlab serve` would.
        if !asm.has_journal() {
            return Err("journalcrash: the array has no journal".into());
        }
        let opts = raidlab_raid::lifecycle::StartOptions {
            write: true,
            journal_mode: raidlab_raid::journal::JournalMode::WriteBack,
            ..Default::default()
        };
        let mut started = raidlab_raid::lifecycle::Started::start(asm, opts)
            .map_err(|e| err("start in write-back mode", &e))?;
        started
            .array
            .write_at(data, at)
            .map_err(|e| err("write", &e))?;
        started.flush().map_err(|e| err("flush", &e))?;
        let lose: Vec<bool> = started
            .asm()
            .members
            .iter()
            .map(|m| m.role.is_some())
            .collect();
        power_cut(&faults, |i| lose[i], "journalcrash")?;
        // Everything is off now: dropping the started array writes nothing.
        drop(started);
        return Ok(());
    }
    asm.start_journal()
        .map_err(|e| err("start the journal", &e))?
        .ok_or("journalcrash: the array has no journal")?;
    asm.mark_dirty().map_err(|e| err("mark dirty", &e))?;
    let array = asm.array().map_err(|e| err("array", &e))?;
    if !array.has_journal() {
        return Err("journalcrash: the array does not write through its journal".into());
    }
    array.write_at(data, at).map_err(|e| err("write", &e))?;
    let g = asm.geometry;
    let map = g.stripe(at / (g.chunk_bytes * g.data_disks() as u64));
    let parity: Vec<bool> = asm
        .members
        .iter()
        .map(|m| m.role.is_some_and(|r| r == map.p || Some(r) == map.q))
        .collect();
    power_cut(&faults, |i| parity[i], "journalcrash")?;
    drop(array);
    drop(asm);
    Ok(())
}

/// `raidlab serve` started by a test, stopped with SIGTERM (a clean stop)
/// by [`Served::stop`] or killed -9 by [`Served::kill`], killed if dropped.
pub struct Served {
    child: Option<std::process::Child>,
    socket: std::path::PathBuf,
}

/// How [`Served::start_with`] starts `raidlab serve`.
pub struct ServeOptions<'a> {
    /// The directory the server runs in, with its run directory (control
    /// sockets) at `dir/run`; `None`: the test's own and the default run
    /// directory, for tests whose verbs run without `RAIDLAB_RUN_DIR`.
    pub dir: Option<&'a Path>,
    /// The NBD socket (a stale one is removed first).
    pub socket: std::path::PathBuf,
    /// After `serve --socket SOCKET`: options, then members or devices.
    pub args: &'a [&'a str],
    /// Wait for the control socket too (`dir` must be given), so a verb
    /// sent right after finds the server.
    pub wait_control: bool,
}

impl Served {
    /// Serve `members` (paths relative to `dir`) on `dir/nbd.sock` and
    /// wait until both its NBD socket and its control socket are up.
    pub fn start(dir: &Path, members: &[&str]) -> Served {
        Served::start_with(ServeOptions {
            dir: Some(dir),
            socket: dir.join("nbd.sock"),
            args: members,
            wait_control: true,
        })
    }

    /// Start `raidlab serve` as `o` says and wait until it listens.
    pub fn start_with(o: ServeOptions) -> Served {
        Served::start_env(o, &[])
    }

    /// [`Served::start_with`], the server given `env` too (a test-only
    /// hook of the product, such as `RAIDLAB_TEST_HOLD_RESHAPE_END`).
    pub fn start_env(o: ServeOptions, env: &[(&str, &str)]) -> Served {
        use std::io::Read;
        let _ = std::fs::remove_file(&o.socket);
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_raidlab"));
        cmd.envs(env.iter().copied());
        if let Some(dir) = o.dir {
            cmd.current_dir(dir).env("RAIDLAB_RUN_DIR", dir.join("run"));
        }
        let child = cmd
            .args(["serve", "--socket"])
            .arg(&o.socket)
            .args(o.args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("raidlab serve starts");
        let pid = child.id();
        let mut s = Served {
            child: Some(child),
            socket: o.socket,
        };
        let ctl = o
            .dir
            .filter(|_| o.wait_control)
            .map(|d| d.join("run").join(format!("serve-{pid}.ctl")));
        let t = std::time::Instant::now();
        while std::os::unix::net::UnixStream::connect(&s.socket).is_err()
            || ctl.as_ref().is_some_and(|c| !c.exists())
        {
            if let Some(st) = s.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                let mut err = String::new();
                if let Some(mut e) = s.child.take().and_then(|c| c.stderr) {
                    let _ = e.read_to_string(&mut err);
                }
                panic!("raidlab serve exited at start ({st}): {err}");
            }
            assert!(
                t.elapsed() < std::time::Duration::from_secs(60),
                "raidlab serve did not listen within 60 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        s
    }

    /// The NBD URI of the default export.
    pub fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket.display())
    }

    /// The NBD URI of export `name`.
    pub fn export_uri(&self, name: &str) -> String {
        format!("nbd+unix:///{name}?socket={}", self.socket.display())
    }

    /// SIGTERM (a clean stop: drained, flushed, marked clean); asserts it
    /// exited 0 and returns its stderr.
    pub fn stop(mut self) -> String {
        use std::io::Read;
        let Some(mut c) = self.child.take() else {
            return String::new();
        };
        // SAFETY: kill has no memory-safety preconditions; the pid is our
        // child, not yet reaped, so it cannot name another process.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let mut err = String::new();
        if let Some(mut e) = c.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let st = c.wait().expect("raidlab serve is reaped");
        assert!(st.success(), "raidlab serve stopped with {st}:\n{err}");
        err
    }

    /// kill -9: nothing flushed, nothing marked, a long run cut where it is.
    pub fn kill(mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("raidlab serve is killed");
            c.wait().expect("raidlab serve is reaped");
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
