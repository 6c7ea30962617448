//! NBD export targets through raidlab's NBD client: how many connections a
//! benchmark's threads get. It must never open several connections to an export
//! that does not allow them (writes and flushes would not be ordered).

use super::{OpenOptions, Target, TargetKind};
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use std::sync::{Arc, Mutex};

/// An NBD target's first connection and the ones opened for more benchmark
/// threads, kept for the target's life so each test does not reconnect.
#[derive(Default)]
pub(super) struct Lanes {
    first: Option<Arc<raidlab_nbd::client::NbdVolume>>,
    more: Mutex<Vec<Arc<dyn Volume>>>,
}

pub(super) fn open_nbd(spec: &str, opts: OpenOptions) -> Result<Target> {
    let v = raidlab_nbd::client::NbdVolume::connect(spec)?;
    if opts.writes && !v.is_writable() {
        return Err(Error::new(
            ErrorKind::ReadOnly,
            Op::Open,
            "the server exports this read-only: run the read tests only",
        )
        .on_device(spec));
    }
    let info = v.info();
    let multi = v.allows_multi_conn();
    let v = Arc::new(v);
    let mut t = Target::from_volume(spec, v.clone(), opts.size)?;
    t.kind = TargetKind::Nbd;
    t.lanes.first = Some(v);
    t.notes.push(format!(
        "NBD export of {} bytes through raidlab's NBD client: {}, as fio's nbd engine does; the server decides whether its own storage is cached",
        info.size,
        if multi {
            "one connection per benchmark thread, the queue depth's requests in flight on each"
        } else {
            "one connection (the server does not allow several) carrying every thread's requests in flight"
        }
    ));
    Ok(t)
}

impl Target {
    /// The volume benchmark thread `t` drives. An NBD export that allows several
    /// connections gives each thread its own connection (opened on first use),
    /// as fio's nbd engine gives each job its own, so "T threads at queue depth
    /// Q" is T connections with Q requests in flight each, the load fio's
    /// `numjobs=T iodepth=Q` puts on the server; an export that does not allow
    /// several shares one connection. Every other target: the one volume.
    pub fn thread_volume(&self, t: usize) -> Result<Arc<dyn Volume>> {
        let Some(first) = &self.lanes.first else {
            return Ok(self.volume.clone());
        };
        if t == 0 || !first.allows_multi_conn() {
            return Ok(self.volume.clone());
        }
        let mut more = self.lanes.more.lock().unwrap_or_else(|p| p.into_inner());
        while more.len() < t {
            more.push(Arc::new(first.another()?));
        }
        Ok(more[t - 1].clone())
    }
}
