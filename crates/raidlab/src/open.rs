//! Opening member paths as volumes for the commands.
//!
//! A member name is a file, a block device, or `IMAGE@N`: partition N of a
//! whole-disk image (MBR, logical partitions from 5, or GPT), numbered as Linux
//! numbers them. A name that exists as it is always means that file, even with
//! an `@` in it. The rules live in `raidlab_devices::partition`.
//!
//! When a whole disk is named where its partitions hold the members, the
//! error names those partitions and the command with them in place.

use anyhow::{bail, Context, Result};
use raidlab_core::{SliceVolume, Volume};
use raidlab_devices::{IoMode, MemberOpener, MemberPath, OpenMode, PartitionTable};
use raidlab_md::Superblock;
use raidlab_raid::assemble::{Assembly, Device, MemberState};
use raidlab_raid::lifecycle::{ManageOptions, Managed, StartReport};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The word users give in place of a member that is gone.
pub const MISSING: &str = "missing";

pub fn is_missing(p: &Path) -> bool {
    p.as_os_str() == MISSING
}

/// Open every named member (skipping the word `missing`), locked for `mode`,
/// each in its default I/O mode (direct for block devices, buffered for
/// files). Partitions of one image share the image (one lock); a device
/// named twice is refused.
pub fn open_members(paths: &[PathBuf], mode: OpenMode) -> Result<Vec<Device>> {
    Ok(open_members_io(paths, mode, None)?.0)
}

/// A member as named, with the I/O mode it was opened in.
pub type MemberIo = (String, IoMode);

/// [`open_members`] with the I/O mode the user chose (`--direct`,
/// `--buffered`, a TOML `io` key; `None`: each member's default), and the
/// mode each member got, by name.
pub fn open_members_io(
    paths: &[PathBuf],
    mode: OpenMode,
    io: Option<IoMode>,
) -> Result<(Vec<Device>, Vec<MemberIo>)> {
    let mut opener = MemberOpener::new(mode).with_io(io);
    let mut out = Vec::new();
    for p in paths.iter().filter(|p| !is_missing(p)) {
        out.push(open_with(&mut opener, p)?);
    }
    if out.is_empty() {
        bail!("no members given (only `missing`): name at least one member file or device");
    }
    Ok((out, opener.io_modes().to_vec()))
}

/// Open one member on its own, in its default I/O mode.
pub fn open_device(p: &Path, mode: OpenMode) -> Result<Device> {
    open_device_io(p, mode, None)
}

/// Open one member on its own in I/O mode `io` (`None`: its default).
pub fn open_device_io(p: &Path, mode: OpenMode, io: Option<IoMode>) -> Result<Device> {
    open_with(&mut MemberOpener::new(mode).with_io(io), p)
}

/// Open one member through `opener` (which remembers the images and devices
/// already open for this command).
pub fn open_with(opener: &mut MemberOpener, p: &Path) -> Result<Device> {
    let volume = opener
        .open(p)
        .with_context(|| format!("cannot use member {}", p.display()))?;
    Ok(Device {
        path: p.display().to_string(),
        volume,
    })
}

/// `mdadm --assemble --backup-file` for a stopped metadata 0.90 restripe:
/// `path` checked (not on a member, this array's), the window it holds put
/// back into the members (this writes them), the file returned for a walk
/// that carries on through it. `export` and `serve` both start this way.
pub fn put_back_backup_file(
    asm: &mut Assembly,
    path: &Path,
) -> Result<raidlab_raid::grow::BackupFile> {
    asm.backup_file_path_check(path, false)?;
    let file = raidlab_raid::grow::BackupFile::open(path)?;
    asm.reshape_put_back(&file)?;
    Ok(file)
}

/// Put the array of `devices` together; when one of them carries no
/// superblock itself but partitions of it hold md members (a whole-disk image
/// named where `IMAGE@N` was meant), the error names them and the command to
/// run instead.
pub fn assemble(devices: Vec<Device>) -> Result<Assembly> {
    match Assembly::assemble(devices.clone()) {
        Ok(a) => Ok(a),
        Err(e) => match partition_hint(&devices) {
            Some(hint) => bail!("{hint}"),
            None => Err(e.into()),
        },
    }
}

/// A disk as the user named it, and its partition that holds a member.
type Stands = (String, String);

/// For the devices of `devices` that carry no md superblock themselves, the
/// md members in their partitions:
/// `disk0.img@3 holds member 0 of array UUID ...`, then the command line the
/// user ran with each such disk replaced by its partition of the array (one
/// line per array found). `None` when no partition holds a member.
pub fn partition_hint(devices: &[Device]) -> Option<String> {
    use raidlab_md::superblock::Role;
    let mut lines = Vec::new();
    // Per array (in the order found), which partition stands for which disk.
    let mut arrays: Vec<([u8; 16], Vec<Stands>)> = Vec::new();
    for d in devices {
        if Superblock::read_from(d.volume.as_ref())
            .ok()
            .flatten()
            .is_some()
        {
            continue;
        }
        for f in partition_members(d.volume.clone(), &d.path, &mut |_, _| {}) {
            let what = match f.sb.role() {
                Role::Active(n) => format!("member {n}"),
                Role::Replacement(n) => format!("the replacement of member {n}"),
                Role::Spare => "a spare".into(),
                Role::Faulty => "a faulty member".into(),
                Role::Journal => "the write journal".into(),
                Role::Unknown => "a member".into(),
            };
            let name = if f.sb.set_name.is_empty() {
                String::new()
            } else {
                format!(" {:?}", f.sb.set_name)
            };
            lines.push(format!(
                "{} holds {what} of array{name} UUID {} (level {}, metadata {})",
                f.name,
                raidlab_raid::assemble::format_uuid(&f.sb.set_uuid),
                f.sb.level,
                f.sb.version().name()
            ));
            let uuid = f.sb.set_uuid;
            let i = match arrays.iter().position(|(u, _)| *u == uuid) {
                Some(i) => i,
                None => {
                    arrays.push((uuid, Vec::new()));
                    arrays.len() - 1
                }
            };
            arrays[i].1.push((d.path.clone(), f.name));
        }
    }
    if lines.is_empty() {
        return None;
    }
    let disks: Vec<&str> = {
        let mut v: Vec<&str> = Vec::new();
        for (d, _) in arrays.iter().flat_map(|(_, p)| p) {
            if !v.contains(&d.as_str()) {
                v.push(d);
            }
        }
        v
    };
    let mut out = format!(
        "{} carr{} no md superblock of {} own, but {} partitions hold md members:\n  {}\n",
        disks.join(", "),
        if disks.len() == 1 { "ies" } else { "y" },
        if disks.len() == 1 { "its" } else { "their" },
        if disks.len() == 1 { "its" } else { "their" },
        lines.join("\n  ")
    );
    out += "name the partition (IMAGE@N, as `raidlab scan` lists them), not the whole disk:";
    let args: Vec<String> = std::env::args().skip(1).collect();
    for (_, parts) in &arrays {
        let mut cmd = vec!["raidlab".to_string()];
        for a in &args {
            let mine: Vec<&String> = parts
                .iter()
                .filter(|(d, _)| d == a)
                .map(|(_, p)| p)
                .collect();
            if mine.is_empty() {
                cmd.push(shell_quote(a));
            } else {
                cmd.extend(mine.iter().map(|p| shell_quote(p)));
            }
        }
        out += &format!("\n  {}", cmd.join(" "));
    }
    Some(out)
}

/// One device or partition that carries an md superblock.
pub struct Found {
    /// The member name raidlab takes (`disk.img@5` for a partition).
    pub name: String,
    pub sb: Superblock,
}

/// The md superblock of `vol` (named `name`), if it has one; a damaged one is
/// told to `skip` (name, why).
pub fn probe(
    vol: &dyn Volume,
    name: String,
    skip: &mut dyn FnMut(String, String),
) -> Option<Found> {
    match Superblock::read_from(vol) {
        Ok(Some(sb)) => Some(Found { name, sb }),
        Ok(None) => None,
        Err(e) => {
            skip(name, format!("damaged md superblock: {e}"));
            None
        }
    }
}

/// The md members among the partitions of `vol` (named `shown`), named
/// `shown@N`; partitions that cannot be used are told to `skip` (name, why).
/// Reads the partition table and the superblock places only.
pub fn partition_members(
    vol: Arc<dyn Volume>,
    shown: &str,
    skip: &mut dyn FnMut(String, String),
) -> Vec<Found> {
    let mut here = Vec::new();
    match PartitionTable::read(vol.as_ref()) {
        Ok(Some(t)) => {
            for part in t.partitions.iter().filter(|x| !x.extended) {
                let name = format!("{shown}@{}", part.number);
                if let Some(why) = &part.problem {
                    skip(name, why.clone());
                    continue;
                }
                let Ok(slice) = SliceVolume::named(vol.clone(), part.start, part.len, name.clone())
                else {
                    continue;
                };
                here.extend(probe(&slice, name, skip));
            }
        }
        Ok(None) => {}
        Err(e) => skip(shown.to_string(), format!("partition table not read: {e}")),
    }
    here
}

/// `s` as one word of a shell command line.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Whether `p` names something that exists: a file or device, or a partition
/// of an existing image (`disk.img@3`). Verbs that create missing member
/// files ask this first, so `disk.img@3` never becomes a new file of that name.
pub fn member_exists(p: &Path) -> bool {
    match MemberPath::parse(p) {
        MemberPath::Whole(p) => p.exists(),
        MemberPath::Partition { .. } => true,
    }
}

/// Start an array for an offline management verb through the lifecycle
/// ([`Managed::start`]): a writing verb's logs are replayed first, as md does
/// at every start, with a member whose I/O fails there taken out and
/// recorded faulty. Says on stderr what the start did.
pub fn start_managed(asm: Assembly, opts: ManageOptions) -> Result<Managed> {
    let managed = Managed::start(asm, opts)?;
    say_started(&managed.report, "");
    say_taken_out(&managed.report.taken_out);
    Ok(managed)
}

/// Stop what [`start_managed`] started; says on stderr which members it
/// took out.
pub fn stop_managed(managed: Managed) -> Result<()> {
    say_taken_out(&managed.stop()?);
    Ok(())
}

/// Say on stderr which members a start or a stop took out (each line says
/// which member and why), and that the array goes on without them.
pub fn say_taken_out(taken_out: &[String]) {
    for t in taken_out {
        eprintln!("raidlab: {t}; it is recorded faulty in the other members' superblocks and the array goes on degraded (`raidlab add` with a working device rebuilds its role)");
    }
}

/// Tell the user what starting an array did on disk (`label` prefixes each
/// line, e.g. `export "a": `).
pub fn say_started(report: &StartReport, label: &str) {
    if let Some(r) = &report.journal {
        if r.fresh {
            eprintln!(
                "raidlab: {label}the write journal held no valid meta block at its tail (journal device wiped, or from another array?): a new log was begun, as md does; nothing was replayed"
            );
        }
        if r.replayed_anything() || r.torn_blocks > 0 {
            eprintln!(
                "raidlab: {label}replayed the write journal: {} stripe(s) written back from {} meta block(s){}{}; stripes are consistent, no resync needed",
                r.stripes_replayed + r.data_only_stripes,
                r.meta_blocks,
                // Data-only stripes are what a write-back crash leaves: the
                // count tells the user (and the md VM test) that acknowledged
                // writes were in the journal alone.
                if r.data_only_stripes > 0 {
                    format!(
                        " ({} of them data-only, written through the array with parity computed afresh)",
                        r.data_only_stripes
                    )
                } else {
                    String::new()
                },
                if r.torn_blocks > 0 {
                    format!(
                        "; {} torn journal block(s) skipped (their writes never reached the members)",
                        r.torn_blocks
                    )
                } else {
                    String::new()
                }
            );
        }
    }
    if let Some(r) = &report.ppl {
        eprintln!(
            "raidlab: {label}the array was not stopped cleanly: replayed {} partial parity log entr{} ({} parity bytes rewritten{})",
            r.entries_replayed,
            if r.entries_replayed == 1 { "y" } else { "ies" },
            r.parity_bytes,
            if r.mismatches > 0 {
                format!(
                    "; {} entr{} did not check out, so a resync is still needed: `raidlab resync`",
                    r.mismatches,
                    if r.mismatches == 1 { "y" } else { "ies" }
                )
            } else {
                "; parity is consistent, no resync needed".to_string()
            }
        );
    }
    if let Some(r) = &report.resync {
        eprintln!(
            "raidlab: {label}the array was not stopped cleanly; resyncing before use: done, {} sectors corrected",
            r.mismatch_sectors
        );
    }
}

/// Say on stderr which given members the array sets aside (stale, removed,
/// faulty): they are neither read nor written, and a user who listed one
/// should not think it serves.
pub fn warn_set_aside(asm: &Assembly) {
    for m in &asm.members {
        let why = match m.state {
            MemberState::Stale => "stale (it missed writes)",
            MemberState::Removed => "removed from the array",
            MemberState::Faulty => "faulty",
            _ => continue,
        };
        eprintln!(
            "raidlab: {} is {why}: its data is out of date and it is neither read nor written (`raidlab add` with it as --new takes it back with a rebuild)",
            m.device.path
        );
    }
}
