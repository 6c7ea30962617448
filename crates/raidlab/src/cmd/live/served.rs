//! The server side of the management verbs: a request from the control
//! socket carried out on the running array (`raidlab_raid::live`), its
//! progress reported back while it runs. It must never decide what the verb
//! means (the array's engine does) nor print to the terminal (the command side
//! does, `super`).

use super::*;

/// An array a server serves, as management sees it.
pub struct Managed {
    pub export: String,
    pub live: Arc<LiveArray>,
    pub writable: bool,
    /// The I/O mode the export asked for (`None`: each member's default);
    /// members added while served are opened in it.
    pub io: Option<raidlab_devices::IoMode>,
    /// The mode each member was opened in, for `detail`.
    pub io_modes: crate::cmd::serve::MemberIoModes,
}

impl Managed {
    /// Open a member added while served in the export's I/O mode, and
    /// remember the mode it got for `detail`.
    fn open_new(&self, p: &Path) -> Result<raidlab_raid::assemble::Device> {
        let mut opener = raidlab_devices::MemberOpener::new(OpenMode::ReadWrite).with_io(self.io);
        let device = crate::open::open_with(&mut opener, p)?;
        let mut modes = self.io_modes.lock().unwrap_or_else(|e| e.into_inner());
        for (name, io) in opener.io_modes() {
            modes.retain(|(n, _)| n != name);
            modes.push((name.clone(), *io));
        }
        Ok(device)
    }
}

/// Accept control connections until `stop`; each is served on its own thread
/// (a check may run for minutes while `detail` is asked).
pub fn serve_control(
    listener: &UnixListener,
    arrays: Arc<Vec<Managed>>,
    caches: Arc<Vec<ManagedCache>>,
    stop: &'static AtomicBool,
    log: Arc<dyn Fn(&str) + Send + Sync>,
) {
    if listener.set_nonblocking(true).is_err() {
        log("control socket: cannot poll for connections; management is off");
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let (arrays, caches, log) = (arrays.clone(), caches.clone(), log.clone());
                let _ = stream.set_nonblocking(false);
                std::thread::spawn(move || handle(stream, &arrays, &caches, stop, &*log));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                log(&format!("control socket: {e}"));
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// Watch for members the running arrays took out on I/O errors: record them
/// faulty and let hot spares take over; mark arrays clean after their writes
/// stop (md's safe mode): the writable arrays' polls on the long-run driver
/// (`live::drive_polls`), in real time, until the server stops.
pub fn monitor(
    arrays: Arc<Vec<Managed>>,
    stop: &'static AtomicBool,
    log: Arc<dyn Fn(&str) + Send + Sync>,
) {
    let writable: Vec<&Managed> = arrays.iter().filter(|m| m.writable).collect();
    let lives: Vec<Arc<LiveArray>> = writable.iter().map(|m| m.live.clone()).collect();
    let clock = raidlab_core::clock::system();
    let driven = raidlab_raid::live::drive_polls(
        &lives,
        clock.as_ref(),
        &|| stop.load(Ordering::Relaxed),
        &mut |i, said| log(&format!("export {:?}: {said}", writable[i].export)),
    );
    if let Err(e) = driven {
        log(&format!("the arrays' watch stopped: {e}"));
    }
}

fn handle(
    stream: UnixStream,
    arrays: &[Managed],
    caches: &[ManagedCache],
    stop: &'static AtomicBool,
    log: &dyn Fn(&str),
) {
    let reply = match control::read_request(&stream) {
        Ok(req) => match if req.cache.is_some() {
            cache_live::carry_out(&stream, req, caches, log)
        } else if matches!(req.command, Command::List) {
            crate::cmd::monitor::list::answer(arrays, caches)
        } else {
            carry_out(&stream, req, arrays, stop, log)
        } {
            Ok((stdout, exit)) => Reply::Done { stdout, exit },
            Err(e) => Reply::Error {
                message: format!("{e:#}"),
            },
        },
        Err(e) => Reply::Error {
            message: format!("{e:#}"),
        },
    };
    let _ = control::send(&stream, &reply);
}

fn carry_out(
    stream: &UnixStream,
    req: Request,
    arrays: &[Managed],
    stop: &'static AtomicBool,
    log: &dyn Fn(&str),
) -> Result<(String, u8)> {
    let m = arrays
        .iter()
        .find(|m| req.members.iter().any(|p| m.live.has_member(p)))
        .ok_or_else(|| anyhow!("this server does not serve an array with those members"))?;
    let live = &m.live;
    let mutating = !matches!(
        req.command,
        Command::Find
            | Command::Detail { .. }
            | Command::Stop
            | Command::Check { repair: false, .. }
    );
    if mutating && !m.writable {
        anyhow::bail!("export {:?} is served read-only: its membership cannot change and nothing is rebuilt or repaired while it is", m.export);
    }
    let said = |what: &str| log(&format!("export {:?}: {what}", m.export));
    match req.command {
        Command::Find => Ok((String::new(), 0)),
        Command::Detail { json } => {
            let served = ServedInfo {
                pid: std::process::id(),
                export: m.export.clone(),
                status: live.status(),
                member_io: live.member_io(),
                io_modes: m.io_modes.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            };
            // The plain text adds each member's I/O counters in `--watch`'s
            // words (the JSON has them as `served.member_io`).
            let totals = match json {
                true => String::new(),
                false => crate::cmd::watch::render_totals(
                    &serde_json::json!({ "served": serde_json::to_value(&served)? }),
                ),
            };
            let text = live.with_assembly(|asm| render_detail(asm, Some(served), json))?;
            Ok((text + &totals, 0))
        }
        Command::Fail {
            member,
            wait,
            max_rate,
        } => {
            live.set_max_rate(max_rate);
            let out = live.fail(&member)?;
            said(&out);
            finish_with_rebuild(stream, live, out, wait)
        }
        Command::Remove { member } => {
            let out = live.remove(&member)?;
            said(&out);
            Ok((format!("raidlab: {out}\n"), 0))
        }
        Command::Add {
            new,
            force,
            rebuild,
            max_rate,
            re_add,
        } => {
            live.set_max_rate(max_rate);
            // A former member (stale, removed, faulty) served with the array
            // is already open and locked here: take it back through that.
            let same = |p: &str| std::fs::canonicalize(p).ok() == std::fs::canonicalize(&new).ok();
            let held = live.with_assembly(|asm| {
                asm.members
                    .iter()
                    .find(|m| !m.is_live() && same(&m.device.path))
                    .map(|m| m.device.clone())
            });
            let device = match held {
                Some(d) => d,
                None => m.open_new(Path::new(&new))?,
            };
            // As mdadm's --add: a former member is re-added when md would
            // (only its bitmap's dirty chunks resynced), else taken back
            // whole; --re-add asks for the first only.
            let out = match live.re_add_check(&device) {
                Ok(_) => live.re_add(device, rebuild)?,
                Err(e) if re_add => return Err(e.into()),
                Err(_) => live.add(device, force, rebuild)?,
            };
            said(&out);
            finish_with_rebuild(stream, live, out, rebuild)
        }
        Command::Replace {
            old,
            new,
            force,
            rebuild,
            max_rate,
        } => {
            live.set_max_rate(max_rate);
            let device = m.open_new(Path::new(&new))?;
            let out = live.replace(&old, device, force, rebuild)?;
            said(&out);
            finish_with_rebuild(stream, live, out, rebuild)
        }
        Command::Rebuild { max_rate, json } => {
            let out = live.rebuild(max_rate)?;
            said(&out);
            let (text, exit) = finish_with_rebuild(stream, live, out, true)?;
            if json {
                let v = serde_json::json!({"message": text.trim(), "status": live.status()});
                return Ok((serde_json::to_string_pretty(&v)? + "\n", exit));
            }
            Ok((text, exit))
        }
        Command::Check {
            repair,
            json,
            max_rate,
        } => {
            let what = if repair { "repair" } else { "check" };
            said(&format!("{what} started"));
            let opts = RunOptions {
                max_rate,
                stop: Some(stop),
                ..RunOptions::default()
            };
            let report = live.scrub(repair, opts, &mut |p| {
                let _ = control::send(
                    stream,
                    &Reply::Progress {
                        what: what.into(),
                        done: p.done,
                        total: p.total,
                    },
                );
            })?;
            said(&format!(
                "{what} done: mismatch_cnt {}",
                report.mismatch_sectors
            ));
            let exit = crate::cmd::manage::scrub_exit(&report, repair);
            Ok((scrub_text(&report, repair, json)?, exit))
        }
        Command::Grow {
            raid_devices,
            level,
            chunk_bytes,
            layout,
            array_bytes,
            add,
            force,
            continue_reshape,
            max_rate,
            json,
            bitmap,
            bitmap_chunk,
            size,
            assume_clean,
            consistency_policy,
            array_size,
            backup_file,
        } => {
            let array_size = match array_size.as_deref() {
                None => None,
                Some("max") => Some(None),
                Some(b) => {
                    Some(Some(b.parse::<u64>().map_err(|_| {
                        anyhow!("--array-size {b}: not a number of bytes")
                    })?))
                }
            };
            if let (Some(cut), None) = (array_size, &size) {
                let c = live.set_array_size(cut)?;
                said(&format!(
                    "array size {} -> {} bytes (--array-size; the array holds {})",
                    c.old_exposed_bytes, c.new_exposed_bytes, c.holds_bytes
                ));
                return Ok((array_size_text(&c, cut.is_none(), json)?, 0));
            }
            if let Some(p) = consistency_policy {
                let text = crate::cmd::grow::served_policy(live, &p)?;
                said(text.trim_start_matches("raidlab: ").trim_end());
                return Ok((text, 0));
            }
            if let Some(size) = size {
                return served_size(
                    stream,
                    live,
                    &size,
                    assume_clean,
                    array_size,
                    max_rate,
                    stop,
                    json,
                    &said,
                );
            }
            if let Some(add) = bitmap {
                let chunk = bitmap_chunk
                    .map(u32::try_from)
                    .transpose()
                    .map_err(|_| anyhow!("--bitmap-chunk: md's bitmap chunk is at most 2 GiB"))?;
                live.change_running(|asm| asm.grow_bitmap(add, chunk))?;
                let text = live.with_assembly(crate::cmd::grow::bitmap_text);
                said(text.trim_start_matches("raidlab: ").trim_end());
                return Ok((text, 0));
            }
            let level = match level {
                Some(l) => Some(raidlab_layout::Level::from_name(&l)?),
                None => None,
            };
            let req = raidlab_raid::grow::ReshapeRequest {
                raid_devices,
                level,
                chunk_bytes,
                layout,
            };
            if let (true, Some(f)) = (continue_reshape, &backup_file) {
                anyhow::bail!("--continue --backup-file {f} of a served array: a metadata 0.90 restripe through a backup file is resumed offline: stop the server (`raidlab stop`), run `raidlab grow --continue --backup-file {f}` with the members, then serve the array again; nothing was changed");
            }
            let walk = match continue_reshape {
                true => None,
                false => match live.with_assembly_in_service(|asm| {
                    // md's shrink by members fits in an array size set
                    // before (its external size) as in one given with it.
                    let shrinks = req.level.is_none()
                        && req
                            .raid_devices
                            .is_some_and(|n| n < asm.geometry.raid_disks);
                    let array_bytes = match array_bytes {
                        None if shrinks => live.array_size_cut(),
                        b => b,
                    };
                    crate::cmd::grow::served_check(
                        asm,
                        &req,
                        add.len(),
                        array_bytes,
                        backup_file.as_deref().map(Path::new),
                    )
                })? {
                    ServedGrow::Takeover(to) => {
                        let from =
                            live.with_assembly(|asm| crate::cmd::grow::describe(&asm.geometry));
                        live.change_running(|asm| asm.takeover(to))?;
                        let text =
                            live.with_assembly(|asm| crate::cmd::grow::takeover_text(&from, asm));
                        said(text.trim_start_matches("raidlab: ").trim_end());
                        return Ok((text, 0));
                    }
                    ServedGrow::Walk { plan, seen } => Some((plan, seen)),
                    ServedGrow::Convert { steps, seen } => {
                        let adds = add
                            .iter()
                            .map(|p| m.open_new(Path::new(p)))
                            .collect::<Result<Vec<_>>>()?;
                        said("level change asked over the control socket");
                        let opts = RunOptions {
                            max_rate,
                            stop: Some(stop),
                            ..RunOptions::default()
                        };
                        let text = crate::cmd::grow::served_convert(
                            live,
                            &steps,
                            &seen,
                            adds,
                            force,
                            opts,
                            json,
                            &mut |what, p| {
                                let _ = control::send(
                                    stream,
                                    &Reply::Progress {
                                        what: what.into(),
                                        done: p.done,
                                        total: p.total,
                                    },
                                );
                            },
                            &said,
                        )?;
                        return Ok((text, 0));
                    }
                },
            };
            let adds = add
                .iter()
                .map(|p| m.open_new(Path::new(p)))
                .collect::<Result<Vec<_>>>()?;
            let opts = RunOptions {
                max_rate,
                stop: Some(stop),
                ..RunOptions::default()
            };
            said(if continue_reshape {
                "reshape resumed over the control socket"
            } else {
                "reshape asked over the control socket"
            });
            // mdadm's backup file, made before the requests are held (it is
            // written whole); removed again when nothing was recorded.
            let file = match (&walk, &backup_file) {
                (Some((plan, _)), Some(path)) => Some(raidlab_raid::grow::BackupFile::create(
                    Path::new(path),
                    raidlab_raid::assemble::Assembly::backup_file_sectors(plan),
                )?),
                _ => None,
            };
            let recorded = std::cell::Cell::new(false);
            let report = live.reshape_with_backup(
                |asm| {
                    let Some((plan, seen)) = walk else {
                        return Ok(());
                    };
                    let started = crate::cmd::grow::served_start(
                        asm,
                        plan,
                        &seen,
                        adds,
                        force,
                        file.as_ref(),
                    )
                    .map_err(|e| raidlab_core::Error::invalid(format!("{e:#}")));
                    recorded.set(asm.reshape().is_some());
                    started
                },
                file.as_ref(),
                opts,
                &mut |p| {
                    let _ = control::send(
                        stream,
                        &Reply::Progress {
                            what: "reshape".into(),
                            done: p.done,
                            total: p.total,
                        },
                    );
                },
            );
            if let (Err(_), Some(path), false) = (&report, &backup_file, recorded.get()) {
                // Nothing recorded: the file holds nothing anyone needs.
                let _ = std::fs::remove_file(path);
            }
            let report = report?;
            let text = live.with_assembly(|asm| {
                crate::cmd::grow::reshape_text(&report, &asm.geometry, json)
            })?;
            said(&format!(
                "reshape done: {} -> {} members, {} bytes",
                report.old_raid_devices, report.new_raid_devices, report.new_array_bytes
            ));
            Ok((text, 0))
        }
        Command::Stop => {
            said("stop asked over the control socket");
            stop.store(true, Ordering::SeqCst);
            Ok(("raidlab: the server is stopping\n".into(), 0))
        }
        Command::CacheDetail { .. }
        | Command::CacheStats { .. }
        | Command::CacheFlush { .. }
        | Command::CacheSet { .. }
        | Command::CacheDetach { .. } => {
            anyhow::bail!("a cache verb names the cache device, not an array's members")
        }
        Command::List => {
            anyhow::bail!("a list request is answered for the whole server, not for one array")
        }
    }
}

/// What a served `--array-size` did, as the command prints it.
fn array_size_text(
    c: &raidlab_raid::live::ArraySizeChange,
    max: bool,
    json: bool,
) -> Result<String> {
    if json {
        return Ok(serde_json::to_string_pretty(c)? + "\n");
    }
    let how = if max {
        "all the array holds"
    } else {
        "cut by --array-size"
    };
    Ok(format!(
        "raidlab: array size {} -> {} bytes ({how}; the array holds {} bytes); nothing was written to the members; kept while the array is served, forgotten when it stops (as md forgets --array-size)\n",
        c.old_exposed_bytes, c.new_exposed_bytes, c.holds_bytes
    ))
}

/// A served `grow --size`: the change with the requests held, then the
/// resync of the new space here, its progress sent to the command (and in
/// `detail`); it goes on if the command goes away. `array_size`: an
/// `--array-size` given with it, set with the change or not at all.
#[allow(clippy::too_many_arguments)]
fn served_size(
    stream: &UnixStream,
    live: &Arc<LiveArray>,
    size: &str,
    assume_clean: bool,
    array_size: Option<Option<u64>>,
    max_rate: Option<u64>,
    stop: &'static AtomicBool,
    json: bool,
    said: &dyn Fn(&str),
) -> Result<(String, u8)> {
    let req = match size {
        "max" => raidlab_raid::grow::SizeRequest::Max,
        b => raidlab_raid::grow::SizeRequest::Bytes(
            b.parse()
                .map_err(|_| anyhow!("--size {b}: not a number of bytes"))?,
        ),
    };
    said("size change asked over the control socket");
    let opts = RunOptions {
        max_rate,
        stop: Some(stop),
        ..RunOptions::default()
    };
    let (c, resync) = live.resize(req, assume_clean, array_size, opts, &mut |p| {
        let _ = control::send(
            stream,
            &Reply::Progress {
                what: "resync".into(),
                done: p.done,
                total: p.total,
            },
        );
    })?;
    said(&format!(
        "component size {} -> {} bytes, array {} bytes",
        c.old_member_bytes, c.new_member_bytes, c.new_array_bytes
    ));
    if json {
        let v = serde_json::json!({ "size": c, "resync": resync });
        return Ok((serde_json::to_string_pretty(&v)? + "\n", 0));
    }
    let mut text = String::new();
    if let Some(cut) = array_size {
        text += &format!(
            "raidlab: array size {} (--array-size{}; nothing written to the members; kept while the array is served, forgotten when it stops, as md)\n",
            live.exposed_bytes(),
            if cut.is_none() { " max" } else { "" }
        );
    }
    text += &crate::cmd::grow::size_text(&c);
    if let Some(cut) = live.array_size_cut() {
        if cut < c.new_array_bytes {
            text += &format!("raidlab: the clients address {cut} bytes of it (--array-size in force while served; `raidlab grow MEMBERS --array-size max` gives them all)\n");
        }
    }
    if let (Some(from), Some(_)) = (c.resync_from, resync) {
        text += &format!("raidlab: the new space is resynced (from member byte {from}) while the array served; the array is clean\n");
    }
    Ok((text, 0))
}

/// After a change that may have started a rebuild: with `wait`, report its
/// progress until every role is in service (or it failed); the rebuild goes on
/// in the server if the command goes away.
fn finish_with_rebuild(
    stream: &UnixStream,
    live: &LiveArray,
    first: String,
    wait: bool,
) -> Result<(String, u8)> {
    let mut text = format!("raidlab: {first}\n");
    if !wait {
        return Ok((text, 0));
    }
    let mut last = None;
    loop {
        let st = live.status().rebuild;
        let pending = live.with_assembly(|a| !a.rebuilding().is_empty());
        if let Some(s) = &st {
            if s.running {
                let p = Reply::Progress {
                    what: s.kind.clone(),
                    done: s.done,
                    total: s.total,
                };
                if control::send(stream, &p).is_err() {
                    // The command went away (Ctrl-C): the rebuild goes on.
                    return Ok((text, 0));
                }
            } else if let Some(e) = &s.error {
                anyhow::bail!(
                    "the {} of role {} onto {} stopped: {e}",
                    s.kind,
                    s.role.unwrap_or(0),
                    s.device
                );
            }
            if !s.running && last.as_ref() != Some(&s.device) {
                last = Some(s.device.clone());
                let resynced = if s.kind == "re-add" {
                    format!(" (resynced {} bytes of {})", s.written, s.total)
                } else {
                    String::new()
                };
                text += &format!(
                    "raidlab: {} of role {} onto {} complete{resynced}\n",
                    s.kind,
                    s.role.unwrap_or(0),
                    s.device
                );
            }
        }
        // Only once this status said it stopped: a rebuild that ended after
        // the status was taken is reported (complete or not) next time round.
        let seen_running = st.as_ref().is_some_and(|s| s.running);
        if !seen_running && !live.rebuilding() {
            if pending {
                text += "raidlab: a rebuild is pending but not running (see `raidlab detail`); start it with `raidlab rebuild`\n";
            }
            return Ok((text, 0));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
