//! `array:` targets and the arrays `raidlab bench` makes itself: assembled and
//! started as `serve` and `import` start them, stopped cleanly by
//! [`super::Target::finish`]. It must never write an array it was not asked to
//! write.

use super::memory::{describe_limits, throttle_limits, throttled};
use super::{usable, Lanes, OpenOptions, Target, TargetKind};
use raidlab_cache::OriginId;
use raidlab_core::{Error, Result, Volume};
use raidlab_devices::{FileVolume, Limits, OpenMode};
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::lifecycle::{StartOptions, Started};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// An array started for writing, stopped cleanly by [`Target::finish`].
pub(super) struct ArrayHold(pub(super) Started);

pub(super) fn open_array(spec: &str, list: &str, opts: OpenOptions) -> Result<Target> {
    let (options, paths): (Vec<&str>, Vec<&str>) = list
        .split(',')
        .filter(|s| !s.is_empty())
        .partition(|s| s.contains('='));
    let limits = throttle_limits(
        spec,
        options.into_iter(),
        "array:MEMBER,MEMBER,...[,bw=RATE][,iops=N] (each member throttled), e.g. array:a.img,b.img,c.img,bw=150M,iops=150",
    )?;
    if paths.is_empty() {
        return Err(Error::invalid(
            "no members given: write array:MEMBER,MEMBER,... (the member files or devices of one array, any order)",
        )
        .on_device(spec));
    }
    let mode = if opts.writes {
        OpenMode::ReadWrite
    } else {
        OpenMode::ReadOnly
    };
    let mut devices = Vec::new();
    for p in paths {
        let v = FileVolume::open(Path::new(p), mode)?;
        devices.push(Device {
            path: p.to_string(),
            volume: throttled(spec, v, limits)?,
        });
    }
    let asm = Assembly::assemble(devices).map_err(|e| e.on_device(spec))?;
    let uuid = asm.uuid;
    // The same start as serve and import: logs replayed and started before
    // the first write, md's refusals, the array marked dirty while written.
    let started = Started::start(
        asm,
        StartOptions {
            write: opts.writes,
            ..StartOptions::default()
        },
    )
    .map_err(|e| e.on_device(spec))?;
    let array = started.array.clone();
    let hold = opts.writes.then_some(ArrayHold(started));
    let size = usable(spec, array.size(), opts.size)?;
    Ok(Target {
        label: spec.to_string(),
        kind: TargetKind::Array,
        volume: array,
        file: None,
        direct: false,
        size,
        notes: {
            let mut notes = vec!["array members are opened through the page cache (raidlab's FileVolume), as `raidlab import` uses them".to_string()];
            if limits != Limits::unlimited() {
                notes.push(format!(
                    "each member throttled to {}",
                    describe_limits(limits)
                ));
            }
            notes
        },
        fresh: false,
        remove_on_drop: None,
        array: Mutex::new(hold),
        identity: Some(OriginId::ArrayUuid(uuid)),
        cache: Mutex::new(None),
        sim: None,
        lanes: Lanes::default(),
    })
}

/// Make a new array of sparse member files (`create` with mdadm's rules, members
/// zeroed so no resync is needed) and open it as a target. For `raidlab bench` with
/// no target; the caller owns (and removes) the files.
pub fn create_array(
    label: &str,
    level: raidlab_layout::Level,
    chunk: u64,
    members: &[PathBuf],
    member_size: u64,
    opts: OpenOptions,
) -> Result<Target> {
    use raidlab_raid::assemble::{create, CreateSpec, NewMember};
    let mut news = Vec::new();
    for p in members {
        let v = FileVolume::create_sparse(p, member_size)?;
        news.push(NewMember {
            device: Device {
                path: p.display().to_string(),
                volume: Arc::new(v),
            },
            zeroed: true,
        });
    }
    let spec = CreateSpec {
        level,
        layout: raidlab_layout::Layout::parse(level, None)?,
        chunk_bytes: chunk,
        spares: 0,
        name: label.to_string(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let asm = create(&spec, news)?;
    // Drop the creating handles (and their locks) and open it the way a user's
    // `array:` target is opened, so this measures exactly that path.
    drop(asm);
    let list: Vec<String> = members.iter().map(|p| p.display().to_string()).collect();
    let mut t = open_array(label, &list.join(","), opts)?;
    t.label = label.to_string();
    Ok(t)
}

/// A single file opened exactly as an array member is (raidlab's FileVolume), to
/// compare an array with one of its members like with like.
pub fn open_member_file(label: &str, path: &Path, size: u64, opts: OpenOptions) -> Result<Target> {
    let v = FileVolume::create_sparse(path, size)?;
    let mut t = Target::from_volume(label, Arc::new(v), opts.size)?;
    t.kind = TargetKind::File;
    t.notes
        .push("opened through the page cache, as array members are".into());
    Ok(t)
}
